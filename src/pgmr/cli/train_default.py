"""`pgmr train-default`: rebuild the shipped default generator (models/pgmr-ensemble) from the data folder,
stage by stage (pgmr.experiments.recipe), and end with its LC-QuAD 2.0 test table."""

from __future__ import annotations

import json
import time
from functools import partial
from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error
from pgmr.cli.memory import MEMORY_OPTION
from pgmr.experiments.recipe_run import StageRecord


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def train_default(
    ctx: typer.Context,
    out_dir: Path = typer.Option(
        ...,
        "--out",
        "-o",
        help="Where everything goes: models/ (the members and pgmr-ensemble), runs/, work/, calibration.json, "
        "eval/, stages/ (one file per finished stage) and logs/ (each stage's output)",
    ),
    config: str = typer.Option(
        "full",
        "--config",
        help="full: the shipped default's own commands (about 8 h on 2 CPU cores); tiny: the same pipeline "
        "with tiny models and a few records (minutes; what the tests run)",
    ),
    only: list[str] = typer.Option(
        [],
        "--only",
        help="Run only this stage (repeatable): seq2seq, structured, structured-s7, ensemble, verifier, refusal, "
        "eval. Delete OUT/stages/NAME.json to run a finished stage again",
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    dry_run: bool = typer.Option(False, "--dry-run", help="Print each stage's commands and exit"),
) -> None:
    """Rebuild the shipped default from the data folder, stage by stage; resumable (run it again)."""
    from pgmr.experiments.recipe import CALIBRATION, CONFIGS, EVAL_DIR, plan
    from pgmr.experiments.recipe_run import (
        RecipeError,
        StageFailed,
        command_line,
        read_record,
        run_stage,
        select,
    )

    settings: Settings = ctx.obj
    if config not in CONFIGS:
        print_error(f"unknown --config {config!r}; choose from {', '.join(CONFIGS)}")
        raise typer.Exit(2)
    try:
        data_dir = settings.data_dir.resolve()
    except FileNotFoundError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    out_dir = out_dir.resolve()
    stages = plan(CONFIGS[config], out_dir, memory_dir=memory_dir.resolve() if memory_dir else None)
    try:
        chosen = select(stages, only, out_dir)
    except RecipeError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    if dry_run:
        for stage in chosen:
            out.print(f"[bold]{stage.name}[/bold]: {escape(stage.makes)}")
            for step in stage.steps:
                out.print(f"  {escape(command_line(step, data_dir))}", highlight=False, soft_wrap=True)
        return
    records: dict[str, tuple[StageRecord, bool]] = {}  # name -> (record, run now)
    for n, stage in enumerate(chosen, 1):
        head = f"[bold]{n}/{len(chosen)} {stage.name}[/bold] ({escape(stage.makes)})"
        done = read_record(out_dir, stage.name)
        if done is not None:
            console.print(f"{head}: skipped, done {done.finished_at} in {_duration(done.seconds)}")
            records[stage.name] = (done, False)
            continue
        started = time.monotonic()
        with console.status(f"{head}: running") as status:
            on_step = partial(_show_step, status, head, len(stage.steps))
            try:
                record = run_stage(stage, out_dir, data_dir=data_dir, config=config, on_step=on_step)
            except StageFailed as exc:
                print_error(f"stage {exc.stage!r} failed after {_duration(time.monotonic() - started)}")
                console.print(f"  command: {escape(exc.command)}", highlight=False, soft_wrap=True)
                console.print(f"  {escape(exc.reason)}; its output: {exc.log}", highlight=False)
                raise typer.Exit(2) from None
            except KeyboardInterrupt:
                # The command got the same interrupt; a trainer resumes from its last checkpoint.
                console.print(f"interrupted in stage {stage.name!r}: run the same command again to resume")
                raise typer.Exit(130) from None
        console.print(f"{head}: done in {_duration(record.seconds)}")
        records[stage.name] = (record, True)
    _summary(records, config)
    _refusal(out_dir / CALIBRATION)
    _evaluation(out_dir / EVAL_DIR / "metrics.json")


def _show_step(status: Any, head: str, steps: int, index: int, line: str) -> None:
    short = line if len(line) < 100 else line[:97] + "..."
    status.update(f"{head}: running step {index + 1}/{steps}: {escape(short)}")


def _summary(records: dict[str, tuple[StageRecord, bool]], config: str) -> None:
    table = Table(title=f"pgmr train-default ({config}): stage times")
    table.add_column("stage")
    table.add_column("status")
    table.add_column("time", justify="right")
    table.add_column("finished")
    total = 0.0
    for name, (record, ran) in records.items():
        total += record.seconds
        status = "ran" if ran else "skipped (done before)"
        table.add_row(name, status, _duration(record.seconds), record.finished_at)
    table.add_row("[bold]total[/bold]", "", f"[bold]{_duration(total)}[/bold]", "")
    out.print(table)


def _refusal(path: Path) -> None:
    if not path.is_file():
        return
    from pgmr.resolver.support import shipped_threshold

    data = json.loads(path.read_text(encoding="utf-8"))
    chosen = data.get("provenance", {}).get("threshold_chosen_on", {})
    fallback = chosen.get("validation", {}).get("fallback")
    how = "by the fallback rule: no threshold met every target" if fallback else "meeting every target"
    out.print(
        f"refusal threshold chosen on validation: {data.get('threshold')} ({how}; the package ships "
        f"{shipped_threshold()}); written to {path}",
        highlight=False,
    )


def _evaluation(path: Path) -> None:
    if not path.is_file():
        return
    from pgmr.experiments.lcquad2_original import TITLE, tables

    doc = json.loads(path.read_text(encoding="utf-8"))
    questions = doc.get("settings", {}).get("questions")
    out.print(f"\n{TITLE}: {questions} questions ({path.parent / 'report.md'})\n", highlight=False)
    # The Markdown itself, as docs/results.md shows it: rendered, eleven columns wrap past reading.
    out.print(tables(doc), markup=False, highlight=False, soft_wrap=True)
