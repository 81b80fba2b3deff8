"""Wikidata JSON dumps: reading them in chunks, one entity line -> one catalog record, catalog shards, and
synthetic dumps in the same format."""

from __future__ import annotations

from pgmr.kg.dump.reader import Chunk, DumpError, compression_of, iter_chunks
from pgmr.kg.dump.records import DEFAULT_LANGUAGES, REASONS, DumpRecord, record_from_entity, record_from_line
from pgmr.kg.dump.shards import SCHEMA, ParsedChunk, parse_chunk, read_shard

__all__ = [
    "DEFAULT_LANGUAGES",
    "REASONS",
    "SCHEMA",
    "Chunk",
    "DumpError",
    "DumpRecord",
    "ParsedChunk",
    "compression_of",
    "iter_chunks",
    "parse_chunk",
    "read_shard",
    "record_from_entity",
    "record_from_line",
]
