"""The index stage's parts on the Dask cluster: workers turn each shard's entity vectors into index codes.

Encoding rows into codes (list assignment and product quantization) is ~90% of a part's time, so it is what
goes to the workers; this process reads each shard, plans its part and writes it when its codes come back,
as the encode stage does with vectors. Workers need no shared file system: the trained index travels to each
of them once (scattered), and each shard's vectors travel with its task. A worker restores the trained index
once per process and keeps it for the tasks that follow.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.failpoints import failpoint
from pgmr.memory.dump.cluster import run_bounded
from pgmr.memory.dump.index_parts import EncodesApart, PartPlan, Parts
from pgmr.memory.dump.parse_stage import ProgressCallback, StageProgress


@dataclass(frozen=True)
class TrainedIndex:
    """What a worker needs to encode rows as the build's index does: how to make the index, and its trained
    state (`EncodesApart.trained_state`); `digest` names the state in the workers' caches."""

    kind: str
    dimension: int
    backend: str
    options: Mapping[str, Any]
    digest: str

    @classmethod
    def of(
        cls, kind: str, dimension: int, backend: str, options: Mapping[str, Any], state: bytes
    ) -> TrainedIndex:
        # Where an index spills its vectors is the build's business: a worker only encodes.
        kept = {k: v for k, v in options.items() if k != "scratch_dir"}
        return cls(kind, dimension, backend, kept, hashlib.sha256(state).hexdigest())


_RESTORED: dict[str, EncodesApart] = {}


def _restored(spec: TrainedIndex, state: bytes) -> EncodesApart:
    index = _RESTORED.get(spec.digest)
    if index is None:
        from pgmr.memory.index import create_index

        made = create_index(spec.kind, spec.dimension, spec.backend, **spec.options)
        if not isinstance(made, EncodesApart):
            raise TypeError(f"a {spec.kind} index does not encode rows apart")
        made.restore_trained(state)
        _RESTORED.clear()  # one build's index at a time per worker process
        index = _RESTORED[spec.digest] = made
    return index


def encode_part(spec: TrainedIndex, state: bytes, vectors: np.ndarray) -> np.ndarray:
    """Codes of a part's entity vectors: the unit of work a worker runs."""
    return _restored(spec, state).encode_rows(vectors)


def write_parts(
    client: Any,
    parts: Parts,
    todo: Sequence[tuple[Path, np.ndarray]],
    vector_file: Callable[[Path], Path],
    spec: TrainedIndex,
    state: bytes,
    on_part: Callable[[int], None] | None = None,
) -> int:
    """Write the parts of `todo` ((shard, kept mask) pairs), their codes encoded on the cluster's workers, at
    most two tasks per worker in flight; `on_part(rows)` after each part is written. Returns the rows written."""
    if not todo:
        return 0
    shared = client.scatter(state, broadcast=True)
    rows = 0

    def submit(plan: PartPlan) -> Any:
        # Scattered, not passed in the task: a shard's vectors (~15 MB) are data, not part of the graph.
        vectors = client.scatter(plan.entity_vectors, hash=False)
        return client.submit(encode_part, spec, shared, vectors, pure=False)

    def finish(plan: PartPlan, codes: np.ndarray) -> None:
        nonlocal rows
        written = parts.finish(plan, codes)
        rows += written
        failpoint("dump.index_part")
        if on_part:
            on_part(written)

    plans = (parts.plan(shard, kept, vector_file(shard), spec.dimension) for shard, kept in todo)
    run_bounded(client, plans, submit, finish, lambda plan: f"encoding the index part of {plan.shard.name}")
    return rows


def part_progress(
    progress: ProgressCallback | None, shards: int, finished_before: int, started: float
) -> Callable[[int], None]:
    """An `on_part` that reports the index stage's progress in parts (one per shard) and rows."""
    done = rows = 0

    def on_part(written: int) -> None:
        nonlocal done, rows
        done += 1
        rows += written
        if progress:
            progress(
                StageProgress("index", finished_before + done, shards, rows, time.perf_counter() - started)
            )

    return on_part
