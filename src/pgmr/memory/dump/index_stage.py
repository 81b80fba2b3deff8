"""The index stage: catalog shards + their vectors -> a memory directory (rows, indexes, prior, manifest).

The memory is the same format `pgmr memory build` writes from label files, so everything that loads a memory
(ask, serve, experiments) takes a dump-built one unchanged. Its prior is the dump's own: each item's sitelink
count (how many Wikipedia and sister-project pages it has), recorded in the manifest as `"source": "sitelinks"`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np

from pgmr.kg.dump.shards import read_shard
from pgmr.kg.ids import Kind, id_number
from pgmr.memory.dictionary import MemoryDictionary
from pgmr.memory.dump.encode_stage import read_vectors, shard_rows
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.encoder import Encoder
from pgmr.memory.index import create_index
from pgmr.memory.lexical import LEXICAL_DIRS
from pgmr.memory.manifest import KINDS
from pgmr.memory.rows import MemoryRow
from pgmr.memory.store import Memory, new_manifest

PRIOR_SOURCE = "sitelinks"


def collect(
    work: WorkDir, dimension: int
) -> tuple[dict[Kind, list[MemoryRow]], dict[Kind, np.ndarray], dict[str, int]]:
    """Every shard's rows and vectors by kind, in memory order (by ID number), and the sitelink counts."""
    rows: dict[Kind, list[MemoryRow]] = {kind: [] for kind in KINDS}
    parts: dict[Kind, list[np.ndarray]] = {kind: [] for kind in KINDS}
    sitelinks: dict[str, int] = {}
    seen: set[str] = set()
    for shard in work.catalog_shards():
        table = read_shard(shard)
        shard_memory_rows = shard_rows(table)
        vectors = read_vectors(work.vector_file(shard), len(shard_memory_rows), dimension)
        columns = table.select(["id", "kind", "sitelinks"]).to_pydict()
        kind_of = dict(zip(columns["id"], columns["kind"], strict=True))
        for wid, count in zip(columns["id"], columns["sitelinks"], strict=True):
            if count and kind_of[wid] == "entity":
                sitelinks[wid] = int(count)
        # A dump lists each entity once; should one repeat in a later shard, its first shard's rows are kept.
        fresh = set(columns["id"]) - seen
        seen |= fresh
        for kind in KINDS:
            chosen = [
                i for i, row in enumerate(shard_memory_rows) if row.id in fresh and kind_of[row.id] == kind
            ]
            rows[kind].extend(shard_memory_rows[i] for i in chosen)
            parts[kind].append(np.asarray(vectors[chosen], dtype=np.float32))
    vectors_by_kind: dict[Kind, np.ndarray] = {}
    for kind in KINDS:
        stacked = np.concatenate(parts[kind]) if parts[kind] else np.zeros((0, dimension), dtype=np.float32)
        order = sorted(range(len(rows[kind])), key=lambda i, r=rows[kind]: (id_number(r[i].id), r[i].id, i))  # type: ignore[misc]
        rows[kind] = [rows[kind][i] for i in order]
        vectors_by_kind[kind] = stacked[order] if len(order) else stacked
    return rows, vectors_by_kind, sitelinks


def build_memory(
    work: WorkDir,
    encoder: Encoder,
    index_kind: str = "flat",
    index_options: Mapping[str, Any] | None = None,
    *,
    index_backend: str = "faiss",
    sitelink_prior: bool = True,
) -> tuple[Memory, float]:
    """The memory of a finished parse and encode, ready to `save`; and the seconds this took."""
    started = time.perf_counter()
    rows, vectors, sitelinks = collect(work, encoder.dimension)
    options = dict(index_options or {})
    dictionaries: dict[Kind, MemoryDictionary] = {}
    for kind in KINDS:
        index = create_index(index_kind, encoder.dimension, index_backend, **options)
        if len(rows[kind]):
            index.add(vectors[kind])
        dictionaries[kind] = MemoryDictionary(kind, rows[kind], index, encoder)
    # The lexical tier is written by `Memory.save` from the rows: label lookups on disk, whatever the size.
    lexical = {str(kind): directory for kind, directory in LEXICAL_DIRS.items()}
    manifest = new_manifest(encoder, dictionaries, index_kind, options, index_backend, lexical)
    memory = Memory(
        dictionaries["entity"],
        dictionaries["relation"],
        encoder,
        manifest,
        prior_counts=sitelinks if sitelink_prior else None,
        prior_source=PRIOR_SOURCE if sitelink_prior else "",
    )
    return memory, time.perf_counter() - started
