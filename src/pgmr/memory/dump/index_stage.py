"""The index stage: catalog shards + their vectors -> a memory directory (rows, indexes, prior, manifest).

The memory loads as any other (ask, serve, experiments take it unchanged). Rows are written as memory-mapped
Arrow files and the vectors go into the index shard by shard, so the stage streams: at 10M items neither the
rows (~20M) nor their vectors (~30 GB as float32) are ever in RAM at once. Indexes that train (ivfpq,
ivfpq-rerank) first train on a sample of rows drawn from every shard.

Its prior is the dump's own: each item's sitelink count (how many Wikipedia and sister-project pages it has),
recorded in the manifest as `"source": "sitelinks"`.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.failpoints import failpoint
from pgmr.jsonl import atomic_write_bytes, atomic_write_text
from pgmr.kg.ids import Kind
from pgmr.memory.dictionary import MemoryDictionary
from pgmr.memory.dump.index_parts import EncodesApart, Parts, first_occurrences
from pgmr.memory.dump.parse_stage import ProgressCallback
from pgmr.memory.dump.part_codes import TrainedIndex, part_progress, write_parts
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


def _index_dir(work: WorkDir, settings: dict[str, Any]) -> Path:
    """The stage's directory, emptied when it holds parts of other index settings (their codes would not
    fit) and of scratch files a killed build left."""
    out = work.path / "index"
    record = out / "settings.json"
    wanted = json.dumps(settings, sort_keys=True)
    if out.is_dir() and (not record.is_file() or record.read_text(encoding="utf-8") != wanted):
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    for leftover in out.glob("pgmr-vectors-*"):
        leftover.unlink()
    atomic_write_text(record, wanted)
    return out


def _sample(work: WorkDir, shards: list[Path], dimension: int) -> tuple[np.ndarray, int]:
    return _training_sample(work, shards, dimension, TRAIN_SAMPLE)


def _trained(index: EncodesApart, path: Path, sample: Callable[[], tuple[np.ndarray, int]]) -> None:
    """Train once and keep the trained state: a resumed stage must encode its remaining shards with the same
    lists and codebooks as the parts already written. Lists grow with the rows to come (~sqrt of them), so
    that a probe scans a bounded share of a memory of any size."""
    if path.is_file():
        index.restore_trained(path.read_bytes())
        return
    vectors, total = sample()
    index.train(vectors, rows=total)  # type: ignore[attr-defined]
    atomic_write_bytes(path, index.trained_state())


def build_memory(
    work: WorkDir,
    encoder: Encoder,
    index_kind: str = "flat",
    index_options: Mapping[str, Any] | None = None,
    *,
    index_backend: str = "faiss",
    sitelink_prior: bool = True,
    vectors: str = "encoded",
    progress: ProgressCallback | None = None,
    client: Any | None = None,
) -> tuple[Memory, float]:
    """The memory of a finished parse and encode, ready to `save`; and the seconds this took. The rows files
    are written into `<work>/index/` (the memory's `save` links or copies them). With a Dask `client`, the
    parts' codes are encoded on its workers (pgmr.memory.dump.part_codes)."""
    started = time.perf_counter()
    shards = work.catalog_shards()
    options = dict(index_options or {})
    out = _index_dir(work, {"kind": index_kind, "backend": index_backend, "options": options})
    # ivfpq-rerank spills float16 vectors next to the build (and `save` renames them into the memory).
    extra = {"scratch_dir": str(out)} if index_backend == "faiss" and index_kind == "ivfpq-rerank" else {}
    indexes: dict[Kind, VectorIndex] = {
        kind: create_index(index_kind, encoder.dimension, index_backend, **options, **extra) for kind in KINDS
    }
    # Relations are few (14k properties): their index trains on their own rows, at the first add.
    needs_training = hasattr(indexes["entity"], "train")
    entity_index = indexes["entity"]
    apart = entity_index if isinstance(entity_index, EncodesApart) else None
    if apart is not None:
        _trained(apart, out / "entity.trained", lambda: _sample(work, shards, encoder.dimension))
    elif needs_training and index_kind in ("ivfpq", "ivfpq-rerank"):
        entity_index.train(*_sample(work, shards, encoder.dimension))  # type: ignore[attr-defined]
    # Units: one part per shard, done once (a resumed build skips the finished ones).
    parts = Parts(out)
    parts.dir.mkdir(parents=True, exist_ok=True)
    pending = [not parts.done(s) for s in shards]
    # Which records repeat is a question over every shard: asked only when some part is still to write.
    masks = first_occurrences(shards) if any(pending) else []
    todo = [(s, kept) for s, kept, wanted in zip(shards, masks, pending, strict=False) if wanted]
    on_part = part_progress(progress, len(shards), len(shards) - len(todo), started)
    if client is not None and apart is not None:
        state = apart.trained_state()
        spec = TrainedIndex.of(index_kind, encoder.dimension, index_backend, options, state)
        write_parts(client, parts, todo, work.vector_file, spec, state, on_part)
    else:
        for shard, kept in todo:
            on_part(parts.write(shard, kept, work.vector_file(shard), encoder.dimension, apart))
            failpoint("dump.index_part")
    # Assembly: appending rows and codes, cheap next to the parts.
    writers = {kind: ArrowRowsWriter(out / ROWS_FILES[kind].replace(".jsonl", ".arrow")) for kind in KINDS}
    relation_parts: list[np.ndarray] = []
    sitelinks: dict[str, int] = {}
    try:
        for shard in shards:
            shard_vectors: np.ndarray | None = None
            for kind in KINDS:
                table, positions = parts.rows(shard, kind)
                if not table.num_rows:
                    continue
                writers[kind].write_table(table)
                if shard_vectors is None:
                    shard_vectors = np.load(work.vector_file(shard), mmap_mode="r", allow_pickle=False)
                part = np.asarray(shard_vectors[positions], dtype=np.float32)
                if kind == "relation":
                    relation_parts.append(part)
                elif apart is not None:
                    apart.add_encoded(parts.codes(shard), part)
                else:
                    indexes[kind].add(part)
            sitelinks.update(parts.prior(shard))
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
