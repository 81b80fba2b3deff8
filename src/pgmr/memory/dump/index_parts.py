"""The index stage's units of work: one part per catalog shard, so that a killed index stage resumes where it
stopped instead of from zero (at 10M items the stage takes tens of minutes).

    <work>/index/entity.trained            the entity index, trained and empty (indexes that train)
    <work>/index/parts/shard-NNNNN.entity.arrow, .relation.arrow   the shard's rows of each kind
    <work>/index/parts/shard-NNNNN.prior.arrow   its entities' sitelink counts
    <work>/index/parts/shard-NNNNN.codes.npy     its entity rows' index codes (indexes that `EncodesApart`)
    <work>/index/parts/shard-NNNNN.done          written last: the part is complete

Assembling the parts into the memory (appending rows and codes, adding vectors to indexes that cannot encode
apart) is cheap next to encoding rows into codes, which is where the stage spends its time.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pgmr.jsonl import atomic_write_bytes
from pgmr.kg.dump.shards import read_shard
from pgmr.kg.ids import Kind, id_number
from pgmr.memory.dump.catalog_rows import shard_rows
from pgmr.memory.dump.encode_stage import read_vectors
from pgmr.memory.manifest import KINDS
from pgmr.memory.row_table import rows_batch

PARTS = "parts"
_PRIOR_SCHEMA = pa.schema([("id", pa.string()), ("sitelinks", pa.int64())])


@runtime_checkable
class EncodesApart(Protocol):
    """An index whose costly part of adding (rows to codes) can run shard by shard and be kept on disk."""

    def trained_state(self) -> bytes: ...

    def restore_trained(self, state: bytes) -> None: ...

    def encode_rows(self, vectors: np.ndarray) -> np.ndarray: ...

    def add_encoded(self, codes: np.ndarray, vectors: np.ndarray) -> None: ...


def first_occurrences(shards: Sequence[Path]) -> list[np.ndarray]:
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


@dataclass(frozen=True)
class PartPlan:
    """A shard's part before its codes: what `Parts.finish` writes, and the entity vectors to encode."""

    shard: Path
    tables: Mapping[Kind, pa.Table]  # memory rows by kind
    # Their places among the shard's memory rows, i.e. rows of the shard's vector file.
    positions: Mapping[Kind, np.ndarray]
    entity_vectors: np.ndarray  # float32, one per entity row
    prior: pa.Table

    @property
    def rows(self) -> int:
        return sum(t.num_rows for t in self.tables.values())


class Parts:
    def __init__(self, index_dir: Path) -> None:
        self.dir = index_dir / PARTS

    def path(self, shard: Path, what: str) -> Path:
        return self.dir / f"{shard.stem}.{what}"

    def done(self, shard: Path) -> bool:
        return self.path(shard, "done").is_file()

    def plan(self, shard: Path, kept: np.ndarray, vector_file: Path, dimension: int) -> PartPlan:
        """What a shard's part holds, before its entity rows' codes: rows by kind and sitelink counts."""
        table = read_shard(shard)
        memory_rows = shard_rows(table)
        vectors = read_vectors(vector_file, len(memory_rows), dimension)
        columns = table.select(["id", "kind", "sitelinks"]).to_pydict()
        kind_of: dict[str, str] = {}
        prior: dict[str, list[object]] = {"id": [], "sitelinks": []}
        for wid, kind, count, keep in zip(
            columns["id"], columns["kind"], columns["sitelinks"], kept, strict=True
        ):
            if keep:
                kind_of[wid] = kind
                if count and kind == "entity":
                    prior["id"].append(wid)
                    prior["sitelinks"].append(int(count))
        chosen = {
            kind: np.asarray(
                [i for i, row in enumerate(memory_rows) if kind_of.get(row.id) == kind], np.int64
            )
            for kind in KINDS
        }
        tables = {
            kind: pa.Table.from_batches([rows_batch([memory_rows[i] for i in chosen[kind]])])
            for kind in KINDS
        }
        entity_vectors = np.ascontiguousarray(vectors[chosen["entity"]], dtype=np.float32)
        return PartPlan(shard, tables, chosen, entity_vectors, pa.table(prior, schema=_PRIOR_SCHEMA))

    def finish(self, plan: PartPlan, codes: np.ndarray | None) -> int:
        """Write a planned part with its entity rows' codes (None: the index does not encode apart). Files
        before the `done` marker need no atomic writes: a part without the marker is written again."""
        for kind in KINDS:
            _write_table(self.path(plan.shard, f"{kind}.arrow"), plan.tables[kind])
            np.save(self.path(plan.shard, f"{kind}.rows.npy"), plan.positions[kind])
        if codes is not None:
            if len(codes) != len(plan.entity_vectors):
                raise ValueError(f"{len(codes)} codes for {len(plan.entity_vectors)} entity rows")
            atomic_write_bytes(self.path(plan.shard, "codes.npy"), _npy(codes))
        _write_table(self.path(plan.shard, "prior.arrow"), plan.prior)
        atomic_write_bytes(self.path(plan.shard, "done"), b"")
        return plan.rows

    def write(
        self, shard: Path, kept: np.ndarray, vector_file: Path, dimension: int, encoder: EncodesApart | None
    ) -> int:
        """A shard's part, its codes encoded in this process. Returns its rows."""
        plan = self.plan(shard, kept, vector_file, dimension)
        return self.finish(plan, encoder.encode_rows(plan.entity_vectors) if encoder is not None else None)

    def rows(self, shard: Path, kind: Kind) -> tuple[pa.Table, np.ndarray]:
        """The shard's rows of a kind, and their positions among the shard's memory rows (for its vectors)."""
        table = pa.ipc.open_file(pa.memory_map(str(self.path(shard, f"{kind}.arrow")))).read_all()
        return table, np.load(self.path(shard, f"{kind}.rows.npy"))

    def codes(self, shard: Path) -> np.ndarray:
        return np.load(self.path(shard, "codes.npy"))

    def prior(self, shard: Path) -> Mapping[str, int]:
        table = pa.ipc.open_file(pa.memory_map(str(self.path(shard, "prior.arrow")))).read_all()
        return dict(zip(table.column("id").to_pylist(), table.column("sitelinks").to_pylist(), strict=True))


def _npy(array: np.ndarray) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, array, allow_pickle=False)
    return buffer.getvalue()


def _write_table(path: Path, table: pa.Table) -> None:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())
