"""Concrete vector indexes."""

from __future__ import annotations

from pgmr.memory.indexes.faiss_index import INDEX_KINDS, FaissIndex

__all__ = ["INDEX_KINDS", "FaissIndex"]
