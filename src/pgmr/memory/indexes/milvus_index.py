"""A `VectorIndex` on Milvus: a collection of (row id, vector) that a Milvus cluster serves and scales out.

The vectors live in Milvus, not in the memory directory: `save(path)` writes a small descriptor (the server's
URI, the collection, its dimension and row count) and `load(path)` reconnects to it. The URI is a cluster's
address (`http://milvus.example.org:19530`, with a token in `$MILVUS_TOKEN` if it needs one) or a local file
path, which pymilvus serves with Milvus Lite: the same client calls either way, so what the contract suite
checks against Milvus Lite is the code path a cluster gets.

Row ids are Milvus primary keys assigned in insertion order, so they are positions, as the seam wants. Search
is exact (a FLAT index under inner product) unless `index_type` asks for another Milvus index.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.jsonl import atomic_write_text

DESCRIPTOR_FORMAT = "pgmr-milvus-index 1"
_INSERT_BATCH = 5000
# Milvus refuses a search limit above this (its topk cap).
MAX_TOPK = 16384


def _client(uri: str) -> Any:
    from pymilvus import MilvusClient

    token = os.environ.get("MILVUS_TOKEN", "")
    return MilvusClient(uri=uri, token=token) if token else MilvusClient(uri=uri)


def _as_queries(vectors: Any, dimension: int) -> np.ndarray:
    array = np.ascontiguousarray(np.asarray(vectors, dtype=np.float32))
    if array.ndim != 2 or array.shape[1] != dimension:
        raise ValueError(f"expected a (n, {dimension}) array of vectors, got shape {array.shape}")
    return array


class MilvusIndex:
    """Inner-product search in a Milvus collection."""

    def __init__(
        self,
        dimension: int,
        kind: str = "flat",
        *,
        uri: str,
        collection: str | None = None,
        index_type: str = "FLAT",
        _create: bool = True,
    ) -> None:
        if dimension < 1:
            raise ValueError("dimension must be positive")
        self._dimension = dimension
        self._kind = kind
        self.uri = uri
        self.collection = collection or f"pgmr_{uuid.uuid4().hex[:16]}"
        self.index_type = index_type
        self._lock = threading.Lock()
        self._client = _client(uri)
        if _create:
            self._create()

    def _create(self) -> None:
        from pymilvus import DataType, MilvusClient

        schema = MilvusClient.create_schema(auto_id=False, enable_dynamic_field=False)
        schema.add_field("row", DataType.INT64, is_primary=True)
        schema.add_field("vector", DataType.FLOAT_VECTOR, dim=self._dimension)
        params = self._client.prepare_index_params()
        params.add_index(field_name="vector", index_type=self.index_type, metric_type="IP")
        if self._client.has_collection(self.collection):
            raise ValueError(f"Milvus collection {self.collection!r} already exists at {self.uri}")
        self._client.create_collection(
            self.collection, schema=schema, index_params=params, consistency_level="Strong"
        )

    def __repr__(self) -> str:
        return f"MilvusIndex({self.uri!r}, {self.collection!r}, dimension={self._dimension})"

    @property
    def kind(self) -> str:
        return self._kind

    @property
    def dimension(self) -> int:
        return self._dimension

    def __len__(self) -> int:
        # Counted by the server, so that two handles on one collection agree.
        result = self._client.query(self.collection, filter="", output_fields=["count(*)"])
        return int(result[0]["count(*)"]) if result else 0

    def add(self, vectors: np.ndarray) -> None:
        array = _as_queries(vectors, self._dimension)
        if not len(array):
            return
        with self._lock:
            start = len(self)
            for offset in range(0, len(array), _INSERT_BATCH):
                batch = array[offset : offset + _INSERT_BATCH]
                self._client.insert(
                    self.collection,
                    [{"row": start + offset + i, "vector": v} for i, v in enumerate(batch.tolist())],
                )

    def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        array = _as_queries(queries, self._dimension)
        scores = np.full((len(array), k), -np.inf, dtype=np.float32)
        row_ids = np.full((len(array), k), -1, dtype=np.int64)
        if not len(array):
            return scores, row_ids
        # No count(*) round trip per search: Milvus returns fewer hits when the collection has fewer rows.
        limit = min(k, MAX_TOPK)
        results = self._client.search(
            self.collection,
            data=array.tolist(),
            limit=limit,
            output_fields=["row"],
            search_params={"metric_type": "IP"},
        )
        for query, hits in enumerate(results):
            ordered = sorted(hits, key=lambda hit: (-float(hit["distance"]), int(hit["row"])))
            for slot, hit in enumerate(ordered[:limit]):
                scores[query, slot] = float(hit["distance"])
                row_ids[query, slot] = int(hit["row"])
        return scores, row_ids

    def reconstruct(self, row_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(row_ids, dtype=np.int64).ravel()
        if not len(ids):
            return np.zeros((0, self._dimension), dtype=np.float32)
        total = len(self)
        if (ids < 0).any() or (ids >= total).any():
            raise IndexError(
                f"row ids must be in [0, {total}), got {ids[(ids < 0) | (ids >= total)][:5].tolist()}"
            )
        unique = sorted(set(ids.tolist()))
        found = self._client.get(self.collection, ids=unique, output_fields=["vector"])
        by_row = {int(item["row"]): np.asarray(item["vector"], dtype=np.float32) for item in found}
        return np.stack([by_row[i] for i in ids.tolist()]).astype(np.float32)

    def options(self) -> dict[str, int | str]:
        return {"backend": "milvus", "index_type": self.index_type}

    def save(self, path: Path | str) -> None:
        """Flush the collection and write its descriptor (atomically) to `path`."""
        self._client.flush(self.collection)
        descriptor = {
            "format": DESCRIPTOR_FORMAT,
            "uri": self.uri,
            "collection": self.collection,
            "dimension": self._dimension,
            "kind": self._kind,
            "index_type": self.index_type,
            "rows": len(self),
        }
        atomic_write_text(Path(path), json.dumps(descriptor, indent=2) + "\n")

    @classmethod
    def load(cls, path: Path | str) -> MilvusIndex:
        path = Path(path)
        try:
            descriptor = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"{path} is not a pgmr Milvus index descriptor ({exc})") from None
        if not isinstance(descriptor, dict) or descriptor.get("format") != DESCRIPTOR_FORMAT:
            raise ValueError(f"{path} is not a pgmr Milvus index descriptor")
        try:
            index = cls(
                int(descriptor["dimension"]),
                str(descriptor["kind"]),
                uri=str(descriptor["uri"]),
                collection=str(descriptor["collection"]),
                index_type=str(descriptor["index_type"]),
                _create=False,
            )
        except KeyError as exc:
            raise ValueError(f"{path}: the descriptor lacks {exc}") from None
        if not index._client.has_collection(index.collection):
            raise ValueError(f"{path}: Milvus at {index.uri} has no collection {index.collection!r}")
        index._client.load_collection(index.collection)
        rows = len(index)
        if rows < int(descriptor.get("rows", 0)):
            raise ValueError(
                f"{path}: collection {index.collection!r} holds {rows} rows, the descriptor says "
                f"{descriptor['rows']}"
            )
        return index
