"""`pgmr convert`: gold (question, SPARQL) datasets -> SPARQL-PGMR training data."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, track
from pgmr.conversion import ConversionSummary, convert_records, roundtrip_problem
from pgmr.datasets import DatasetError, load_any
from pgmr.datasets.loaders import NAMED_DATASETS
from pgmr.jsonl import write_json, write_jsonl
from pgmr.kg.catalog import LabelCatalog


def convert(
    ctx: typer.Context,
    dataset: str = typer.Argument(
        ...,
        help=f"A dataset file (LC-QuAD 2.0 JSON/JSONL, QALD JSON, JSONL) or a name: {', '.join(NAMED_DATASETS)}",
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="Output JSONL of converted records"),
    fmt: str = typer.Option("auto", "--format", help="auto | lcquad2 | qald | jsonl"),
    summary_path: Path | None = typer.Option(
        None, "--summary", help="Summary JSON (default: OUT.summary.json)"
    ),
    verify: bool = typer.Option(
        True, help="Check that fill(convert(gold)) parses to the gold query's algebra"
    ),
    memory_dir: Path | None = typer.Option(
        None,
        "--memory",
        "-m",
        help="A memory of your own graph (`pgmr memory build --from-rdf/--from-endpoint`): gold queries over "
        "that graph are converted with its labels (default: Wikidata, the data directory's label files)",
    ),
) -> None:
    """Convert gold SPARQL to SPARQL-PGMR with the catalog's labels and descriptions."""
    settings: Settings = ctx.obj
    try:
        loaded = load_any(dataset, settings.data_dir, fmt)
    except DatasetError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    catalog = graph_catalog_for(memory_dir) if memory_dir else LabelCatalog.from_data_dir(settings.data_dir)
    summary = ConversionSummary()
    for skipped in loaded.skipped:
        summary.records_in += 1
        summary.skip(f"load:{skipped.reason}", f"#{skipped.index}: {skipped.detail}")
    records = list(
        convert_records(track(loaded.records, "converting", len(loaded.records)), catalog, summary)
    )
    result = summary.to_json()
    if verify:
        problems: Counter[str] = Counter()
        examples: dict[str, list[str]] = {}
        for record in track(records, "verifying round trip", len(records)):
            problem = roundtrip_problem(record)
            if problem:
                problems[problem] += 1
                examples.setdefault(problem, [])
                if len(examples[problem]) < 5:
                    examples[problem].append(record.id)
        lossless = len(records) - sum(problems.values())
        result["roundtrip"] = {
            "checked": len(records),
            "lossless": lossless,
            "lossless_rate": lossless / len(records) if records else 1.0,
            "problems": dict(problems),
            "examples": examples,
        }
    write_jsonl(out_path, (r.to_json() for r in records))
    write_json(summary_path or out_path.with_suffix(".summary.json"), {"dataset": dataset, **result})
    out.print(_summary_table(dataset, result))
    console.print(f"wrote {len(records)} records to {out_path}")


def graph_catalog_for(memory_dir: Path) -> LabelCatalog:
    """The catalog of a memory of your own graph (exit 2 for a Wikidata memory or one that does not load)."""
    from pgmr.memory import Memory, PgmrMemoryError
    from pgmr.memory.graph_file import graph_catalog

    try:
        memory = Memory.load(memory_dir, warm=False)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    if memory.graph is None:
        print_error(
            f"{memory_dir} is a Wikidata memory; Wikidata queries convert with the data directory's labels "
            "(leave out --memory)"
        )
        raise typer.Exit(2)
    return graph_catalog(memory.entities.rows, memory.relations.rows, memory.graph)


def _summary_table(dataset: str, result: dict) -> Table:
    table = Table(title=f"pgmr convert: {dataset}")
    table.add_column("measure")
    table.add_column("count", justify="right")
    table.add_row("records in", str(result["records_in"]))
    table.add_row("converted", str(result["converted"]))
    for reason, count in sorted(result["skipped"].items()):
        table.add_row(f"skipped: {reason}", str(count))
    if "roundtrip" in result:
        rt = result["roundtrip"]
        table.add_row("round trip lossless", f"{rt['lossless']} ({rt['lossless_rate']:.2%})")
        for reason, count in sorted(rt["problems"].items()):
            table.add_row(f"round trip: {reason}", str(count))
    return table
