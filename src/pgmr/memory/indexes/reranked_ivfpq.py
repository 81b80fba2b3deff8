"""IVF-PQ with exact re-ranking from vectors on disk: the index kind for memories of millions of items.

IVF-PQ alone keeps 48-byte codes a row but misses the recall bar (recall@10 0.78 against exact search at 1M
rows, docs/scale.md); IVF-SQ8 and HNSW meet it but keep 384 and 1,536+ bytes a row in RAM, 8 and 30+ GB at 20M
rows. This kind searches the codes for `rerank` candidates, then scores those from stored vectors, which stay
on disk: a query reads `rerank` rows of them (pgmr.memory.indexes.row_reader). The stored vectors are float16
(exact up to rounding) or 8-bit codes with a range per dimension (`vectors="sq8"`: half the bytes, so that the
page cache holds them; pgmr.memory.indexes.vector_codec). RAM holds the PQ codes (by default 96 bytes a row
for 384 dimensions, plus an 8-byte ID: 2.1 GB at 20M rows). One file holds both (reranked_format).
"""

from __future__ import annotations

import os
import struct
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from pgmr.memory.errors import IndexTrainingError
from pgmr.memory.indexes import reranked_format
from pgmr.memory.indexes.faiss_index import _faiss, default_nlist, default_pq_m
from pgmr.memory.indexes.reranked_format import HEADER as _HEADER
from pgmr.memory.indexes.reranked_format import KIND, is_reranked_file, npy_header, read_layout, trailer
from pgmr.memory.indexes.row_reader import SCATTERED_MAX, RowReader
from pgmr.memory.indexes.vector_codec import DEFAULT_VECTOR_FORMAT, VectorCodec, check_vector_format, dtype_of

# Rows k-means and the PQ codebooks train on: enough for 4,096 lists, bounded so that training takes minutes.
TRAIN_ROWS = 200_000
# Rows per write when vectors are copied: bounded memory whatever the size.
_SLICE = 1 << 18
# A trained state (`trained_state`): the vector format, its range block, then the FAISS index.
_STATE = struct.Struct("<4sQ")
# Stored vectors up to this size are held in RAM when an index is loaded; larger ones stay on disk.
RESIDENT_MAX = 64 << 20


class RerankedIVFPQ:
    """FAISS IndexIVFPQ (inner product) over unit vectors, re-ranked from stored copies of them (float16, or
    sq8: 8 bits a dimension, ranges taken from the training sample).

    It trains on the rows of its first `add` (or on `train(sample)` beforehand, so that rows can then come in
    shards); stored vectors being added spill to a scratch file, and `save` writes the single index file.
    """

    def __init__(
        self,
        dimension: int,
        *,
        nlist: int | None = None,
        m: int | None = None,
        nbits: int = 8,
        nprobe: int = 128,
        rerank: int = 100,
        vectors: str = DEFAULT_VECTOR_FORMAT,
        scratch_dir: str | None = None,
    ) -> None:
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if m is not None and dimension % m:
            raise ValueError(f"{KIND} m={m} must divide the dimension {dimension}")
        if rerank < 1 or nprobe < 1:
            raise ValueError("rerank and nprobe must be positive")
        check_vector_format(vectors, f"{KIND} vectors")
        self._dimension = dimension
        self._nlist, self._m, self._nbits = nlist, m, nbits
        self.nprobe, self.rerank = nprobe, rerank
        self._scratch_dir = scratch_dir
        self._index: Any = None
        self._lock = threading.Lock()
        # sq8 takes its ranges from the training sample, so its codec exists once the index is trained.
        self._vector_kind = vectors
        self._codec: VectorCodec | None = VectorCodec() if vectors == "fp16" else None
        # Stored vectors: a scratch file being appended to, or the memory-mapped part of a loaded file.
        self._scratch: Path | None = None
        self._scratch_handle: BinaryIO | None = None
        self._finalizer: Any = None
        self._vectors: np.ndarray = np.zeros((0, dimension), dtype=dtype_of(vectors))
        # Scattered reads of a saved file's vectors (re-ranking), without the memory map's read-around.
        self._reader: RowReader | None = None

    @property
    def kind(self) -> str:
        return KIND

    @property
    def dimension(self) -> int:
        return self._dimension

    def __len__(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"RerankedIVFPQ(dimension={self._dimension}, rows={len(self)}, rerank={self.rerank})"

    def options(self) -> dict[str, int | str]:
        options: dict[str, int | str] = {"nbits": self._nbits, "nprobe": self.nprobe, "rerank": self.rerank}
        options["vectors"] = self._vector_kind
        if self._index is not None:
            options.update(nlist=int(self._index.nlist), m=int(self._index.pq.M))
        return options

    def _check(self, vectors: np.ndarray, what: str) -> np.ndarray:
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self._dimension:
            raise ValueError(f"{what} must have shape (n, {self._dimension}), got {vectors.shape}")
        return np.ascontiguousarray(vectors, dtype=np.float32)

    # -- building -----------------------------------------------------------------------------------------

    def train(self, sample: np.ndarray, rows: int | None = None) -> None:
        """Train the coarse quantizer and PQ codebooks on a sample (before rows are added in shards). `rows`:
        how many rows will be added, which sets the number of lists (default: the sample's size)."""
        if self._index is not None:
            raise IndexTrainingError(f"this {KIND} index is trained already")
        sample = self._check(sample, "the training sample")
        faiss = _faiss()
        nlist = self._nlist or default_nlist(max(len(sample), rows or 0), min(len(sample), TRAIN_ROWS))
        m = self._m or default_pq_m(self._dimension)
        needed = max(nlist, 2**self._nbits)
        if len(sample) < needed:
            raise IndexTrainingError(
                f"an {KIND} index needs at least {needed} rows to train (nlist={nlist}, 2**nbits="
                f"{2**self._nbits}) but got {len(sample)}; use index kind 'flat' or 'hnsw' for a memory this "
                "small, or lower nlist/nbits"
            )
        quantizer = faiss.IndexFlatIP(self._dimension)
        # Plain IVF-PQ lists whatever the bits: they take codes encoded apart (`add_encoded`, a dump build's
        # parts); 4-bit ones become fast-scan lists before the first search or save (`_serving`).
        index = faiss.IndexIVFPQ(
            quantizer, self._dimension, nlist, m, self._nbits, faiss.METRIC_INNER_PRODUCT
        )
        if len(sample) > TRAIN_ROWS:
            pick = np.random.default_rng(0).choice(len(sample), TRAIN_ROWS, replace=False)
            sample = sample[np.sort(pick)]
        index.train(sample)
        self._codec = VectorCodec.fit(self._vector_kind, sample)
        self._index = index

    def _open_scratch(self) -> BinaryIO:
        if self._scratch_handle is None:
            self._scratch = reranked_format.scratch_file(self._scratch_dir)
            self._finalizer = weakref.finalize(self, self._scratch.unlink, missing_ok=True)
            handle = self._scratch.open("r+b")
            handle.write(b"\0" * _HEADER)
            # A loaded index's vectors move into the scratch file, so that the file can grow.
            for start in range(0, len(self._vectors), _SLICE):
                handle.write(np.ascontiguousarray(self._vectors[start : start + _SLICE]).tobytes())
            self._scratch_handle = handle
        return self._scratch_handle

    def add(self, vectors: np.ndarray) -> None:
        vectors = self._check(vectors, "vectors")
        if not len(vectors):
            return
        with self._lock:
            if self._index is None:
                self.train(vectors)
            self._append(vectors, lambda: self._index.add(vectors))

    def _append(self, vectors: np.ndarray, add_codes: Callable[[], None]) -> None:
        """Stored copies to the scratch file, then the codes (`add_codes`), then the map over all rows."""
        codec = self._trained_codec()
        handle = self._open_scratch()
        handle.seek(0, os.SEEK_END)
        handle.write(codec.encode(vectors).tobytes())
        handle.flush()
        add_codes()
        assert self._scratch is not None
        self._reader = None
        self._vectors = np.memmap(
            self._scratch, dtype=codec.dtype, mode="r", offset=_HEADER, shape=(len(self), self._dimension)
        )

    def _trained_codec(self) -> VectorCodec:
        if self._codec is None:
            raise IndexTrainingError(f"train this {KIND} index before adding rows")
        return self._codec

    # -- encoding apart from adding (a dump build's index stage, resumable shard by shard) --------------------

    def trained_state(self) -> bytes:
        """The trained, still empty index: what `restore_trained` takes to encode rows the same way later."""
        if self._index is None or self._index.ntotal:
            raise IndexTrainingError(f"only a trained, empty {KIND} index has a trained state to save")
        side = self._trained_codec().side_block()
        head = _STATE.pack(self._vector_kind.encode(), len(side))
        return head + side + bytes(_faiss().serialize_index(self._index).tobytes())

    def restore_trained(self, state: bytes) -> None:
        faiss = _faiss()
        wrong = f"not the trained state of an empty {KIND} index of dimension {self._dimension}"
        if len(state) < _STATE.size:
            raise IndexTrainingError(wrong)
        kind, side = _STATE.unpack_from(state)
        if kind.rstrip(b"\0").decode(errors="replace") != self._vector_kind:
            raise IndexTrainingError(f"{wrong} with {self._vector_kind} vectors")
        block = state[_STATE.size : _STATE.size + side]
        try:
            codec = VectorCodec.from_side_block(dtype_of(self._vector_kind), block, self._dimension)
            index = faiss.deserialize_index(np.frombuffer(state[_STATE.size + side :], dtype=np.uint8))
        except (ValueError, RuntimeError):
            raise IndexTrainingError(wrong) from None
        if not isinstance(index, _pq_kinds()) or index.d != self._dimension or index.ntotal:
            raise IndexTrainingError(wrong)
        self._codec, self._index = codec, index

    def encode_rows(self, vectors: np.ndarray) -> np.ndarray:
        """Rows' codes (list number and PQ code, uint8) as `add` would store them: the costly part of adding."""
        if self._index is None:
            raise IndexTrainingError(f"train this {KIND} index before encoding rows")
        return np.asarray(self._index.sa_encode(self._check(vectors, "vectors")), dtype=np.uint8)

    def add_encoded(self, codes: np.ndarray, vectors: np.ndarray) -> None:
        """Append rows from their `encode_rows` codes and their vectors (kept as float16 for re-ranking)."""
        vectors = self._check(vectors, "vectors")
        codes = np.ascontiguousarray(codes, dtype=np.uint8)
        if self._index is None:
            raise IndexTrainingError(f"train this {KIND} index before adding encoded rows")
        if codes.shape != (len(vectors), self._index.sa_code_size()):
            raise ValueError(f"codes of shape {codes.shape} for {len(vectors)} rows")
        if not len(vectors):
            return
        # Fast-scan lists (a loaded 4-bit index) are written only by FAISS's `add` (add_sa_codes corrupts them).
        add = self._index.add if isinstance(self._index, _pq_kinds()[1]) else None
        with self._lock:
            self._append(vectors, lambda: add(vectors) if add else self._index.add_sa_codes(codes))

    # -- searching ----------------------------------------------------------------------------------------

    def _serving(self) -> Any:
        """The FAISS index as it searches and is saved: 4-bit codes in fast-scan lists (SIMD lookups, several
        times faster than 8-bit codes), converted once from plain lists, codes copied as they are."""
        faiss = _faiss()
        index = self._index
        if self._nbits == 4 and isinstance(index, faiss.IndexIVFPQ):
            with self._lock:
                if isinstance(self._index, faiss.IndexIVFPQ):
                    self._index = faiss.IndexIVFPQFastScan(self._index)
            index = self._index
        return index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        queries = self._check(queries, "queries")
        if len(self) == 0 or not len(queries):
            scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
            return scores, np.full((len(queries), k), -1, dtype=np.int64)
        faiss = _faiss()
        index = self._serving()
        fetch = max(k, self.rerank)
        params = faiss.SearchParametersIVF(nprobe=min(self.nprobe, int(index.nlist)))
        # Mode 1 spreads each query's lists over FAISS's threads, not the queries (one query at 10M items: 21
        # ms against 42). Shared state: a concurrent search may get the other mode, slower, never wrong.
        index.parallel_mode = 1 if len(queries) < faiss.omp_get_max_threads() else 0
        _, candidates = index.search(queries, fetch, params=params)
        out_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
        out_ids = np.full((len(queries), k), -1, dtype=np.int64)
        # Each query's candidates, in file order; all of them announced to the kernel before any is read.
        wanted = [np.unique(found[found >= 0]) for found in candidates]
        if self._reader is not None:
            self._reader.prefetch(np.concatenate(wanted))
        for n, (query, found) in enumerate(zip(queries, wanted, strict=True)):
            if not len(found):
                continue
            exact = self._rows_at(found) @ query
            order = np.lexsort((found, -exact))[:k]
            out_scores[n, : len(order)] = exact[order]
            out_ids[n, : len(order)] = found[order]
        return out_scores, out_ids

    def _rows_at(self, row_ids: np.ndarray) -> np.ndarray:
        codec = self._trained_codec()
        if self._reader is not None and len(row_ids) <= SCATTERED_MAX:
            return codec.decode(self._reader.read(row_ids))
        return codec.decode(self._vectors[row_ids])

    def reconstruct(self, row_ids: np.ndarray) -> np.ndarray:
        """The stored vectors (float16 or sq8 precision) of some rows."""
        row_ids = np.asarray(row_ids, dtype=np.int64)
        if not len(row_ids):
            return np.zeros((0, self._dimension), dtype=np.float32)
        if row_ids.min() < 0 or row_ids.max() >= len(self):
            raise IndexError(f"row ids out of range for an index of {len(self)} rows")
        if self._reader is not None and len(row_ids) <= SCATTERED_MAX:
            self._reader.prefetch(row_ids)
        return self._rows_at(row_ids)

    # -- files --------------------------------------------------------------------------------------------

    def save(self, path: Path | str) -> None:
        """Write the single index file: the scratch file finished in place and renamed where it can be (same
        file system), else a copy through a temporary sibling and a rename."""
        if self._index is None:
            raise IndexTrainingError(
                f"an empty {KIND} index has not been trained and cannot be saved; add rows first"
            )
        faiss = _faiss()
        self._serving().nprobe = self.nprobe
        path = Path(path)
        codec = self._trained_codec()
        header = npy_header(len(self), self._dimension, codec.dtype)
        # The range block (sq8) sits between the stored rows and the FAISS part.
        side = codec.side_block()
        tail = side + faiss.serialize_index(self._index).tobytes()
        if (
            self._scratch_handle is not None
            and len(header) == _HEADER
            and self._finish_scratch(path, header, tail, len(side))
        ):
            return
        reranked_format.write_copy(path, header, self._vectors, _SLICE, tail, len(side), self.rerank)

    def _finish_scratch(self, path: Path, header: bytes, tail: bytes, side: int) -> bool:
        """Header, range block, FAISS part and trailer written into the scratch file, which then becomes `path`.
        False (and the scratch file as it was) when it lies on another file system. Later adds start a new
        scratch."""
        assert self._scratch is not None and self._scratch_handle is not None
        handle = self._scratch_handle
        codec = self._trained_codec()
        end = _HEADER + len(self) * self._dimension * codec.dtype.itemsize
        handle.seek(0)
        handle.write(header)
        handle.seek(end)
        handle.write(tail)
        handle.write(trailer(end + side, self.rerank))
        handle.flush()
        os.fsync(handle.fileno())
        try:
            # mkstemp made it private; an index file is as readable as any other file of the memory.
            os.chmod(self._scratch, 0o644)
            os.replace(self._scratch, path)
        except OSError:
            handle.truncate(end)
            return False
        handle.close()
        self._finalizer.detach()
        self._scratch = self._scratch_handle = None
        self._vectors = np.memmap(
            path, dtype=codec.dtype, mode="r", offset=_HEADER, shape=(len(self), self._dimension)
        )
        self._reader = RowReader(path, _HEADER, len(self), self._dimension, codec.dtype)
        return True

    @classmethod
    def load(
        cls, path: Path | str, rerank: int | None = None, resident_max: int = RESIDENT_MAX
    ) -> RerankedIVFPQ:
        """`resident_max`: stored vectors up to this many bytes are read into RAM, larger ones stay on disk."""
        faiss = _faiss()
        path = Path(path)
        layout = read_layout(path)
        raw = faiss.deserialize_index(np.frombuffer(layout.faiss_part, dtype=np.uint8))
        if not isinstance(raw, _pq_kinds()) or raw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"{path}: the FAISS part is not an inner-product IVF-PQ index")
        shape = (layout.rows, layout.dimension)
        if raw.d != layout.dimension or raw.ntotal != layout.rows:
            raise ValueError(f"{path}: the FAISS part holds {raw.ntotal} x {raw.d}, the vectors {shape}")
        index = cls(
            int(raw.d),
            nlist=int(raw.nlist),
            m=int(raw.pq.M),
            nbits=int(raw.pq.nbits),
            nprobe=int(raw.nprobe),
            rerank=rerank or max(1, layout.rerank_depth),
            vectors=layout.codec.kind,
        )
        index._index, index._codec = raw, layout.codec
        dtype = layout.codec.dtype
        index._vectors = np.memmap(path, dtype=dtype, mode="r", offset=layout.vectors_offset, shape=shape)
        if index._vectors.nbytes <= resident_max:
            # A dump's 77k relation rows (30 MB in sq8): rows taken by indexing, not a `pread` each (thousands
            # a question, as relations' many aliases make `search_vectors` fetch deep).
            index._vectors = np.array(index._vectors)
        else:
            index._reader = RowReader(path, layout.vectors_offset, layout.rows, layout.dimension, dtype)
        return index


def _pq_kinds() -> tuple[Any, ...]:
    faiss = _faiss()
    return (faiss.IndexIVFPQ, faiss.IndexIVFPQFastScan)


__all__ = ["KIND", "RerankedIVFPQ", "is_reranked_file"]
