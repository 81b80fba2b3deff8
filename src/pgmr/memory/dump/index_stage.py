"""The index stage: catalog shards + their vectors -> a memory directory (rows, indexes, prior, manifest).

The memory loads as any other (ask, serve, experiments take it unchanged). Rows are written as memory-mapped
Arrow files and the vectors go into the index shard by shard, so the stage streams: at 10M items neither the
rows (~20M) nor their vectors (~30 GB as float32) are ever in RAM at once. Indexes that train (ivfpq,
ivfpq-rerank) first train on a sample of rows drawn from every shard.

Its prior is the dump's own: each item's sitelink count (how many Wikipedia and sister-project pages it has),
recorded in the manifest as `"source": "sitelinks"`.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.compute as pc

from pgmr.kg.dump.shards import read_shard
from pgmr.kg.ids import Kind, id_number
from pgmr.memory.dictionary import MemoryDictionary
from pgmr.memory.dump.catalog_rows import shard_rows
from pgmr.memory.dump.encode_stage import read_vectors
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.encoder import Encoder
from pgmr.memory.index import VectorIndex, create_index
from pgmr.memory.lexical import LEXICAL_DIRS
from pgmr.memory.manifest import KINDS, ROWS_FILES
from pgmr.memory.row_table import ArrowRows, ArrowRowsWriter
from pgmr.memory.store import Memory, new_manifest

PRIOR_SOURCE = "sitelinks"
# Rows an index trains on, drawn evenly from all shards.
TRAIN_SAMPLE = 200_000


def _first_occurrences(shards: list[Path]) -> list[np.ndarray]:
    """Per shard, a mask of the records kept: a dump lists each entity once, but should one repeat, its first
    record is kept. In numpy over ID numbers (and kinds), so that 10M IDs cost ~100 MB, not a Python set."""
    keys: list[np.ndarray] = []
    for shard in shards:
        table = read_shard(shard).select(["id", "kind"])
        numbers = np.fromiter((id_number(i) for i in table.column("id").to_pylist()), dtype=np.int64)
        is_relation = pc.equal(table.column("kind"), "relation").to_numpy(zero_copy_only=False)
        keys.append(numbers * 2 + is_relation.astype(np.int64))
    if not keys:
        return []
    every = np.concatenate(keys)
    _, first = np.unique(every, return_index=True)
    kept = np.zeros(len(every), dtype=bool)
    kept[first] = True
    masks, start = [], 0
    for part in keys:
        masks.append(kept[start : start + len(part)])
        start += len(part)
    return masks


def _training_sample(work: WorkDir, shards: list[Path], dimension: int, rows: int) -> tuple[np.ndarray, int]:
    """Up to `rows` vectors, an even share from every shard's vector file (rows of either kind); and how many
    rows the shards hold."""
    sizes = []
    for shard in shards:
        data = np.load(work.vector_file(shard), mmap_mode="r", allow_pickle=False)
        sizes.append(int(data.shape[0]))
    total = sum(sizes)
    if not total:
        return np.zeros((0, dimension), dtype=np.float32), 0
    share = min(1.0, rows / total)
    parts = []
    for shard, size in zip(shards, sizes, strict=True):
        take = min(size, max(1, round(size * share))) if size else 0
        if take:
            data = np.load(work.vector_file(shard), mmap_mode="r", allow_pickle=False)
            parts.append(np.asarray(data[np.linspace(0, size - 1, take).astype(np.int64)], dtype=np.float32))
    return np.concatenate(parts), total


def build_memory(
    work: WorkDir,
    encoder: Encoder,
    index_kind: str = "flat",
    index_options: Mapping[str, Any] | None = None,
    *,
    index_backend: str = "faiss",
    sitelink_prior: bool = True,
    vectors: str = "encoded",
) -> tuple[Memory, float]:
    """The memory of a finished parse and encode, ready to `save`; and the seconds this took. The rows files
    are written into `<work>/index/` (the memory's `save` links or copies them)."""
    started = time.perf_counter()
    shards = work.catalog_shards()
    options = dict(index_options or {})
    indexes: dict[Kind, VectorIndex] = {
        kind: create_index(index_kind, encoder.dimension, index_backend, **options) for kind in KINDS
    }
    needs_training = [index for index in indexes.values() if hasattr(index, "train")]
    if needs_training and index_kind in ("ivfpq", "ivfpq-rerank"):
        sample, total = _training_sample(work, shards, encoder.dimension, TRAIN_SAMPLE)
        # Relations are few (14k properties): their index trains on their own rows, at the first add. Lists
        # grow with the rows (~sqrt), so that a probe scans a bounded share of a memory of any size.
        indexes["entity"].train(sample, rows=total)  # type: ignore[attr-defined]
    out = work.path / "index"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    writers = {kind: ArrowRowsWriter(out / ROWS_FILES[kind].replace(".jsonl", ".arrow")) for kind in KINDS}
    relation_parts: list[np.ndarray] = []
    sitelinks: dict[str, int] = {}
    try:
        for shard, kept in zip(shards, _first_occurrences(shards), strict=True):
            table = read_shard(shard)
            memory_rows = shard_rows(table)
            shard_vectors = read_vectors(work.vector_file(shard), len(memory_rows), encoder.dimension)
            columns = table.select(["id", "kind", "sitelinks"]).to_pydict()
            kind_of: dict[str, str] = {}
            for wid, kind, count, keep in zip(
                columns["id"], columns["kind"], columns["sitelinks"], kept, strict=True
            ):
                if keep:
                    kind_of[wid] = kind
                    if count and kind == "entity":
                        sitelinks[wid] = int(count)
            for kind in KINDS:
                chosen = [i for i, row in enumerate(memory_rows) if kind_of.get(row.id) == kind]
                if not chosen:
                    continue
                writers[kind].write([memory_rows[i] for i in chosen])
                part = np.asarray(shard_vectors[chosen], dtype=np.float32)
                if kind == "relation":
                    relation_parts.append(part)
                else:
                    indexes[kind].add(part)
        if relation_parts:
            indexes["relation"].add(np.concatenate(relation_parts))
        for writer in writers.values():
            writer.close()
    except BaseException:
        for writer in writers.values():
            writer.abort()
        raise
    dictionaries = {
        kind: MemoryDictionary(kind, ArrowRows(writers[kind].path), indexes[kind], encoder) for kind in KINDS
    }
    # The lexical tier is written by `Memory.save` from the rows: label lookups on disk, whatever the size.
    lexical = {str(kind): directory for kind, directory in LEXICAL_DIRS.items()}
    manifest = new_manifest(
        encoder,
        dictionaries,
        index_kind,
        options,
        index_backend,
        lexical,
        rows_format="arrow",
        vectors=vectors,
    )
    memory = Memory(
        dictionaries["entity"],
        dictionaries["relation"],
        encoder,
        manifest,
        prior_counts=sitelinks if sitelink_prior else None,
        prior_source=PRIOR_SOURCE if sitelink_prior else "",
    )
    return memory, time.perf_counter() - started
