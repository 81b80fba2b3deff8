"""The encode stage: each catalog shard's memory rows -> their embeddings, one vector file per shard.

Workers load the encoder once per process and encode whole shards; this process writes each shard's vectors
atomically as they come back. A shard's rows are `memory_rows` of its records, a deterministic function of the
shard, so the index stage can pair them with the vectors without storing the texts twice.
"""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq

from pgmr.failpoints import failpoint
from pgmr.jsonl import atomic_write_bytes
from pgmr.kg.catalog import CatalogEntry
from pgmr.memory.dump.cluster import worker_count
from pgmr.memory.dump.parse_stage import ProgressCallback, StageProgress
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.encoder import Encoder, normalize_rows
from pgmr.memory.errors import MemoryCorruptError, PgmrMemoryError
from pgmr.memory.rows import MemoryRow, memory_rows

_ENCODERS: dict[str, Encoder] = {}


def shard_rows(table: Any) -> list[MemoryRow]:
    """The memory rows of a catalog shard (a pyarrow table), in the order their vectors are stored."""
    columns = table.select(["id", "label", "description", "aliases"]).to_pydict()
    entries = [
        CatalogEntry(wid, label, description, tuple(aliases or ()))
        for wid, label, description, aliases in zip(
            columns["id"], columns["label"], columns["description"], columns["aliases"], strict=True
        )
    ]
    return memory_rows(entries)


def _worker_encoder(name: str) -> Encoder:
    encoder = _ENCODERS.get(name)
    if encoder is None:
        from pgmr.memory.encoders import load_encoder

        encoder = _ENCODERS[name] = load_encoder(name)
    return encoder


def encode_shard(parquet: bytes, encoder_name: str, batch_size: int) -> bytes:
    """A shard's vectors as `.npy` bytes (float32, unit rows, one per memory row)."""
    encoder = _worker_encoder(encoder_name)
    rows = shard_rows(pq.read_table(io.BytesIO(parquet)))
    texts = list(dict.fromkeys(row.text for row in rows))
    vectors = np.zeros((0, encoder.dimension), dtype=np.float32)
    if texts:
        vectors = normalize_rows(np.asarray(encoder.encode(texts, batch_size=batch_size), dtype=np.float32))
        position = {text: i for i, text in enumerate(texts)}
        vectors = vectors[[position[row.text] for row in rows]]
    buffer = io.BytesIO()
    np.save(buffer, vectors, allow_pickle=False)
    return buffer.getvalue()


def read_vectors(path: Path, rows: int, dimension: int) -> np.ndarray:
    try:
        vectors = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise MemoryCorruptError(f"{path} is unreadable ({exc}); delete it and run the build again") from None
    if vectors.shape != (rows, dimension) or vectors.dtype != np.float32:
        raise MemoryCorruptError(
            f"{path} holds {vectors.shape} {vectors.dtype} vectors for {rows} rows of dimension {dimension}; "
            "delete it and run the build again"
        )
    return vectors


def run_encode_stage(
    client: Any,
    work: WorkDir,
    encoder_name: str,
    batch_size: int = 128,
    progress: ProgressCallback | None = None,
) -> tuple[int, int, float]:
    """(shards encoded now, rows encoded now, seconds); shards with a vector file already are skipped."""
    from distributed import wait

    started = time.perf_counter()
    shards = work.catalog_shards()
    todo = [s for s in shards if not work.vector_file(s).is_file()]
    limit = 2 * worker_count(client)
    in_flight: dict[Any, Path] = {}
    done_now = rows_now = 0
    finished_before = len(shards) - len(todo)

    def collect(futures: list[Any]) -> None:
        nonlocal done_now, rows_now
        for future in futures:
            shard = in_flight.pop(future)
            try:
                data = future.result()
            except Exception as exc:
                raise PgmrMemoryError(f"encoding {shard.name} failed: {exc}") from exc
            atomic_write_bytes(work.vector_file(shard), data)
            failpoint("dump.vectors")
            done_now += 1
            rows_now += int(np.load(io.BytesIO(data), allow_pickle=False).shape[0])
            if progress:
                progress(
                    StageProgress(
                        "encode",
                        finished_before + done_now,
                        len(shards),
                        rows_now,
                        time.perf_counter() - started,
                    )
                )

    for shard in todo:
        while len(in_flight) >= limit:
            finished, _ = wait(list(in_flight), return_when="FIRST_COMPLETED")
            collect(list(finished))
        in_flight[client.submit(encode_shard, shard.read_bytes(), encoder_name, batch_size, pure=False)] = (
            shard
        )
    if in_flight:
        wait(list(in_flight))
        collect(list(in_flight))
    return done_now, rows_now, time.perf_counter() - started
