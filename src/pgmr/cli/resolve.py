"""`pgmr resolve`: intermediate queries in (JSONL), final SPARQL or refusals out (JSONL)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pgmr.cli.common import console, out, print_error, progress_bar
from pgmr.cli.memory import MEMORY_OPTION, open_memory
from pgmr.jsonl import JsonlError, read_jsonl, write_jsonl
from pgmr.resolver import Resolver, ResolverConfig

TEXT_FIELDS = ("intermediate", "prediction", "text")


def _text_of(record: dict[str, Any], field: str | None) -> object:
    if field:
        return record.get(field)
    return next((record[f] for f in TEXT_FIELDS if f in record), None)


def resolve(
    in_path: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="JSONL with an 'intermediate' field"
    ),
    out_path: Path = typer.Option(..., "--out", "-o", help="Output JSONL"),
    field: str | None = typer.Option(
        None, help=f"Field holding the query text (default: first of {TEXT_FIELDS})"
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    k: int = typer.Option(5, "-k", min=1, help="Candidates kept per placeholder as evidence"),
    entity_threshold: float = typer.Option(
        0.0, min=-1.0, max=1.0, help="Refuse below this entity similarity"
    ),
    relation_threshold: float = typer.Option(
        0.0, min=-1.0, max=1.0, help="Refuse below this relation similarity"
    ),
    batch_size: int = typer.Option(256, min=1, help="Queries resolved per batch"),
) -> None:
    """Resolve every placeholder against the memory; invalid model output is reported, never fatal."""
    from pgmr.pipeline import StageConfig
    from pgmr.pipeline.stages import finish_all, prepare

    # The pipeline's stages without a question (nothing to ground in) and without refusal: the rows keep
    # every verdict's evidence.
    stages = StageConfig(
        resolver=ResolverConfig(k=k, entity_threshold=entity_threshold, relation_threshold=relation_threshold)
    )
    try:
        records = list(read_jsonl(in_path))
    except JsonlError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    resolver = Resolver(open_memory(memory_dir), stages.resolver)
    results: list[dict[str, Any]] = []
    counts: Counter[str] = Counter()
    with progress_bar() as bar:
        task = bar.add_task("resolving", total=len(records))
        for start in range(0, len(records), batch_size):
            chunk = records[start : start + batch_size]
            texts = [_text_of(record, field) for record in chunk]
            prepared = prepare([None] * len(chunk), texts, "pgmr", resolver, stages.grounding)  # type: ignore[arg-type]
            for i, (record, result) in enumerate(zip(chunk, finish_all(prepared, stages), strict=True)):
                item = {"id": record.get("id", start + i), **result.to_row(evidence=True)}
                counts[item["status"]] += 1
                results.append(item)
            bar.advance(task, len(chunk))
    write_jsonl(out_path, results)
    table = Table(title=f"pgmr resolve: {in_path.name}")
    table.add_column("status")
    table.add_column("count", justify="right")
    for status in ("resolved", "refused", "invalid"):
        table.add_row(status, str(counts[status]))
    out.print(table)
    console.print(f"wrote {len(results)} results to {out_path}")
