"""Scattered rows of a large on-disk array, read without the memory map's read-around.

A re-ranking index reads a few hundred rows at random from a file of many gigabytes (15.5 GB of float16 vectors
at 10M items, 7.7 GB of 8-bit ones). Through a memory map, each first touch of a page is a fault that reads ahead around it (about 128 KB),
one fault after another: 400 cold rows took 1.9 s here, 27 ms with read-around switched off
(MADV_RANDOM). Announcing every row to the kernel first (posix_fadvise WILLNEED, which queues the reads
without waiting) and then reading them with pread took 4.7 ms: the disk serves the reads side by side. Pages
read this way stay in the shared page cache, not in the process's resident set. bench/row_gather.py measures
the three ways side by side.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path

import numpy as np
import numpy.typing as npt

# Above this many rows a read is a bulk scan (e.g. exact search over every row): the memory map's read-ahead
# serves those better than one system call a row.
SCATTERED_MAX = 1 << 16


class RowReader:
    """Rows of a C-ordered (rows, dimension) array of `dtype` stored at `offset` in a file, read by position."""

    def __init__(
        self, path: Path | str, offset: int, rows: int, dimension: int, dtype: npt.DTypeLike
    ) -> None:
        self.path = Path(path)
        self._offset, self._rows, self._dimension = offset, rows, dimension
        self._dtype = np.dtype(dtype)
        self._row_bytes = dimension * self._dtype.itemsize
        self._fd: int | None = None
        self._lock = threading.Lock()
        self._closer: weakref.finalize | None = None

    def __len__(self) -> int:
        return self._rows

    def _descriptor(self) -> int:
        # Opened on first use, so that an index that is loaded but never searched holds no descriptor.
        if self._fd is None:
            with self._lock:
                if self._fd is None:
                    self._fd = os.open(self.path, os.O_RDONLY)
                    self._closer = weakref.finalize(self, os.close, self._fd)
        return self._fd

    def prefetch(self, rows: np.ndarray) -> None:
        """Ask the kernel to start reading these rows now (a no-op where posix_fadvise does not exist)."""
        advise = getattr(os, "posix_fadvise", None)
        if advise is None or not len(rows):
            return
        fd = self._descriptor()
        size = self._row_bytes
        for row in np.unique(np.asarray(rows, dtype=np.int64)).tolist():
            advise(fd, self._offset + row * size, size, os.POSIX_FADV_WILLNEED)

    def read(self, rows: np.ndarray) -> np.ndarray:
        """The rows, in the order asked, as stored (shape (len(rows), dimension)): the caller decodes them."""
        rows = np.asarray(rows, dtype=np.int64)
        if len(rows) and (rows.min() < 0 or rows.max() >= self._rows):
            raise IndexError(f"row ids out of range for {self._rows} rows")
        fd = self._descriptor()
        size = self._row_bytes
        buffer = bytearray(len(rows) * size)
        view = memoryview(buffer)
        for n, row in enumerate(rows.tolist()):
            got = os.preadv(fd, [view[n * size : (n + 1) * size]], self._offset + row * size)
            if got != size:
                raise OSError(
                    f"{self.path}: short read of row {row} ({got} of {size} bytes); the file is truncated"
                )
        return np.frombuffer(buffer, dtype=self._dtype).reshape(len(rows), self._dimension)

    def close(self) -> None:
        if self._closer is not None:
            self._closer()
            self._closer = None
        self._fd = None
