"""FAISS inner-product indexes: exact flat, HNSW graph, and trained IVF-PQ for large memories."""

from __future__ import annotations

import functools
import math
import os
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.memory.errors import IndexTrainingError

FAISS_KINDS = ("flat", "hnsw", "ivfpq")


# When exact search sends a call's queries through BLAS (one matrix product over the stored vectors) instead of
# FAISS's query-by-query scan. FAISS (>= 1.15, as pinned) scans while nq * d < distance_compute_blas_threshold, by
# default 128,000: up to 333 queries at d = 384. On this project's 2-core machines a scan of the 169k-row entity
# memory costs ~10 ms per query, so a batch of 32 took 323 ms against 45 ms through BLAS, with the same top-50 rows
# (python bench/flat_search.py; bench/results/flat_search.json; docs/resolver.md). Two queries still scan faster
# (one per core), so below 1,024 (nq * d at d = 384: up to 2 queries) the scan stays. The setting is FAISS-global:
# it applies to every flat search in the process.
BLAS_THRESHOLD = 1024


@functools.cache
def _faiss() -> Any:
    """The faiss module, with pgmr's BLAS threshold set once (a caller may change it afterwards)."""
    try:
        import faiss
    except ImportError as exc:
        raise ImportError("pgmr's vector index needs FAISS: pip install faiss-cpu") from exc
    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    return faiss


def default_nlist(rows: int, sample: int | None = None) -> int:
    """About sqrt(rows) lists, but at least 39 training rows per list (FAISS's k-means minimum for quality).
    `sample`: the rows k-means trains on, when the index trains on a sample of `rows`."""
    return max(1, min(round(math.sqrt(rows)), (rows if sample is None else sample) // 39))


def default_pq_m(dimension: int) -> int:
    """The largest divisor of the dimension that is at most dimension/4: 4+ dimensions per sub-quantizer."""
    limit = max(1, dimension // 4)
    return max(m for m in range(1, limit + 1) if dimension % m == 0)


class FaissIndex:
    """One FAISS index with METRIC_INNER_PRODUCT (vectors are unit length, so scores are cosines).

    kind "flat": exact search (IndexFlatIP), the default. kind "hnsw": IndexHNSWFlat, approximate and fast on
    large memories; `ef_search` trades speed for recall. kind "ivfpq": IndexIVFPQ, compressed; it trains on the
    rows of its first `add`, so add all rows at once, and needs at least max(nlist, 2**nbits) of them.
    """

    def __init__(
        self,
        dimension: int,
        kind: str = "flat",
        *,
        hnsw_m: int = 32,
        ef_construction: int = 40,
        ef_search: int = 64,
        nlist: int | None = None,
        m: int | None = None,
        nbits: int = 8,
        nprobe: int = 16,
    ) -> None:
        if kind not in FAISS_KINDS:
            raise ValueError(f"unknown index kind {kind!r}; choose one of {', '.join(FAISS_KINDS)}")
        if dimension < 1:
            raise ValueError(f"dimension must be positive, got {dimension}")
        if m is not None and dimension % m:
            raise ValueError(f"ivfpq m={m} must divide the dimension {dimension}")
        self._kind = kind
        self._dimension = dimension
        self._hnsw_m = hnsw_m
        self._ef_construction = ef_construction
        self.ef_search = ef_search
        self._nlist = nlist
        self._m = m
        self._nbits = nbits
        self.nprobe = nprobe
        self._index: Any = None
        self._direct_map = False
        faiss = _faiss()
        if kind == "flat":
            self._index = faiss.IndexFlatIP(dimension)
        elif kind == "hnsw":
            self._index = faiss.IndexHNSWFlat(dimension, hnsw_m, faiss.METRIC_INNER_PRODUCT)
            self._index.hnsw.efConstruction = ef_construction
            self._index.hnsw.efSearch = ef_search
        # ivfpq: created by the first add, because the default nlist depends on how many rows there are.

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def dimension(self) -> int:
        return self._dimension

    def __len__(self) -> int:
        return 0 if self._index is None else int(self._index.ntotal)

    def __repr__(self) -> str:
        return f"FaissIndex(kind={self._kind!r}, dimension={self._dimension}, rows={len(self)})"

    def options(self) -> dict[str, int | str]:
        if self._kind == "hnsw":
            return {
                "hnsw_m": self._hnsw_m,
                "ef_construction": self._ef_construction,
                "ef_search": self.ef_search,
            }
        if self._kind == "ivfpq":
            options: dict[str, int | str] = {"nbits": self._nbits, "nprobe": self.nprobe}
            if self._index is not None:
                options.update(nlist=int(self._index.nlist), m=int(self._index.pq.M))
            return options
        return {}

    def _check(self, vectors: np.ndarray, what: str) -> np.ndarray:
        vectors = np.asarray(vectors)
        if vectors.ndim != 2 or vectors.shape[1] != self._dimension:
            raise ValueError(f"{what} must have shape (n, {self._dimension}), got {vectors.shape}")
        return np.ascontiguousarray(vectors, dtype=np.float32)

    def add(self, vectors: np.ndarray) -> None:
        vectors = self._check(vectors, "vectors")
        if not len(vectors):
            return
        if self._index is None:
            self._index = self._train_ivfpq(vectors)
        self._index.add(vectors)

    def train(self, sample: np.ndarray, rows: int | None = None) -> None:
        """ivfpq: train on a sample before rows are added in parts (other kinds need no training). `rows`: how
        many rows will be added, which sets the number of lists (default: the sample's size)."""
        if self._kind == "ivfpq" and self._index is None:
            self._index = self._train_ivfpq(self._check(sample, "the training sample"), rows)

    def _train_ivfpq(self, vectors: np.ndarray, total: int | None = None) -> Any:
        faiss = _faiss()
        rows = len(vectors)
        nlist = self._nlist or default_nlist(max(rows, total or 0), rows)
        m = self._m or default_pq_m(self._dimension)
        needed = max(nlist, 2**self._nbits)
        if rows < needed:
            raise IndexTrainingError(
                f"an ivfpq index needs at least {needed} rows to train (nlist={nlist}, 2**nbits="
                f"{2**self._nbits}) but got {rows}; use index kind 'flat' (exact) or 'hnsw' for a memory this "
                "small, or lower nlist/nbits"
            )
        quantizer = faiss.IndexFlatIP(self._dimension)
        index = faiss.IndexIVFPQ(
            quantizer, self._dimension, nlist, m, self._nbits, faiss.METRIC_INNER_PRODUCT
        )
        index.train(vectors)
        return index

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        queries = self._check(queries, "queries")
        if len(self) == 0 or not len(queries):
            scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
            return scores, np.full((len(queries), k), -1, dtype=np.int64)
        faiss = _faiss()
        params = None
        if self._kind == "hnsw":
            # Fewer candidates than k would cut results short; per-call params keep searches thread-safe.
            params = faiss.SearchParametersHNSW(efSearch=max(self.ef_search, k))
        elif self._kind == "ivfpq":
            params = faiss.SearchParametersIVF(nprobe=min(self.nprobe, int(self._index.nlist)))
        scores, row_ids = self._index.search(queries, k, params=params)
        row_ids = row_ids.astype(np.int64, copy=False)
        scores = np.where(row_ids < 0, np.float32(-np.inf), scores).astype(np.float32, copy=False)
        return scores, row_ids

    def reconstruct(self, row_ids: np.ndarray) -> np.ndarray:
        """The stored vectors of some rows (exact for flat and hnsw, the PQ approximation for ivfpq)."""
        row_ids = np.asarray(row_ids, dtype=np.int64)
        if not len(row_ids):
            return np.zeros((0, self._dimension), dtype=np.float32)
        if self._index is None or row_ids.min() < 0 or row_ids.max() >= len(self):
            raise IndexError(f"row ids out of range for an index of {len(self)} rows")
        if self._kind == "ivfpq" and not self._direct_map:
            # IVF lists have no row -> vector map until asked for one.
            self._index.make_direct_map()
            self._direct_map = True
        return np.asarray(self._index.reconstruct_batch(row_ids), dtype=np.float32)

    def save(self, path: Path | str) -> None:
        """Write to `path` through a temporary sibling and a rename, so `path` is never half-written."""
        if self._index is None:
            raise IndexTrainingError(
                "an empty ivfpq index has not been trained and cannot be saved; add rows first"
            )
        # The search-time knobs live on this object; copy them into FAISS so that they survive a reload.
        if self._kind == "hnsw":
            self._index.hnsw.efSearch = self.ef_search
        elif self._kind == "ivfpq":
            self._index.nprobe = self.nprobe
        path = Path(path)
        tmp = path.with_name(f".{path.name}.tmp-{uuid.uuid4().hex[:12]}")
        try:
            _faiss().write_index(self._index, str(tmp))
            with tmp.open("rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)

    @classmethod
    def load(cls, path: Path | str) -> FaissIndex:
        faiss = _faiss()
        raw = faiss.read_index(str(path))
        if raw.metric_type != faiss.METRIC_INNER_PRODUCT:
            raise ValueError(f"{path}: expected an inner-product index, found metric {raw.metric_type}")
        if isinstance(raw, faiss.IndexHNSWFlat):
            index = cls(raw.d, "hnsw", hnsw_m=_hnsw_m(raw), ef_construction=raw.hnsw.efConstruction)
            index.ef_search = int(raw.hnsw.efSearch)
        elif isinstance(raw, faiss.IndexIVFPQ):
            index = cls(raw.d, "ivfpq", nlist=int(raw.nlist), m=int(raw.pq.M), nbits=int(raw.pq.nbits))
            index.nprobe = int(raw.nprobe)
        elif isinstance(raw, faiss.IndexFlatIP):
            index = cls(raw.d, "flat")
        else:
            raise ValueError(f"{path}: unsupported FAISS index type {type(raw).__name__}")
        index._index = raw
        return index


def _hnsw_m(raw: Any) -> int:
    # Level 0 holds 2*M neighbours; FAISS does not store M itself.
    return int(raw.hnsw.nb_neighbors(1))
