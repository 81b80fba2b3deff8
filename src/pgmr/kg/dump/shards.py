"""Catalog shards: the records of one dump chunk as a Parquet file, and the counts of what the chunk held.

`parse_chunk` is the unit of work of the parse stage. It is a pure function of the chunk's bytes, so any
worker of a cluster can run it; it returns the shard's bytes rather than writing them, so workers need no
shared file system: the process that drives the build writes each shard atomically.
"""

from __future__ import annotations

import io
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from pgmr.kg.catalog import CatalogEntry
from pgmr.kg.dump.records import DEFAULT_LANGUAGES, REASONS, DumpRecord, record_from_line

SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("kind", pa.string()),
        ("label", pa.string()),
        ("label_language", pa.string()),
        ("description", pa.string()),
        ("aliases", pa.list_(pa.string())),
        ("sitelinks", pa.int32()),
        ("datatype", pa.string()),
    ]
)
# Lines kept per reason as examples for the report (their line number in the chunk and what was wrong).
SAMPLES_PER_REASON = 3


@dataclass(frozen=True)
class ParsedChunk:
    parquet: bytes
    records: int
    lines: int
    counts: dict[str, int] = field(default_factory=dict)
    samples: dict[str, list[str]] = field(default_factory=dict)


def records_table(records: Sequence[DumpRecord]) -> pa.Table:
    return pa.table(
        {
            "id": [r.id for r in records],
            "kind": [r.kind for r in records],
            "label": [r.label for r in records],
            "label_language": [r.label_language for r in records],
            "description": [r.description for r in records],
            "aliases": [list(r.aliases) for r in records],
            "sitelinks": [r.sitelinks for r in records],
            "datatype": [r.datatype for r in records],
        },
        schema=SCHEMA,
    )


def table_bytes(table: pa.Table) -> bytes:
    sink = io.BytesIO()
    # zstd: a third of snappy's size on label text, and still fast to read back.
    pq.write_table(table, sink, compression="zstd")
    return sink.getvalue()


def parse_chunk(
    data: bytes, languages: Sequence[str] = DEFAULT_LANGUAGES, first_line: int = 0
) -> ParsedChunk:
    """The records of a chunk's lines as Parquet bytes, with counts per reason a line gave no record."""
    records: list[DumpRecord] = []
    counts = dict.fromkeys(REASONS, 0)
    samples: dict[str, list[str]] = {}
    lines = 0
    for number, line in enumerate(data.splitlines(), first_line + 1):
        result = record_from_line(line, languages)
        if result is None:
            continue
        lines += 1
        if result.record is not None:
            records.append(result.record)
            continue
        reason = result.reason or "malformed"
        counts[reason] = counts.get(reason, 0) + 1
        kept = samples.setdefault(reason, [])
        if len(kept) < SAMPLES_PER_REASON:
            kept.append(f"line {number}: {result.detail}")
    return ParsedChunk(table_bytes(records_table(records)), len(records), lines, counts, samples)


def read_shard(path: Path) -> pa.Table:
    return pq.read_table(path, schema=SCHEMA)


def iter_shard_entries(paths: Sequence[Path]) -> Iterator[tuple[CatalogEntry, int]]:
    """(catalog entry, sitelink count) for every record of the given shards, in order."""
    for path in paths:
        table = read_shard(path).select(["id", "label", "description", "aliases", "sitelinks"])
        for row in table.to_pylist():
            yield (
                CatalogEntry(row["id"], row["label"], row["description"], tuple(row["aliases"] or ())),
                int(row["sitelinks"] or 0),
            )
