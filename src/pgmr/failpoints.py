"""Named pause points where the crash-safety tests kill a real process (tests/test_crash_safety.py).

A SIGKILL at a random moment rarely lands in the millisecond windows that matter (between two renames,
halfway through a checkpoint). `failpoint(NAME)` is a no-op unless `$PGMR_FAILPOINTS` (comma-separated) names
it; then it creates the marker file `$PGMR_FAILPOINT_DIR/NAME` and sleeps, so the test, which waits for the
marker, can send SIGKILL while the process is exactly there. `NAME@N` pauses at the Nth hit instead of the
first (e.g. the second checkpoint, when one complete checkpoint must exist before the kill).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

FAILPOINTS_ENV = "PGMR_FAILPOINTS"
FAILPOINT_DIR_ENV = "PGMR_FAILPOINT_DIR"
# Long enough for a test on a busy machine to notice the marker; short enough that a run whose killer went
# away does not hang forever (it then carries on as if nothing had happened).
PAUSE_SECONDS = 60.0

_hits: dict[str, int] = {}


def _wanted_hit(name: str) -> int | None:
    for item in os.environ.get(FAILPOINTS_ENV, "").split(","):
        point, _, nth = item.strip().partition("@")
        if point == name:
            return int(nth or 1)
    return None


def failpoint(name: str) -> None:
    """Pause at `name` when a test asked for it; otherwise return at once (one environment lookup)."""
    if FAILPOINTS_ENV not in os.environ or (wanted := _wanted_hit(name)) is None:
        return
    _hits[name] = _hits.get(name, 0) + 1
    if _hits[name] != wanted:
        return
    directory = Path(os.environ.get(FAILPOINT_DIR_ENV) or ".")
    directory.mkdir(parents=True, exist_ok=True)
    (directory / name).write_text(f"{os.getpid()}\n", encoding="utf-8")
    deadline = time.monotonic() + PAUSE_SECONDS
    while time.monotonic() < deadline:
        time.sleep(0.05)
