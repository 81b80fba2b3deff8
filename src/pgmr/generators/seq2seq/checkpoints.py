"""Which Trainer checkpoints are complete, so that a run killed while saving one resumes from the last whole one.

The Trainer writes `checkpoint-N/` in place, file by file (weights, optimizer, scheduler, RNG, trainer state).
A process killed halfway leaves a directory that the stock `get_last_checkpoint` still picks as the newest:
the rerun then fails on its missing `trainer_state.json`, every time, until someone deletes it. Here a
checkpoint counts only once `MarkComplete` has fsynced its files and written `COMPLETE_MARKER` into it (after
the Trainer's save returned); `last_complete_checkpoint` resumes from the newest marked one and deletes the
incomplete ones, which the Trainer's rotation would otherwise count and keep as "most recent".

Checkpoints written before the marker existed (a directory where none carries it) count when their
`trainer_state.json` parses and names their step.

The marker also records the run's wall time up to that checkpoint, summed over the calls that resumed it, so
that a model card reports what the whole run cost, not its last call.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from pgmr.fsutil import fsync_dir, write_file

log = logging.getLogger(__name__)

COMPLETE_MARKER = "pgmr-complete.json"
_CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")


def is_complete(checkpoint: Path) -> bool:
    return (checkpoint / COMPLETE_MARKER).is_file()


def _state_names_step(checkpoint: Path, step: int) -> bool:
    try:
        state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return False
    return isinstance(state, dict) and state.get("global_step") == step


def last_complete_checkpoint(checkpoints: Path) -> str | None:
    """The newest complete `checkpoint-N` under `checkpoints` (None if none); incomplete ones are deleted."""
    if not checkpoints.is_dir():
        return None
    found = sorted(
        (int(match.group(1)), path)
        for path in checkpoints.iterdir()
        if path.is_dir() and (match := _CHECKPOINT.match(path.name))
    )
    marked = any(is_complete(path) for _, path in found)
    complete: list[Path] = []
    for step, path in found:
        if is_complete(path) if marked else _state_names_step(path, step):
            complete.append(path)
        else:
            log.warning("%s is incomplete (a run was killed while saving it): deleted", path)
            shutil.rmtree(path, ignore_errors=True)
    return str(complete[-1]) if complete else None


def _fsync_tree(directory: Path) -> None:
    for root, _, files in os.walk(directory):
        for name in files:
            with open(os.path.join(root, name), "rb") as handle:
                os.fsync(handle.fileno())
        fsync_dir(Path(root))


def recorded_seconds(checkpoint: str | Path | None) -> float:
    """The run's wall seconds up to `checkpoint` as its marker records them (0.0 for none, or for a marker written
    before it recorded time)."""
    if checkpoint is None:
        return 0.0
    try:
        marker = json.loads((Path(checkpoint) / COMPLETE_MARKER).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return 0.0
    seconds = marker.get("wall_seconds") if isinstance(marker, dict) else None
    return float(seconds) if isinstance(seconds, int | float) and seconds >= 0 else 0.0


def trained_until(checkpoint: str | Path) -> tuple[int, float] | None:
    """(global step, epoch) a checkpoint's trainer state reached; None when it cannot be read."""
    try:
        state = json.loads((Path(checkpoint) / "trainer_state.json").read_text(encoding="utf-8"))
        return int(state["global_step"]), float(state.get("epoch") or 0.0)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


class MarkComplete(TrainerCallback):
    """Marks each checkpoint complete once the Trainer has saved it. Its files are fsynced first, so that after a
    power loss, too, a marked checkpoint holds everything it had when it was marked.

    `started` is this call's start (time.monotonic()), `before` the wall seconds of the calls it resumes."""

    def __init__(self, started: float | None = None, before: float = 0.0) -> None:
        self.started = time.monotonic() if started is None else started
        self.before = before

    def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not args.should_save:
            return control
        checkpoint = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if checkpoint.is_dir():
            _fsync_tree(checkpoint)
            seconds = round(self.before + time.monotonic() - self.started, 1)
            marker = {"global_step": state.global_step, "wall_seconds": seconds}
            write_file(checkpoint / COMPLETE_MARKER, json.dumps(marker).encode())
            fsync_dir(checkpoint)
        return control
