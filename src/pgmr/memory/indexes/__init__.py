"""Concrete vector indexes."""

from __future__ import annotations

from pgmr.memory.indexes.faiss_index import FAISS_KINDS, FaissIndex
from pgmr.memory.indexes.reranked_ivfpq import KIND as RERANKED_KIND
from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ

# Every kind `create_index` makes with the FAISS backend.
INDEX_KINDS = (*FAISS_KINDS, RERANKED_KIND)

__all__ = ["INDEX_KINDS", "FaissIndex", "RerankedIVFPQ"]
