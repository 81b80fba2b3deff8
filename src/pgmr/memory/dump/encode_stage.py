"""The encode stage: each catalog shard's memory rows -> their embeddings, one vector file per shard.

This process plans each shard: texts an embedding cache holds (`--cache`, e.g. an earlier memory's) and, for
synthetic dumps, drawn vectors (`pgmr.memory.dump.drawn`) are filled in here; the rest go to the workers,
which load the encoder once per process. Each shard's vectors are written atomically as they come back.
A shard's rows are `memory_rows` of its records, a deterministic function of the shard, so the index stage
can pair them with the vectors without storing the texts twice.
"""

from __future__ import annotations

import io
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pgmr.failpoints import failpoint
from pgmr.jsonl import atomic_write_bytes
from pgmr.memory.cache import EmbeddingCache
from pgmr.memory.dump.catalog_rows import shard_rows
from pgmr.memory.dump.cluster import run_bounded
from pgmr.memory.dump.drawn import DrawnVectors
from pgmr.memory.dump.parse_stage import ProgressCallback, StageProgress
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.encoder import Encoder, normalize_rows
from pgmr.memory.errors import MemoryCorruptError
from pgmr.memory.rows import MemoryRow

_ENCODERS: dict[str, Encoder] = {}


def _worker_encoder(name: str) -> Encoder:
    encoder = _ENCODERS.get(name)
    if encoder is None:
        from pgmr.memory.encoders import load_encoder

        encoder = _ENCODERS[name] = load_encoder(name)
    return encoder


def encode_texts(texts: list[str], encoder_name: str, batch_size: int) -> bytes:
    """Unit vectors of texts as `.npy` bytes (float32): the unit of work a worker runs."""
    encoder = _worker_encoder(encoder_name)
    vectors = np.zeros((0, encoder.dimension), dtype=np.float32)
    if texts:
        vectors = normalize_rows(np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32))
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    return buffer.getvalue()


# How the work directory stores vectors: float16 halves it (~17 GB instead of ~35 GB at 10M items) where the
# index keeps float16 copies anyway.
VECTOR_DTYPES: dict[str, np.dtype[Any]] = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16)}


def vector_dtype(index_kind: str) -> str:
    return "float16" if index_kind == "ivfpq-rerank" else "float32"


@dataclass(frozen=True)
class ShardPlan:
    """A shard's rows, and which of its unique texts come from where: the cache, drawing, or the encoder."""

    shard: Path
    rows: list[MemoryRow]
    texts: list[str]
    vectors: np.ndarray  # (len(texts), dimension): cached and drawn rows filled in, the rest zero
    to_encode: list[int]  # positions in `texts`
    drawn: int

    def assemble(self, encoded: np.ndarray, dtype: str = "float32") -> bytes:
        vectors = self.vectors
        if self.to_encode:
            vectors[self.to_encode] = encoded
        position = {text: i for i, text in enumerate(self.texts)}
        buffer = io.BytesIO()
        chosen = vectors[[position[row.text] for row in self.rows]]
        np.save(buffer, chosen.astype(VECTOR_DTYPES[dtype], copy=False), allow_pickle=False)
        return buffer.getvalue()


def plan_shard(
    shard: Path, dimension: int, cache: EmbeddingCache | None, drawn: DrawnVectors | None
) -> ShardPlan:
    rows = shard_rows(pq.read_table(shard))
    texts = list(dict.fromkeys(row.text for row in rows))
    vectors = np.zeros((len(texts), dimension), dtype=np.float32)
    missing = list(range(len(texts)))
    if cache is not None and texts:
        vectors, missing = cache.lookup(texts)
    drawn_count = 0
    if drawn is not None and missing:
        # A text is drawn when every row that has it is drawn (a namesake's text is encoded).
        row_of = {}
        for row in rows:
            if row.text not in row_of or not drawn.drawn(row):
                row_of[row.text] = row
        chosen = [i for i in missing if drawn.drawn(row_of[texts[i]])]
        if chosen:
            vectors[chosen] = drawn.vectors([row_of[texts[i]] for i in chosen])
            drawn_count = len(chosen)
            chosen_set = set(chosen)
            missing = [i for i in missing if i not in chosen_set]
    return ShardPlan(shard, rows, texts, vectors, missing, drawn_count)


def read_vectors(path: Path, rows: int, dimension: int) -> np.ndarray:
    """A shard's vectors, memory-mapped: float32, or float16 where the index keeps no more (ivfpq-rerank)."""
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise MemoryCorruptError(f"{path} is unreadable ({exc}); delete it and run the build again") from None
    if vectors.shape != (rows, dimension) or vectors.dtype not in VECTOR_DTYPES.values():
        raise MemoryCorruptError(
            f"{path} holds {vectors.shape} {vectors.dtype} vectors for {rows} rows of dimension {dimension}; "
            "delete it and run the build again"
        )
    return vectors


@dataclass(frozen=True)
class EncodeReport:
    shards_now: int  # shards encoded in this call (the rest had vectors already)
    rows_now: int
    encoded_texts: int  # texts that went through the encoder
    cached_texts: int
    drawn_texts: int
    seconds: float


def run_encode_stage(
    client: Any,
    work: WorkDir,
    encoder_name: str,
    dimension: int,
    batch_size: int = 128,
    progress: ProgressCallback | None = None,
    cache: EmbeddingCache | None = None,
    drawn: DrawnVectors | None = None,
    dtype: str = "float32",
) -> EncodeReport:
    """Vectors for every catalog shard that has none yet. This process plans each shard (cache lookups and
    drawn vectors, both cheap) and sends only the texts to encode to the workers. `dtype`: how the shard files
    store them (`vector_dtype`)."""
    started = time.perf_counter()
    shards = work.catalog_shards()
    todo = [s for s in shards if not work.vector_file(s).is_file()]
    done_now = rows_now = encoded = cached = drawn_now = 0
    finished_before = len(shards) - len(todo)

    def submit(plan: ShardPlan) -> Any | None:
        if not plan.to_encode:
            return None
        texts = [plan.texts[i] for i in plan.to_encode]
        return client.submit(encode_texts, texts, encoder_name, batch_size, pure=False)

    def finish(plan: ShardPlan, data: bytes | None) -> None:
        nonlocal done_now, rows_now, encoded, cached, drawn_now
        if data is None:
            encoded_vectors = np.zeros((0, dimension), dtype=np.float32)
        else:
            encoded_vectors = np.load(io.BytesIO(data), allow_pickle=False)
        atomic_write_bytes(work.vector_file(plan.shard), plan.assemble(encoded_vectors, dtype))
        failpoint("dump.vectors")
        done_now += 1
        rows_now += len(plan.rows)
        encoded += len(plan.to_encode)
        drawn_now += plan.drawn
        cached += len(plan.texts) - len(plan.to_encode) - plan.drawn
        if progress:
            progress(
                StageProgress(
                    "encode", finished_before + done_now, len(shards), rows_now, time.perf_counter() - started
                )
            )

    plans = (plan_shard(shard, dimension, cache, drawn) for shard in todo)
    run_bounded(client, plans, submit, finish, lambda plan: f"encoding {plan.shard.name}")
    return EncodeReport(done_now, rows_now, encoded, cached, drawn_now, time.perf_counter() - started)
