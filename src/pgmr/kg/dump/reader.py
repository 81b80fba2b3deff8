"""Reading a Wikidata JSON dump as line-aligned chunks: plain, `.gz` or `.bz2`, streamed in bounded memory.

A chunk is a run of whole lines (`lines_per_chunk` of them) with its offsets in the decompressed stream. Chunk
boundaries depend only on the file, so a resumed build cuts exactly the chunks an uninterrupted one would, and
seeks straight to the first one it lacks. bzip2 is decoded by `indexed_bzip2` on several threads (Python's `bz2`
uses one); gzip by the standard library.

A file that ends early (a truncated download) is not an error here: the last chunk comes back with
`truncated` set and the reason, and what was read before stays usable.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

_READ_BUFFER = 1 << 22


class DumpError(ValueError):
    """A dump that cannot be read at all (missing, not a dump, unsupported compression)."""


@dataclass(frozen=True)
class Chunk:
    index: int
    start: int  # offset of its first byte in the decompressed stream
    end: int  # offset just after its last byte
    lines: int
    data: bytes
    # Compressed bytes read so far (progress against the file's size).
    compressed_offset: int = 0
    truncated: str = ""  # why the file ended early, when it did ("" when it did not)


def compression_of(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".bz2"):
        return "bz2"
    if name.endswith(".gz"):
        return "gz"
    return "plain"


class _Stream:
    """A decompressed, forward-seekable view of a dump with a compressed-position probe."""

    def __init__(self, path: Path, threads: int) -> None:
        self.path = path
        self.compression = compression_of(path)
        self._raw: IO[bytes] | None = None
        self._indexed: Any = None
        try:
            if self.compression == "bz2" and threads > 1:
                import indexed_bzip2

                self._indexed = indexed_bzip2.open(str(path), parallelization=threads)
                inner: Any = self._indexed
            else:
                self._raw = path.open("rb")
                if self.compression == "bz2":
                    inner = bz2.BZ2File(self._raw)
                elif self.compression == "gz":
                    inner = gzip.GzipFile(fileobj=self._raw)
                else:
                    inner = self._raw
        except OSError as exc:
            raise DumpError(f"cannot open dump {path}: {exc.strerror or exc}") from None
        self.inner = inner
        self.buffered: Any = inner

    @property
    def parallel(self) -> bool:
        return self._indexed is not None

    def compressed_offset(self) -> int:
        if self._raw is not None:
            try:
                return self._raw.tell()
            except (OSError, ValueError):
                return 0
        tell = getattr(self._indexed, "tell_compressed", None)
        if tell is not None:
            try:
                # indexed_bzip2 reports bits.
                return int(tell()) // 8
            except (OSError, RuntimeError, ValueError):
                return 0
        return 0

    def seek(self, offset: int) -> None:
        if offset:
            self.buffered.seek(offset)

    def close(self) -> None:
        for handle in (self.buffered, self.inner, self._raw):
            if handle is not None:
                with contextlib.suppress(OSError, ValueError, RuntimeError):
                    handle.close()


def _truncation(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


def iter_chunks(
    path: Path | str,
    lines_per_chunk: int,
    *,
    start_index: int = 0,
    start_offset: int = 0,
    threads: int | None = None,
) -> Iterator[Chunk]:
    """The dump's chunks from chunk `start_index`, which begins at decompressed offset `start_offset`."""
    path = Path(path)
    if lines_per_chunk < 1:
        raise ValueError("lines_per_chunk must be positive")
    if not path.is_file():
        raise DumpError(f"no dump at {path}")
    stream = _Stream(path, threads if threads is not None else min(4, os.cpu_count() or 1))
    try:
        try:
            stream.seek(start_offset)
        except (EOFError, OSError, RuntimeError, ValueError) as exc:
            raise DumpError(
                f"{path}: cannot seek to offset {start_offset} to resume ({_truncation(exc)}); "
                "the file changed since the build started: start it again with --restart"
            ) from None
        index, offset = start_index, start_offset
        # Whole blocks, cut at line ends: a readline per entity costs a fifth of the decompressor's speed.
        pending = bytearray()
        complete = 0  # whole lines in `pending`
        truncated = ""
        ended = reported = careful = False
        read = stream.buffered.read
        while not ended:
            try:
                block = read(_READ_BUFFER)
            except (EOFError, OSError, RuntimeError, ValueError) as exc:
                if not careful:
                    # A damaged or cut file. The parallel decoder gives up on a bad block as a whole (it decodes
                    # ahead), and a whole-buffer read loses what it decoded before the damage; the serial decoder
                    # read step by step (read1) returns everything up to it, which is what a user can still use.
                    stream.close()
                    stream = _Stream(path, 1)
                    stream.seek(offset + len(pending))
                    read = getattr(stream.buffered, "read1", stream.buffered.read)
                    careful = True
                    continue
                truncated = _truncation(exc)
                block = b""
            if block:
                pending += block
                complete += block.count(b"\n")
            else:
                ended = True
            while complete >= lines_per_chunk or (ended and pending):
                if complete >= lines_per_chunk:
                    cut = -1
                    for _ in range(lines_per_chunk):
                        cut = pending.find(b"\n", cut + 1)
                    cut, count = cut + 1, lines_per_chunk
                else:
                    cut, count = len(pending), complete + (0 if pending.endswith(b"\n") else 1)
                data = bytes(pending[:cut])
                del pending[:cut]
                complete -= min(count, complete)
                last = ended and not pending
                yield Chunk(index, offset, offset + cut, count, data, stream.compressed_offset(),
                            truncated if last else "")  # fmt: skip
                reported = reported or (last and bool(truncated))
                index, offset = index + 1, offset + cut
        if truncated and not reported:
            yield Chunk(index, offset, offset, 0, b"", stream.compressed_offset(), truncated)
    finally:
        stream.close()
