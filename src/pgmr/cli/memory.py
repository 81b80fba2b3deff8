"""`pgmr memory build|search|info`: the non-parametric memory."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, progress_callback
from pgmr.config import default_memory_dir
from pgmr.datasets import DatasetError
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import INDEX_KINDS, Memory, PgmrMemoryError, load_encoder, read_manifest
from pgmr.precision import DEFAULT_PRECISION
from pgmr.resolver.priors import counts_from_dataset

app = typer.Typer(help="Build, inspect and search the entity and relation memory.", no_args_is_help=True)

MEMORY_OPTION = typer.Option(None, "--memory", "-m", help="Memory directory (default: ~/.cache/pgmr/memory)")


def open_memory(path: Path | None, precision: str = DEFAULT_PRECISION) -> Memory:
    try:
        return Memory.load(path or default_memory_dir(), precision=precision)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


@app.command()
def build(
    ctx: typer.Context,
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Memory directory to write"),
    encoder: str | None = typer.Option(
        None, help="sentence-transformers model path or name (default: bundled all-MiniLM-L6-v2)"
    ),
    index: str = typer.Option("flat", help=f"Index kind: {', '.join(INDEX_KINDS)}"),
    prior_from: str | None = typer.Option(
        "lcquad2-train-part",
        help="Dataset (file or name) whose gold queries give the prominence prior; 'none' for ID numbers only "
        "(default: LC-QuAD 2.0 train without the validation carve, so validation figures stay honest)",
    ),
    batch_size: int = typer.Option(128, min=1),
) -> None:
    """Embed every label (+ aliases) with its description and write the FAISS indexes atomically."""
    settings: Settings = ctx.obj
    if index not in INDEX_KINDS:
        console.print(f"[red]error:[/red] unknown index kind {index!r}; choose from {', '.join(INDEX_KINDS)}")
        raise typer.Exit(2)
    target = out_dir or default_memory_dir()
    catalog = LabelCatalog.from_data_dir(settings.data_dir)
    counts = None
    if prior_from and prior_from.lower() != "none":
        try:
            counts = counts_from_dataset(prior_from, settings.data_dir)
        except DatasetError as exc:
            print_error(
                f"cannot count the prior from {prior_from}: {exc} (use --prior-from none to build without)"
            )
            raise typer.Exit(2) from None
        console.print(f"prior: {len(counts)} IDs counted in the gold queries of {prior_from}")
    text_encoder = load_encoder(encoder)
    with progress_callback("encoding texts") as progress:
        memory = Memory.build(
            catalog,
            target,
            text_encoder,
            index_kind=index,
            batch_size=batch_size,
            progress=progress,
            prior_counts=counts,
        )
    stats = memory.build_stats
    table = Table(title=f"memory written to {target}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for kind in ("entity", "relation"):
        d = memory.dictionary(kind)
        table.add_row(f"{kind} IDs / rows", f"{len(d)} / {len(d.rows)}")
    if stats:
        table.add_row("texts (encoded / cached)", f"{stats.texts} ({stats.encoded} / {stats.cached})")
        table.add_row("seconds (encoding / total)", f"{stats.encode_seconds:.1f} / {stats.seconds:.1f}")
    out.print(table)


@app.command()
def search(
    text: str = typer.Argument(..., help="Label, or 'label, description'"),
    kind: str = typer.Option("entity", help="entity | relation"),
    k: int = typer.Option(5, "-k", min=1),
    memory_dir: Path | None = MEMORY_OPTION,
    json_out: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Nearest memory entries of a text."""
    if kind not in ("entity", "relation"):
        console.print("[red]error:[/red] --kind must be entity or relation")
        raise typer.Exit(2)
    memory = open_memory(memory_dir)
    hits = memory.dictionary(kind).search([text], k=k)[0]  # type: ignore[arg-type]
    if json_out:
        import json

        for h in hits:
            out.print_json(
                json.dumps({"id": h.id, "label": h.label, "description": h.description, "score": h.score})
            )
        return
    table = Table(title=f"{kind} memory: {text!r}")
    for col in ("rank", "id", "label", "description", "score"):
        table.add_column(col, justify="right" if col in ("rank", "score") else "left")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), h.id, escape(h.label), escape(h.description or ""), f"{h.score:.3f}")
    out.print(table)


@app.command()
def info(memory_dir: Path | None = MEMORY_OPTION) -> None:
    """Show a memory's manifest."""
    path = memory_dir or default_memory_dir()
    try:
        manifest = read_manifest(path)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    import json

    out.print_json(json.dumps(manifest.to_json()))


__all__ = ["app", "open_memory"]
