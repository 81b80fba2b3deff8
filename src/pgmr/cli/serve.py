"""`pgmr serve`: the HTTP service and its web page (uvicorn, one process, loopback by default)."""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, replace
from pathlib import Path

import typer

from pgmr.cli.ask import (
    K_OPTION,
    KG_CHECK_OPTION,
    MAX_PROBES_OPTION,
    MEMORY_OPTION,
    MODEL_OPTION,
    REFUSAL_OPTION,
    STORE_OPTION,
    THRESHOLD_OPTION,
    TIMEOUT_OPTION,
    build_config,
    load_pipeline,
)
from pgmr.cli.common import PRECISION_OPTION, console, print_error
from pgmr.service.limits import DEFAULT_DEADLINE, DEFAULT_MAX_CONCURRENCY, DEFAULT_MAX_QUEUE, ServiceLimits


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int) -> None:
    """Exit with 2 when `host:port` cannot be bound: checked before the (slow) model load, after which a taken
    port would otherwise fail."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((host, port))
    except OSError as exc:
        print_error(f"cannot listen on {host}:{port}: {exc.strerror or exc}")
        raise typer.Exit(2) from None


@dataclass(frozen=True)
class DatasetSpec:
    """`--dataset NAME=MEMORY[,MODEL[,STORE]]`: a graph GET /text2sparql answers for."""

    name: str
    memory: Path
    model: Path | None = None
    store: str | None = None


def parse_dataset(spec: str) -> DatasetSpec:
    """Checked at the edge: a usage error names what is wrong with the spec."""
    name, sep, rest = spec.rpartition("=")
    parts = [p.strip() for p in rest.split(",")] if sep else []
    if not name.strip() or not parts or not parts[0] or len(parts) > 3:
        raise typer.BadParameter(f"{spec!r}: expected NAME=MEMORY[,MODEL[,STORE]]", param_hint="--dataset")
    memory = Path(parts[0]).expanduser()
    if not (memory / "manifest.json").is_file():
        raise typer.BadParameter(f"{spec!r}: no memory at {memory}", param_hint="--dataset")
    model = Path(parts[1]).expanduser() if len(parts) > 1 and parts[1] else None
    store = parts[2] if len(parts) > 2 and parts[2] else None
    return DatasetSpec(name.strip(), memory, model, store)


def serve(
    ctx: typer.Context,
    host: str = typer.Option(
        "127.0.0.1", help="Address to bind (loopback by default: there is no authentication)"
    ),
    port: int = typer.Option(8000, min=1, max=65535),
    model: Path | None = MODEL_OPTION,
    memory_dir: Path | None = MEMORY_OPTION,
    store: str | None = STORE_OPTION,
    k: int = K_OPTION,
    threshold: float = THRESHOLD_OPTION,
    refusal: bool = REFUSAL_OPTION,
    kg_check: bool = KG_CHECK_OPTION,
    max_probes: int = MAX_PROBES_OPTION,
    timeout: float = TIMEOUT_OPTION,
    precision: str = PRECISION_OPTION,
    log_level: str = typer.Option("info", help="uvicorn log level: critical, error, warning, info, debug"),
    max_concurrency: int = typer.Option(
        DEFAULT_MAX_CONCURRENCY,
        help="Requests at work at once (questions beyond the model's batch of 16 would only wait inside it)",
    ),
    max_queue: int = typer.Option(
        DEFAULT_MAX_QUEUE,
        help="Requests waiting for a worker; beyond that the answer is 503 with Retry-After",
    ),
    deadline: float = typer.Option(
        DEFAULT_DEADLINE,
        help="Seconds from arrival to answer, queue included; later: 504 (the work may go on)",
    ),
    dataset: list[str] | None = typer.Option(
        None,
        "--dataset",
        help="NAME=MEMORY[,MODEL[,STORE]] (repeat): GET /text2sparql?dataset=NAME answers over that memory, "
        "with that generator (default: --model) and store (default: none); docs/own-graph.md",
    ),
) -> None:
    """Serve POST /ask, POST /resolve, GET /memory/search, GET /health, the OpenAPI docs and a web page."""
    try:
        import uvicorn

        from pgmr.service import create_app
    except ImportError as exc:
        print_error(f"the service needs the 'serve' extra ({exc.name} is missing): pip install 'pgmr[serve]'")
        raise typer.Exit(2) from None
    if log_level not in ("critical", "error", "warning", "info", "debug"):
        print_error(f"unknown log level {log_level!r}")
        raise typer.Exit(2)
    # Validated here, once, before the slow model load; the app trusts what it is given.
    try:
        limits = ServiceLimits(max_concurrency=max_concurrency, max_queue=max_queue, deadline=deadline)
    except ValueError as exc:
        print_error(str(exc))
        raise typer.Exit(2) from None
    if not is_loopback(host):
        console.print(
            f"[yellow]warning:[/yellow] binding to {host}: the service has no authentication; "
            "anyone who can reach this address can use it"
        )
    specs = [parse_dataset(d) for d in dataset or ()]
    check_port(host, port)
    config = build_config(
        ctx.obj,
        model=model,
        memory_dir=memory_dir,
        store=store,
        k=k,
        threshold=threshold,
        kg_check=kg_check,
        max_probes=max_probes,
        timeout=timeout,
        verify_memory=True,
        refusal=refusal,
        precision=precision,
    )
    # Loaded here rather than in the app's lifespan so that a missing model or memory is a one-line error.
    pipeline = load_pipeline(config)
    graphs = {}
    try:
        for spec in specs:
            graphs[spec.name] = load_pipeline(
                replace(
                    config, memory_dir=spec.memory, model_dir=spec.model or config.model_dir, store=spec.store
                )
            )
        console.print(f"pgmr serving on http://{host}:{port}/ (API docs at /docs); Ctrl+C stops it")
        for name in graphs:
            console.print(f"GET /text2sparql?dataset={name}&question=...")
        app = create_app(pipeline=pipeline, limits=limits, datasets=graphs)
        uvicorn.run(app, host=host, port=port, log_level=log_level, workers=1)
    finally:
        for graph in graphs.values():
            graph.close()
        pipeline.close()


__all__ = ["serve"]
