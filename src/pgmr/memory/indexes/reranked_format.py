"""The single file of an ivfpq-rerank index, so that a memory's manifest checksums it as any index:

    [.npy: stored vectors, (rows, dimension), float16 or uint8] [uint8 only: float32 low and step per dimension]
    [FAISS IndexIVFPQ or IndexIVFPQFastScan, serialized]
    [8-byte offset of the FAISS part] [8-byte rerank depth] [8-byte magic]

Files written before 8-bit vectors existed (float16, no range block) read as they always did.
"""

from __future__ import annotations

import io
import os
import struct
import tempfile
import uuid
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pgmr.memory.indexes.vector_codec import VectorCodec

KIND = "ivfpq-rerank"
MAGIC = b"PGMRIVR1"
TRAILER = struct.Struct("<QQ8s")
# The scratch file keeps room for the .npy header in front of its vectors, so that `save` can finish it in
# place and rename it (no second copy of ~17 GB at 10M items). 128 bytes hold the header of any 2-d shape.
HEADER = 128


def npy_header(rows: int, dimension: int, dtype: np.dtype) -> bytes:
    header = io.BytesIO()
    descr = np.lib.format.dtype_to_descr(np.dtype(dtype))
    np.lib.format.write_array_header_1_0(
        header, {"descr": descr, "fortran_order": False, "shape": (rows, dimension)}
    )
    return header.getvalue()


def trailer(faiss_offset: int, rerank: int) -> bytes:
    return TRAILER.pack(faiss_offset, rerank, MAGIC)


@dataclass(frozen=True)
class Layout:
    """Where a saved index file keeps its parts."""

    vectors_offset: int
    rows: int
    dimension: int
    codec: VectorCodec
    faiss_part: bytes
    rerank_depth: int


def read_layout(path: Path) -> Layout:
    """The parts of an index file, checked against each other; ValueError says what is wrong."""
    size = path.stat().st_size
    with path.open("rb") as handle:
        if size < TRAILER.size:
            raise ValueError(f"{path}: too short for an {KIND} index")
        handle.seek(size - TRAILER.size)
        offset, rerank_depth, magic = TRAILER.unpack(handle.read(TRAILER.size))
        if magic != MAGIC:
            raise ValueError(f"{path}: not an {KIND} index (no trailer)")
        handle.seek(0)
        try:
            np.lib.format.read_magic(handle)
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(handle)
        except ValueError as exc:
            raise ValueError(f"{path}: damaged {KIND} index ({exc})") from None
        start = handle.tell()
        if dtype not in (np.float16, np.uint8) or fortran or len(shape) != 2:
            raise ValueError(f"{path}: damaged {KIND} index (vector part does not match its header)")
        rows, dimension = int(shape[0]), int(shape[1])
        side = VectorCodec.side_size(dtype, dimension)
        if start + rows * dimension * dtype.itemsize + side != offset:
            raise ValueError(f"{path}: damaged {KIND} index (vector part does not match its header)")
        if not offset < size - TRAILER.size:
            raise ValueError(f"{path}: damaged {KIND} index (no FAISS part)")
        handle.seek(offset - side)
        block = handle.read(side)
        try:
            codec = VectorCodec.from_side_block(dtype, block, dimension)
        except ValueError as exc:
            raise ValueError(f"{path}: damaged {KIND} index ({exc})") from None
        faiss_part = handle.read(size - TRAILER.size - offset)
    return Layout(start, rows, dimension, codec, faiss_part, int(rerank_depth))


def is_reranked_file(path: Path | str) -> bool:
    """Whether a file ends with this format's trailer (how `load_index` tells it from a plain FAISS file)."""
    try:
        with Path(path).open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            if handle.tell() < TRAILER.size:
                return False
            handle.seek(-TRAILER.size, os.SEEK_END)
            return TRAILER.unpack(handle.read(TRAILER.size))[2] == MAGIC
    except OSError:
        return False


def scratch_file(directory: str | None) -> Path:
    """A new empty file for stored vectors being added (in `directory`, else the system's temporary one)."""
    handle, name = tempfile.mkstemp(prefix="pgmr-vectors-", suffix=".f16", dir=directory)
    os.close(handle)
    return Path(name)


def write_copy(
    path: Path, header: bytes, vectors: np.ndarray, rows_a_write: int, tail: bytes, side: int, rerank: int
) -> None:
    """An index file written whole through a temporary sibling and a rename: `header`, the stored `vectors`
    (in slices of `rows_a_write`: they can be larger than RAM), then `tail` (a range block of `side` bytes and
    the FAISS part) and the trailer."""
    tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
    try:
        with tmp.open("wb") as handle:
            handle.write(header)
            for start in range(0, len(vectors), rows_a_write):
                handle.write(np.ascontiguousarray(vectors[start : start + rows_a_write]).tobytes())
            offset = handle.tell() + side
            handle.write(tail)
            handle.write(trailer(offset, rerank))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
