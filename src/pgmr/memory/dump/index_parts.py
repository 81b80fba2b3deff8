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


class Parts:
    def __init__(self, index_dir: Path) -> None:
        self.dir = index_dir / PARTS

    def path(self, shard: Path, what: str) -> Path:
        return self.dir / f"{shard.stem}.{what}"

    def done(self, shard: Path) -> bool:
        return self.path(shard, "done").is_file()

    def write(
        self, shard: Path, kept: np.ndarray, vector_file: Path, dimension: int, encoder: EncodesApart | None
    ) -> int:
        """A shard's part: its rows by kind, its sitelink counts, and the entity rows' codes. Returns its rows.
        Files before the `done` marker need no atomic writes: a part without the marker is written again."""
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
        for kind in KINDS:
            chosen = [i for i, row in enumerate(memory_rows) if kind_of.get(row.id) == kind]
            batch = rows_batch([memory_rows[i] for i in chosen])
            _write_table(self.path(shard, f"{kind}.arrow"), pa.Table.from_batches([batch]))
            np.save(self.path(shard, f"{kind}.rows.npy"), np.asarray(chosen, dtype=np.int64))
            if kind == "entity" and encoder is not None:
                codes = encoder.encode_rows(np.asarray(vectors[chosen], dtype=np.float32))
                atomic_write_bytes(self.path(shard, "codes.npy"), _npy(codes))
        _write_table(self.path(shard, "prior.arrow"), pa.table(prior, schema=_PRIOR_SCHEMA))
        atomic_write_bytes(self.path(shard, "done"), b"")
        return len(memory_rows)

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
