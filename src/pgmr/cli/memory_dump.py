"""`pgmr memory build --from-dump`: the dump build's progress bars and its report table."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from pgmr.cli.common import console, out
from pgmr.memory import Memory
from pgmr.memory.dump import DumpBuildReport, DumpBuildSettings, build_from_dump
from pgmr.memory.dump.parse_stage import ProgressCallback, StageProgress


@contextmanager
def stage_progress() -> Iterator[ProgressCallback]:
    """One bar per stage: parse counts compressed bytes of the dump, encode and index count shards; each shows
    items (rows) per second."""
    bars = {
        "parse": Progress(
            TextColumn("parse "), BarColumn(), DownloadColumn(), TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
        ),
        "encode": Progress(
            TextColumn("encode"), BarColumn(), MofNCompleteColumn(), TextColumn("shards {task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
        ),
        "index": Progress(
            TextColumn("index "), BarColumn(), MofNCompleteColumn(), TextColumn("shards {task.fields[rate]}"),
            TimeElapsedColumn(), TimeRemainingColumn(), console=console, transient=False,
        ),
    }  # fmt: skip
    tasks: dict[str, TaskID] = {}
    current: list[Progress] = []

    def update(event: StageProgress) -> None:
        bar = bars[event.stage]
        if event.stage not in tasks:
            if current:
                current[-1].stop()
            bar.start()
            current.append(bar)
            tasks[event.stage] = bar.add_task(event.stage, total=event.total, rate="")
        unit = "items" if event.stage == "parse" else "rows"
        bar.update(
            tasks[event.stage],
            completed=event.done,
            total=event.total,
            rate=f"{event.items_per_second:,.0f} {unit}/s",
        )

    try:
        yield update
    finally:
        for bar in current:
            bar.stop()


def run(dump: Path, target: Path, settings: DumpBuildSettings) -> tuple[Memory, DumpBuildReport]:
    with stage_progress() as progress:
        memory, report = build_from_dump(dump, target, settings, progress)
    print_report(target, report)
    return memory, report


def print_report(target: Path, report: DumpBuildReport) -> None:
    parse = report.parse
    table = Table(title=f"memory written to {target}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    table.add_row("dump lines (entities)", f"{parse.lines:,}")
    table.add_row("records kept", f"{parse.records:,}")
    for reason, count in parse.counts.items():
        table.add_row(f"  {reason.replace('_', ' ')}", f"{count:,}")
    table.add_row("chunks (parsed now / all)", f"{parse.parsed_now} / {parse.chunks}")
    if parse.parsed_now and parse.seconds > 0:
        table.add_row("parse rate", f"{parse.parsed_items_now / parse.seconds:,.0f} items/s")
    table.add_row("entity / relation IDs", f"{report.entities:,} / {report.relations:,}")
    table.add_row("prior (sitelinks) IDs", f"{report.prior_ids:,}")
    encode = report.encode
    table.add_row("rows with vectors now", f"{encode.rows_now:,} in {encode.seconds:.1f} s")
    table.add_row("  texts encoded / cached", f"{encode.encoded_texts:,} / {encode.cached_texts:,}")
    if encode.drawn_texts:
        table.add_row("  texts drawn (synthetic)", f"{encode.drawn_texts:,}")
    table.add_row("seconds (index / total)", f"{report.index_seconds:.1f} / {report.seconds:.1f}")
    out.print(table)
    if parse.truncated:
        console.print(
            f"[yellow]warning:[/yellow] the dump ends early ({parse.truncated}): the memory holds what was "
            "read before that point"
        )
    for reason, lines in parse.samples.items():
        if reason != "skipped_type":
            for line in lines:
                console.print(f"[yellow]{reason}:[/yellow] {line}")
    console.print(f"work directory (catalog shards, vectors): {report.work_dir}")
