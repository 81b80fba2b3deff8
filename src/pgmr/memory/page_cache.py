"""Reading a memory's randomly accessed files into the page cache before the questions come.

A dump-built memory's rows (memory-mapped Arrow) and its lexical tier are read at a few hundred random places per
question. Cold, each place is a disk access: right after a 10M-item memory's files left the page cache, its p99
resolve time was 151 ms per placeholder (bench/memory_scale.py). `warm_up` reads those files once, sequentially,
in a background thread (3.5 GB in about 6 s here), so that a server's first questions find them cached.
posix_fadvise(WILLNEED) over a whole 3 GB file was tried first: it returned at once and cached little. The
float16 vectors of an ivfpq-rerank index stay out: at scale they are larger than RAM, and each question's few
hundred are announced and read on their own (pgmr.memory.indexes.row_reader).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgmr.memory.manifest import MemoryManifest

log = logging.getLogger(__name__)

_CHUNK = 8 << 20


class WarmUp:
    """Files being read into the page cache by a daemon thread; `wait` blocks until they are."""

    def __init__(self, paths: Sequence[Path]) -> None:
        self.paths = tuple(paths)
        self.bytes_read = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="pgmr-warm-up", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            for path in self.paths:
                try:
                    fd = os.open(path, os.O_RDONLY)
                except OSError as exc:
                    log.debug("warm-up skips %s: %s", path, exc)
                    continue
                try:
                    # Reads into one reused buffer: the point is the page cache, not the bytes.
                    buffer = bytearray(_CHUNK)
                    while got := os.readv(fd, [buffer]):
                        self.bytes_read += got
                finally:
                    os.close(fd)
        finally:
            self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """True once every file has been read through (or skipped as unreadable)."""
        return self._done.wait(timeout)


def warm_up(paths: Sequence[Path]) -> WarmUp | None:
    """Start reading `paths` (files, or directories whose files are all read) into the page cache."""
    files = [f for p in paths for f in (sorted(p.rglob("*")) if p.is_dir() else [p]) if f.is_file()]
    return WarmUp(files) if files else None


def files_to_warm(path: Path, manifest: MemoryManifest) -> list[Path]:
    """A memory's Arrow rows files and lexical tier: none for a memory whose rows are held in RAM (JSONL)."""
    arrow = [path / d.rows_file for d in manifest.dictionaries.values() if d.rows_file.endswith(".arrow")]
    return [*arrow, *(path / d for d in manifest.lexical.values())] if arrow else []
