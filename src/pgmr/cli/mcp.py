"""`pgmr mcp`: the pipeline as tools for LLM agents over the Model Context Protocol (stdio or HTTP)."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer
from rich.console import Console

from pgmr.cli.ask import (
    K_OPTION,
    KG_CHECK_OPTION,
    MAX_PROBES_OPTION,
    MEMORY_OPTION,
    MODEL_OPTION,
    REFUSAL_OPTION,
    THRESHOLD_OPTION,
    TIMEOUT_OPTION,
    build_config,
    load_pipeline,
)
from pgmr.cli.common import PRECISION_OPTION, print_error
from pgmr.cli.serve import check_port, is_loopback

if TYPE_CHECKING:
    from pgmr.pipeline import Pipeline
    from pgmr.stores import SparqlStore

# stdout is the protocol's wire under stdio: everything for people goes to stderr.
err = Console(stderr=True)


def _named_stores(specs: list[str]) -> list[tuple[str, str]]:
    """`NAME=SPEC` or `SPEC` (named `default`, then `store2`, ...), in the order given; names are unique."""
    from pgmr.service.agent_tools import DEFAULT_STORE

    named: list[tuple[str, str]] = []
    for i, spec in enumerate(specs):
        name, sep, rest = spec.partition("=")
        if sep and name and "/" not in name and ":" not in name:
            named.append((name.strip(), rest.strip()))
        else:
            named.append((DEFAULT_STORE if i == 0 else f"store{i + 1}", spec.strip()))
    names = [n for n, _ in named]
    if len(set(names)) != len(names):
        print_error(f"store names must be unique: {', '.join(names)}")
        raise typer.Exit(2)
    return named


def mcp(
    ctx: typer.Context,
    transport: str = typer.Option(
        "stdio", help="stdio (an MCP client starts pgmr) or http (streamable HTTP)"
    ),
    host: str = typer.Option(
        "127.0.0.1", help="http: address to bind (loopback by default: no authentication)"
    ),
    port: int = typer.Option(8765, min=1, max=65535, help="http: port; the endpoint is /mcp"),
    store: list[str] = typer.Option(
        None,
        "--store",
        help="A store the tools may use, as NAME=SPEC or SPEC (repeatable; SPEC as in `pgmr ask --store`). "
        "The first is the pipeline's own. Tool calls name stores, never URLs. Default: the data directory's "
        "KG as 'default'; 'none' for no store",
    ),
    model: Path | None = MODEL_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    k: int = K_OPTION,
    threshold: float = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    kg_check: bool = KG_CHECK_OPTION,
    max_probes: int = MAX_PROBES_OPTION,
    timeout: float = TIMEOUT_OPTION,
    precision: str = PRECISION_OPTION,
) -> None:
    """Serve question_to_sparql, search_entities, search_properties, resolve, validate_sparql and run_sparql
    to MCP clients (see docs/mcp.md for client configuration)."""
    try:
        from pgmr.service.agent_tools import DEFAULT_STORE, AgentTools
        from pgmr.service.mcp_server import run_server
    except ImportError as exc:
        print_error(f"the MCP server needs the 'mcp' extra ({exc.name} is missing): pip install 'pgmr[mcp]'")
        raise typer.Exit(2) from None
    if transport not in ("stdio", "http"):
        print_error(f"unknown transport {transport!r}: use stdio or http")
        raise typer.Exit(2)
    if transport == "http":
        if not is_loopback(host):
            err.print(
                f"[yellow]warning:[/yellow] binding to {host}: the MCP server has no authentication; "
                "anyone who can reach this address can use it"
            )
        check_port(host, port)
    named = _named_stores(list(store or []))
    # The first store is the pipeline's (its KG checks and answers); `none` there means the pipeline has none.
    first = named[0][1] if named else None
    others = named[1:]
    if first is not None and first.lower() == "none":
        named = []
    with contextlib.redirect_stdout(sys.stderr):
        config = build_config(
            ctx.obj,
            model=model,
            memory_dir=memory_dir,
            store=first,
            k=k,
            threshold=threshold,
            kg_check=kg_check,
            max_probes=max_probes,
            timeout=timeout,
            verify_memory=True,
            refusal=refusal,
            precision=precision,
        )
        pipeline = load_pipeline(config)
    stores = _open_stores(pipeline, named[0][0] if named else DEFAULT_STORE, others, timeout)
    tools = AgentTools(pipeline, stores, timeout=timeout)
    where = "stdio" if transport == "stdio" else f"http://{host}:{port}/mcp"
    err.print(f"pgmr MCP server on {where}; stores: {', '.join(stores) or 'none'}")
    try:
        run_server(tools, "stdio" if transport == "stdio" else "http", host=host, port=port)
    except KeyboardInterrupt:
        pass
    finally:
        for opened in stores.values():
            if opened is not pipeline.store:
                opened.close()
        pipeline.close()


def _open_stores(
    pipeline: Pipeline, own_name: str, others: list[tuple[str, str]], timeout: float
) -> dict[str, SparqlStore]:
    """The pipeline's own store under its name, then the others, opened here (a failure exits with 2)."""
    from pgmr.stores import StoreError, open_store

    stores: dict[str, SparqlStore] = {}
    if pipeline.store is not None:
        stores[own_name] = pipeline.store
    for name, spec in others:
        try:
            stores[name] = open_store(spec, timeout=timeout)
        except (StoreError, OSError, ValueError) as exc:
            print_error(f"cannot open the store {name}={spec}: {exc}")
            pipeline.close()
            raise typer.Exit(2) from None
    return stores


__all__ = ["mcp"]
