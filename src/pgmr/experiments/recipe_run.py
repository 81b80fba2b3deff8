"""Running the recipe's stages (pgmr.experiments.recipe) as subprocesses of `pgmr`, resumably.

A stage is done when `OUT/stages/NAME.json` exists (written atomically once its last command succeeded, with
its commands and seconds); a done stage is skipped. Within a stage, a command whose output is already there is
skipped too, and an interrupted trainer resumes from its own checkpoint when its command runs again. Each
stage's commands write their output to `OUT/logs/NAME.log` (appended, each command headed by its line), which a
failure names.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmr.experiments.recipe import Stage, Step
from pgmr.jsonl import atomic_write_text

STAGES_DIR = "stages"
LOGS_DIR = "logs"


class RecipeError(ValueError):
    """A selection of stages that cannot run: an unknown name, or a stage whose inputs no stage made yet."""


class StageFailed(RuntimeError):
    """A stage's command exited with an error (or did not make what it should have)."""

    def __init__(self, stage: str, command: str, log: Path, reason: str) -> None:
        super().__init__(f"stage {stage!r} failed: `{command}` {reason}; its output is in {log}")
        self.stage, self.command, self.log, self.reason = stage, command, log, reason


@dataclass(frozen=True)
class StepRecord:
    command: str
    seconds: float | None  # None: skipped, its output was already there


@dataclass(frozen=True)
class StageRecord:
    """What `OUT/stages/NAME.json` holds."""

    stage: str
    makes: str
    config: str
    seconds: float  # the stage's commands' wall time in the run that finished it
    steps: tuple[StepRecord, ...]
    finished_at: str

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "makes": self.makes,
            "config": self.config,
            "seconds": self.seconds,
            "commands": [s.command for s in self.steps],
            "steps": [{"command": s.command, "seconds": s.seconds} for s in self.steps],
            "finished_at": self.finished_at,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> StageRecord:
        steps = tuple(StepRecord(str(s["command"]), s.get("seconds")) for s in data.get("steps", ()))
        return cls(
            str(data["stage"]),
            str(data.get("makes", "")),
            str(data.get("config", "")),
            float(data["seconds"]),
            steps,
            str(data.get("finished_at", "")),
        )


def stage_file(out: Path, name: str) -> Path:
    return out / STAGES_DIR / f"{name}.json"


def log_file(out: Path, name: str) -> Path:
    return out / LOGS_DIR / f"{name}.log"


def read_record(out: Path, name: str) -> StageRecord | None:
    """The stage's record, None when it has not finished (or its file cannot be read: it runs again)."""
    path = stage_file(out, name)
    try:
        return StageRecord.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def select(stages: Sequence[Stage], only: Sequence[str], out: Path) -> tuple[Stage, ...]:
    """The stages to run (all, or those named in `only`, in the recipe's order). Raises RecipeError for an
    unknown name, or for a selected stage that reads the output of a stage neither selected nor done."""
    names = [s.name for s in stages]
    unknown = [n for n in only if n not in names]
    if unknown:
        raise RecipeError(f"unknown stage {unknown[0]!r}; the stages are {', '.join(names)}")
    chosen = tuple(s for s in stages if not only or s.name in only)
    chosen_names = {s.name for s in chosen}
    for stage in chosen:
        missing = [n for n in stage.needs if n not in chosen_names and read_record(out, n) is None]
        if missing:
            raise RecipeError(
                f"stage {stage.name!r} needs what stage {missing[0]!r} makes, and it has not run in {out}: "
                f"add --only {missing[0]}"
            )
    return chosen


def command_line(step: Step, data_dir: Path) -> str:
    """The step as a reader would type it."""
    return shlex.join(["pgmr", "--data-dir", str(data_dir), *step.args])


def run_stage(
    stage: Stage,
    out: Path,
    *,
    data_dir: Path,
    config: str,
    on_step: Callable[[int, str], None] | None = None,
    env: Mapping[str, str] | None = None,
) -> StageRecord:
    """Run the stage's commands whose output is missing, each as `python -m pgmr`, then write its record.
    `on_step(index, command line)` hears each command as it starts. Raises StageFailed."""
    log = log_file(out, stage.name)
    log.parent.mkdir(parents=True, exist_ok=True)
    # Wide enough that the commands' tables read whole in the log (rich wraps at 80 columns off a terminal).
    environment = {"COLUMNS": "120", **os.environ, **(env or {})}
    steps = []
    started = time.monotonic()
    for i, step in enumerate(stage.steps):
        line = command_line(step, data_dir)
        if step.makes.exists():
            steps.append(StepRecord(line, None))
            continue
        if on_step is not None:
            on_step(i, line)
        step_started = time.monotonic()
        with log.open("a", encoding="utf-8") as handle:
            handle.write(f"$ {line}\n")
            handle.flush()
            code = subprocess.run(
                [sys.executable, "-m", "pgmr", "--data-dir", str(data_dir), *step.args],
                stdout=handle,
                stderr=subprocess.STDOUT,
                env=environment,
                check=False,
            ).returncode
        if code != 0:
            raise StageFailed(stage.name, line, log, f"exited with {code}")
        if not step.makes.exists():
            raise StageFailed(stage.name, line, log, f"finished without making {step.makes}")
        steps.append(StepRecord(line, round(time.monotonic() - step_started, 1)))
    record = StageRecord(
        stage.name,
        stage.makes,
        config,
        round(time.monotonic() - started, 1),
        tuple(steps),
        datetime.now(UTC).isoformat(timespec="seconds"),
    )
    atomic_write_text(stage_file(out, stage.name), json.dumps(record.to_json(), indent=1) + "\n")
    return record


__all__ = [
    "LOGS_DIR",
    "STAGES_DIR",
    "RecipeError",
    "StageFailed",
    "StageRecord",
    "StepRecord",
    "command_line",
    "log_file",
    "read_record",
    "run_stage",
    "select",
    "stage_file",
]
