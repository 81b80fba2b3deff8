"""Atomic writes of files and directories: what readers see is the old version or the new one, never half."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path


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


def replace_dir(new: Path, target: Path) -> None:
    """Rename `new` to `target`. An existing target is moved aside first and deleted only after the rename;
    between the two renames (microseconds) the old version sits at `.<name>.old-*`."""
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:12]}"
        os.rename(target, old)
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
