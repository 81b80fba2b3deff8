"""`pgmr synthesize`: training questions made from the graph's own labels (pgmr.synthesis)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import typer

from pgmr.cli.common import Settings, console, print_error
from pgmr.datasets import DatasetError, load_any
from pgmr.jsonl import write_jsonl
from pgmr.kg.catalog import LabelCatalog
from pgmr.synthesis import facts_from_queries, plain_questions
from pgmr.synthesis.plain_questions import property_datatypes


def synthesize(
    ctx: typer.Context,
    out_path: Path = typer.Option(..., "--out", "-o", help="Output JSONL: {id, question, sparql, shape}"),
    count: int = typer.Option(8000, min=1, help="Questions to write"),
    facts_from: list[str] = typer.Option(
        ["lcquad2-train-part", "qald10-train-part"],
        "--facts-from",
        help="Training datasets whose gold queries give the facts asked about (never a validation or test set)",
    ),
    seed: int = typer.Option(0, help="The same seed, data and count give the same file"),
) -> None:
    """Write plain one-hop questions ("Who founded X?", "Where was X born?") over the facts of training
    queries, worded from the catalog's labels and aliases; train on them with `pgmr train --extra-train`."""
    settings: Settings = ctx.obj
    sparqls: list[str] = []
    try:
        for name in facts_from:
            sparqls.extend(r.sparql for r in load_any(name, settings.data_dir).records)
    except DatasetError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    catalog = LabelCatalog.from_data_dir(settings.data_dir)
    facts = facts_from_queries(sparqls)
    try:
        records = plain_questions(
            facts, catalog, count, datatypes=property_datatypes(settings.data_dir), seed=seed
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    rows = [
        {"id": r.id, "question": r.question, "sparql": r.sparql, "shape": dict(r.meta).get("shape")}
        for r in records
    ]
    write_jsonl(out_path, rows)
    shapes = Counter(row["shape"] for row in rows)
    console.print(
        f"wrote {len(rows)} questions to {out_path} from {len(facts)} facts of {len(sparqls)} queries "
        f"({', '.join(f'{k} {v}' for k, v in sorted(shapes.items()))})"
    )
