"""Reading a memory's randomly accessed files into the page cache before the questions come.

A dump-built memory's rows (memory-mapped Arrow) and its lexical tier are read at a few hundred random places per
question. Cold, each place is a disk access: right after a 10M-item memory's files left the page cache, its p99
resolve time was 151 ms per placeholder (bench/memory_scale.py). `warm_up` reads those files once, sequentially,
in a background thread (3.5 GB in about 6 s here), so that a server's first questions find them cached.
posix_fadvise(WILLNEED) over a whole 3 GB file was tried first: it returned at once and cached little.

An ivfpq-rerank index file (its stored vectors, re-ranked a few hundred rows a question) is read too when it
fits in well under the memory available: then no question waits for the disk. At 10M items float16 vectors
(15.5 GB) do not fit beside a server on a 24 GB machine, and each question's rows are announced and read on
their own (pgmr.memory.indexes.row_reader); sq8 ones (7.7 GB) do.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
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

    def status(self) -> WarmUpStatus:
        """Where the warm-up is, without waiting (a server's health check reports it: until it is done, the
        p99 resolve time at 10M items is 87 to 228 ms per placeholder against 35 to 38 once done)."""
        return WarmUpStatus(self._done.is_set(), len(self.paths), self.bytes_read)


@dataclass(frozen=True)
class WarmUpStatus:
    done: bool
    files: int
    bytes_read: int


def warm_up(paths: Sequence[Path]) -> WarmUp | None:
    """Start reading `paths` (files, or directories whose files are all read) into the page cache."""
    files = [f for p in paths for f in (sorted(p.rglob("*")) if p.is_dir() else [p]) if f.is_file()]
    return WarmUp(files) if files else None


# Re-ranked vectors are read ahead only while they take at most this share of the memory available: the rest
# stays for the server, other processes and the files above.
VECTORS_SHARE = 0.6


def available_memory() -> int | None:
    """Bytes the kernel can give without swapping (MemAvailable: free plus reclaimable page cache)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def files_to_warm(path: Path, manifest: MemoryManifest, available: int | None = None) -> list[Path]:
    """A memory's Arrow rows files and lexical tier (none for a memory whose rows are held in RAM: JSONL), then
    its ivfpq-rerank index files if they fit in VECTORS_SHARE of `available` (default: MemAvailable)."""
    arrow = [path / d.rows_file for d in manifest.dictionaries.values() if d.rows_file.endswith(".arrow")]
    files = [*arrow, *(path / d for d in manifest.lexical.values())] if arrow else []
    if manifest.index_kind != "ivfpq-rerank" or manifest.index_backend != "faiss":
        return files
    indexes = [path / d.index_file for d in manifest.dictionaries.values()]
    try:
        sizes = {f: f.stat().st_size for f in indexes}
    except OSError:
        return files
    room = available_memory() if available is None else available
    if room is None or sum(sizes.values()) > VECTORS_SHARE * room:
        return files
    # Smallest first (relations before entities), so that the rows most questions touch are cached soonest.
    return [*files, *sorted(indexes, key=sizes.__getitem__)]
