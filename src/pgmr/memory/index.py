"""What the memory needs from a vector index, and loading one from disk by backend name."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class VectorIndex(Protocol):
    """Inner-product search over float32 vectors; row ids are positions in insertion order (0, 1, ...).

    `search` returns (scores, row_ids), both shaped (queries, k), best first; slots beyond the rows found hold
    row id -1 and score -inf.
    """

    @property
    def kind(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def __len__(self) -> int: ...

    def add(self, vectors: np.ndarray) -> None: ...

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]: ...

    def reconstruct(self, row_ids: np.ndarray) -> np.ndarray:
        """The stored vectors of the given rows, shaped (len(row_ids), dimension)."""
        ...

    def save(self, path: Path | str) -> None: ...

    def options(self) -> dict[str, int | str]:
        """The construction options, as recorded in a memory's manifest."""
        ...


INDEX_BACKENDS = ("faiss", "milvus")


def create_index(kind: str, dimension: int, backend: str = "faiss", **options: int | str) -> VectorIndex:
    """A new empty index. Milvus takes `uri` (a cluster's address or a Milvus Lite file) and optionally
    `collection` and `index_type`; FAISS takes the numeric options of its index kinds."""
    if backend == "faiss":
        from pgmr.memory.indexes.faiss_index import FaissIndex
        from pgmr.memory.indexes.reranked_ivfpq import KIND, RerankedIVFPQ

        if kind == KIND:
            return RerankedIVFPQ(dimension, **options)  # type: ignore[arg-type]
        return FaissIndex(dimension, kind, **options)  # type: ignore[arg-type]
    if backend == "milvus":
        from pgmr.memory.indexes.milvus_index import MilvusIndex

        if "uri" not in options:
            raise ValueError("the milvus backend needs uri= (a Milvus cluster's address or a local file)")
        return MilvusIndex(
            dimension,
            kind,
            uri=str(options["uri"]),
            collection=str(options["collection"]) if "collection" in options else None,
            index_type=str(options.get("index_type", "FLAT")),
        )
    raise ValueError(f"unknown index backend {backend!r}; known: {', '.join(INDEX_BACKENDS)}")


def load_index(path: Path | str, backend: str = "faiss") -> VectorIndex:
    if backend == "faiss":
        from pgmr.memory.indexes.faiss_index import FaissIndex
        from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ, is_reranked_file

        if is_reranked_file(path):
            return RerankedIVFPQ.load(path)
        return FaissIndex.load(path)
    if backend == "milvus":
        from pgmr.memory.indexes.milvus_index import MilvusIndex

        return MilvusIndex.load(path)
    raise ValueError(f"unknown index backend {backend!r}; known: {', '.join(INDEX_BACKENDS)}")
