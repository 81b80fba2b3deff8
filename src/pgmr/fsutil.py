"""Atomic writes of files and directories: what readers see is the old version or the new one, never half.

A directory is replaced by two renames (target aside, new into place). A process killed between them leaves
no target, only `.<name>.old-<pid>-*`; `recover_dir` puts that back once its writer is dead, so the previous
version survives a SIGKILL at any point (tests/test_crash_safety.py kills at each).
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

from pgmr.failpoints import failpoint

_ASIDE = "old"
_TEMP = "tmp"


def write_file(path: Path, data: bytes) -> None:
    """Write and fsync (for files inside a directory that is itself renamed into place afterwards)."""
    with path.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def fsync_dir(path: Path) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return  # Directories cannot be opened for fsync on some platforms (Windows); renames still order.
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _sibling(target: Path, kind: str) -> Path:
    # The writer's pid in the name lets a later process tell a dead writer's leftovers from a live one's.
    return target.parent / f".{target.name}.{kind}-{os.getpid()}-{uuid.uuid4().hex[:12]}"


def temp_sibling(target: Path) -> Path:
    """A fresh name beside `target` to build its next version in (then `replace_dir(tmp, target)`);
    `recover_dir` removes it if its process dies before the swap."""
    return _sibling(target, _TEMP)


def replace_dir(new: Path, target: Path) -> None:
    """Rename `new` to `target`. An existing target is moved aside first and deleted only after the rename;
    between the two renames (microseconds) the old version sits at `.<name>.old-<pid>-*`."""
    if target.exists():
        old = _sibling(target, _ASIDE)
        os.rename(target, old)
        failpoint("fsutil.replace_dir")
        try:
            os.rename(new, target)
        except BaseException:
            os.rename(old, target)
            raise
        fsync_dir(target.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(new, target)
        fsync_dir(target.parent)


def _pid_alive(pid: int) -> bool:
    if os.name != "posix" or pid == os.getpid():
        return True  # Cannot tell (Windows' os.kill(pid, 0) would send CTRL_C), or ours: leave it.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # A killed process its parent has not reaped yet still answers signal 0.
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat.rpartition(")")[2].split()[:1] != ["Z"]


def _dead_leftovers(target: Path, kind: str) -> list[Path]:
    """Siblings `replace_dir` / `temp_sibling` named for `target` whose writing process is gone."""
    prefix = f".{target.name}.{kind}-"
    found = []
    try:
        siblings = list(target.parent.iterdir())
    except OSError:
        return []  # An unreadable parent: nothing to recover from here.
    for path in siblings:
        if not path.name.startswith(prefix):
            continue
        pid = path.name[len(prefix) :].split("-", 1)[0]
        if pid.isdigit() and not _pid_alive(int(pid)):
            found.append(path)
    return found


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0


def recover_dir(target: Path, *, clean: bool = False) -> bool:
    """If `target` is missing because its writer died between the two renames of `replace_dir`, rename the
    version it had moved aside back. `clean` also deletes what dead writers left beside it (unfinished new
    versions, asides of finished swaps). Returns whether a version was restored.

    Writers are told apart by pid, so this assumes one pid namespace: a reader in another container that sees
    a live writer's aside copy mid-swap puts it back, and that writer's swap then fails (loudly, and with the
    previous version in place)."""
    if not target.parent.is_dir():
        return False
    asides = sorted(_dead_leftovers(target, _ASIDE), key=_mtime)
    restored = False
    if asides and not target.exists():
        try:
            os.rename(asides[-1], target)
        except OSError:
            pass  # Another process restored it, or a writer swapped a new version in: target exists now.
        else:
            fsync_dir(target.parent)
            asides.pop()
            restored = True
    if clean:
        for path in [*asides, *_dead_leftovers(target, _TEMP)]:
            shutil.rmtree(path, ignore_errors=True)
    return restored
