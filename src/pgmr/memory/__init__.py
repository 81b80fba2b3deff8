"""The non-parametric memory: entity and relation dictionaries that resolve placeholders to Wikidata IDs."""

from __future__ import annotations

from pgmr.memory.cache import EmbeddingCache
from pgmr.memory.dictionary import MemoryDictionary, MemoryHit
from pgmr.memory.encoder import Encoder
from pgmr.memory.encoders import DEFAULT_MODEL_NAME, SentenceTransformerEncoder, build_encoder, load_encoder
from pgmr.memory.errors import (
    IndexTrainingError,
    MemoryCorruptError,
    MemoryMismatchError,
    MemoryNotFoundError,
    PgmrMemoryError,
)
from pgmr.memory.index import VectorIndex, create_index, load_index
from pgmr.memory.indexes import INDEX_KINDS, FaissIndex
from pgmr.memory.manifest import (
    FORMAT_VERSION,
    KINDS,
    DictionaryManifest,
    MemoryManifest,
    read_manifest,
    tune_search,
)
from pgmr.memory.rows import TEXT_TEMPLATE, MemoryRow, memory_rows, memory_text
from pgmr.memory.store import BuildStats, Memory, default_cache_dir

__all__ = [
    "DEFAULT_MODEL_NAME",
    "FORMAT_VERSION",
    "INDEX_KINDS",
    "KINDS",
    "TEXT_TEMPLATE",
    "BuildStats",
    "DictionaryManifest",
    "EmbeddingCache",
    "Encoder",
    "FaissIndex",
    "IndexTrainingError",
    "Memory",
    "MemoryCorruptError",
    "MemoryDictionary",
    "MemoryHit",
    "MemoryManifest",
    "MemoryMismatchError",
    "MemoryNotFoundError",
    "MemoryRow",
    "PgmrMemoryError",
    "SentenceTransformerEncoder",
    "VectorIndex",
    "create_index",
    "build_encoder",
    "default_cache_dir",
    "load_encoder",
    "load_index",
    "memory_rows",
    "memory_text",
    "read_manifest",
    "tune_search",
]
