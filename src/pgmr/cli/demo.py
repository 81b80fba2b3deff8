"""`pgmr demo`: the main job on the embedded default data.

Until a trained generator ships (see the generators issue), the demo plays a perfect generator: it converts gold
LC-QuAD 2.0 test queries to SPARQL-PGMR, resolves them against the memory and checks the result against the
gold query; then it shows a refusal for a placeholder the memory cannot support.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from pgmr.cli.common import Settings, console, out
from pgmr.config import default_memory_dir
from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import load_named
from pgmr.jsonl import write_jsonl
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import Memory, MemoryNotFoundError, load_encoder
from pgmr.query import parse
from pgmr.query.sparql import same_query
from pgmr.resolver import Refusal, Resolution, Resolver, ResolverConfig
from pgmr.resolver.priors import counts_from_dataset

UNSUPPORTED = (
    "SELECT ?answer WHERE { wd:entity0 wdt:relation0 ?answer }\n"
    "entity0 = [ENT] Zorblax Prime [/ENT] fictional moon of the planet Quuxia\n"
    "relation0 = [REL] population [/REL] number of people inhabiting the place"
)


def demo(
    ctx: typer.Context,
    n: int = typer.Option(5, "-n", min=1, help="Test questions to show"),
    memory_dir: Path | None = typer.Option(
        None, "--memory", "-m", help="Memory directory (built if missing)"
    ),
    out_dir: Path = typer.Option(Path("artifacts/demo"), "--out", help="Where resolved.jsonl is written"),
    threshold: float = typer.Option(0.8, help="Entity threshold used for the refusal example"),
) -> None:
    """Convert, resolve and check sample LC-QuAD 2.0 test questions; show a refusal."""
    settings: Settings = ctx.obj
    data_dir = settings.data_dir
    catalog = LabelCatalog.from_data_dir(data_dir)
    path = memory_dir or default_memory_dir()
    try:
        memory = Memory.load(path)
    except MemoryNotFoundError:
        console.print(f"no memory at {path}: building it (once; later runs load it)")
        counts = counts_from_dataset("lcquad2-train", data_dir)
        memory = Memory.build(catalog, path, load_encoder(None), prior_counts=counts)
    records = load_named("lcquad2-test", data_dir).records[: n * 2]
    converted = list(convert_records(records, catalog, ConversionSummary()))[:n]
    resolver = Resolver(memory, ResolverConfig(entity_threshold=threshold, relation_threshold=0.5))
    results = resolver.resolve_many([parse(r.intermediate) for r in converted])
    rows = []
    for record, result in zip(converted, results, strict=True):
        out.print(
            Panel(
                Text(record.intermediate), title=escape(f"{record.id}: {record.question}"), title_align="left"
            )
        )
        if isinstance(result, Resolution):
            out.print(evidence_table(result))
            out.print(Text(result.sparql))
            matches = same_query(result.sparql, record.sparql)
            out.print(f"[bold]{'matches' if matches else 'differs from'} the gold query[/bold]\n")
        else:
            out.print(f"[yellow]refused:[/yellow] {escape(result.reason)}\n")
            matches = False
        rows.append(
            {
                "id": record.id,
                "question": record.question,
                "gold": record.sparql,
                "matches_gold": matches,
                **result.to_json(),
            }
        )
    refusal = resolver.resolve(parse(UNSUPPORTED))
    out.print(
        Panel(
            Text(UNSUPPORTED), title="a question about something the memory does not hold", title_align="left"
        )
    )
    if isinstance(refusal, Refusal):
        out.print(f"[yellow]refused:[/yellow] {escape(refusal.reason)}")
    rows.append({"id": "unsupported-example", **refusal.to_json()})
    write_jsonl(out_dir / "resolved.jsonl", rows)
    right = sum(bool(r.get("matches_gold")) for r in rows)
    console.print(
        f"{right}/{len(converted)} resolved queries equal their gold query; wrote {out_dir / 'resolved.jsonl'}"
    )


def evidence_table(result: Resolution | Refusal) -> Table:
    table = Table(show_header=True, header_style="bold")
    for col in ("placeholder", "rank", "id", "label", "description", "similarity", "score"):
        table.add_column(col)
    for ev in result.evidence:
        for rank, c in enumerate(ev.candidates[:3], 1):
            table.add_row(
                ev.placeholder.name if rank == 1 else "",
                str(rank),
                c.id,
                c.label,
                (c.description or "")[:50],
                f"{c.similarity:.3f}",
                f"{c.score:.3f}",
            )
    return table
