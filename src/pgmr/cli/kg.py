"""`pgmr kg load|query`: build an embedded knowledge-graph store and run read-only SPARQL against any store."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import typer
from rich.progress import TaskID
from rich.table import Table
from rich.text import Text

from pgmr.cli.common import Settings, console, out, print_error, progress_bar
from pgmr.stores import QueryResult, StoreError, default_kg_file, open_store

app = typer.Typer(
    help="Load RDF into an embedded store and run read-only SPARQL (embedded store or HTTP endpoint).",
    no_args_is_help=True,
)


@app.command()
def load(
    files: list[Path] = typer.Argument(..., help="RDF files: .nt, .ttl, .nq (also .gz)"),
    store_dir: Path = typer.Option(..., "--store", "-s", help="Store directory (created if missing)"),
    rdf_format: str | None = typer.Option(
        None, "--format", "-f", help="RDF format for every file (default: from each file's suffix)"
    ),
) -> None:
    """Bulk-load RDF files into an on-disk oxigraph store."""
    from pgmr.stores.oxigraph_store import LoadProgress, OxigraphStore
    from pgmr.stores.oxigraph_store import rdf_format as format_of

    for path in files:
        if not path.is_file():
            print_error(f"RDF file {path} not found")
            raise typer.Exit(2)
    try:
        for path in files:  # every file's format checked before anything is written
            format_of(path, rdf_format)
        store = OxigraphStore.open(store_dir, read_only=False)
    except StoreError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    table = Table(title=f"loaded into {store_dir}")
    table.add_column("file")
    table.add_column("statements", justify="right")
    total = 0
    started = time.perf_counter()
    with store, progress_bar() as bar:
        for path in files:
            task = bar.add_task(f"{path.name}: 0 statements", total=max(path.stat().st_size, 1))

            def report(p: LoadProgress, task: TaskID = task) -> None:
                bar.update(
                    task, completed=p.bytes_read, description=f"{p.path.name}: {p.triples:,} statements"
                )

            try:
                count = store.load(path, rdf_format, progress=report)
            except StoreError as exc:
                bar.stop()
                print_error(exc)
                raise typer.Exit(2) from None
            total += count
            table.add_row(Text(str(path)), f"{count:,}")
        size = len(store)
    table.add_row("total", f"{total:,}")
    out.print(table)
    console.print(f"{size:,} distinct statements in the store ({time.perf_counter() - started:.1f} s)")


def _read_query(text: str) -> str:
    if text == "-":
        return sys.stdin.read()
    if text.startswith("@"):
        path = Path(text[1:])
        try:
            return path.read_text(encoding="utf-8")
        except OSError as exc:
            raise StoreError(f"cannot read the query file {path}: {exc.strerror or exc}") from None
    return text


def _print_result(result: QueryResult) -> None:
    if result.kind == "boolean":
        out.print("true" if result.boolean else "false")
        return
    table = Table(show_lines=False)
    for var in result.variables:
        table.add_column(f"?{var}")
    for row in result.rows:
        # Text cells: values are data, never rich markup.
        table.add_row(*(Text(row[v].short()) if v in row else Text("") for v in result.variables))
    out.print(table)


@app.command()
def query(
    ctx: typer.Context,
    sparql: str = typer.Argument(..., help="SPARQL query text, @FILE to read it from a file, or - for stdin"),
    store_spec: str | None = typer.Option(
        None,
        "--store",
        "-s",
        help="'wdqs' or 'qlever-wikidata' (public Wikidata endpoints), http(s) endpoint URL, oxigraph store "
        "directory, or RDF file "
        "(default: the QALD-10 answer graph in the data directory)",
    ),
    json_out: bool = typer.Option(False, "--json", help="SPARQL JSON results on stdout instead of a table"),
    timeout: float = typer.Option(30.0, min=0.001, help="Seconds before the query is abandoned"),
) -> None:
    """Run one read-only SPARQL query (standard Wikidata prefixes need no PREFIX lines)."""
    try:
        text = _read_query(sparql)
        if store_spec is None:
            settings: Settings = ctx.obj
            spec: str | Path = default_kg_file(settings.data_dir)
        else:
            spec = store_spec
        started = time.perf_counter()
        with_store = open_store(spec, timeout=timeout)
        try:
            result = with_store.query(text, timeout=timeout)
        finally:
            with_store.close()
    except (StoreError, FileNotFoundError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    elapsed = time.perf_counter() - started
    if json_out:
        typer.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
        return
    _print_result(result)
    if result.kind != "boolean":
        n = len(result.rows)
        console.print(f"{n} {'row' if n == 1 else 'rows'} in {elapsed:.2f} s")


__all__ = ["app"]
