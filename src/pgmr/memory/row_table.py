"""A kind's memory rows as a table: held in RAM (`ListRows`, from `*.rows.jsonl`), or memory-mapped from an
Arrow IPC file (`ArrowRows`, `*.rows.arrow`) for memories of millions of items.

A memory of 10M Wikidata items has ~20M rows; as Python objects they would take ~10 GB and minutes to load.
The Arrow file is mapped, not read: a row becomes a `MemoryRow` only when asked for, and an ID's rows are found
by binary search over a sorted copy of the rows' ID numbers (`key_order`), so resident memory stays at the
pages a query touches.
"""

from __future__ import annotations

import os
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from pgmr.kg.ids import id_number
from pgmr.memory.errors import MemoryCorruptError
from pgmr.memory.rows import REBUILD_HINT, MemoryRow, write_rows

ARROW_SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("key", pa.int64()),
        ("label", pa.string()),
        ("description", pa.string()),
        ("text", pa.string()),
        ("is_alias", pa.bool_()),
        ("surface", pa.string()),
    ]
)
_ROW_FIELDS = ("id", "label", "description", "text", "is_alias", "surface")
# Rows per record batch when writing: large enough to compress the per-batch overhead, small enough to stream.
BATCH_ROWS = 65_536
# Arrow row files up to this many rows are read into RAM as row objects when opened (about 0.5 KB a row).
RESIDENT_ROWS = 1 << 17


@runtime_checkable
class RowTable(Protocol):
    """What a dictionary needs of its rows: row i, an ID's row positions, and each row's owner key."""

    def __len__(self) -> int: ...

    def __getitem__(self, position: int) -> MemoryRow: ...

    def __iter__(self) -> Iterator[MemoryRow]: ...

    def positions(self, wikidata_id: str) -> tuple[int, ...]: ...

    def id_count(self) -> int: ...

    def ids(self) -> frozenset[str]: ...

    @property
    def owners(self) -> np.ndarray:
        """Per row, an integer that is equal for rows of one ID and different otherwise."""
        ...


class ListRows:
    """Rows held in RAM, as `pgmr memory build` writes them (`*.rows.jsonl`)."""

    def __init__(self, rows: Iterable[MemoryRow]) -> None:
        self._rows: tuple[MemoryRow, ...] = tuple(rows)
        by_id: dict[str, list[int]] = {}
        for position, row in enumerate(self._rows):
            by_id.setdefault(row.id, []).append(position)
        self._by_id = {wid: tuple(positions) for wid, positions in by_id.items()}
        owner_of = {wid: n for n, wid in enumerate(by_id)}
        self._owners = np.fromiter(
            (owner_of[r.id] for r in self._rows), dtype=np.int64, count=len(self._rows)
        )
        self._ids = frozenset(self._by_id)

    def __len__(self) -> int:
        return len(self._rows)

    def __getitem__(self, position: int) -> MemoryRow:
        return self._rows[position]

    def __iter__(self) -> Iterator[MemoryRow]:
        return iter(self._rows)

    def positions(self, wikidata_id: str) -> tuple[int, ...]:
        return self._by_id.get(wikidata_id, ())

    def id_count(self) -> int:
        return len(self._ids)

    def ids(self) -> frozenset[str]:
        return self._ids

    @property
    def owners(self) -> np.ndarray:
        return self._owners


def _row_key(wikidata_id: str) -> int:
    return id_number(wikidata_id)


class ArrowRows:
    """Rows memory-mapped from an Arrow IPC file with the columns of `ARROW_SCHEMA`. Rows of one ID share a key
    (the ID's number: one kind holds IDs of one letter), so `positions` is a binary search."""

    def __init__(self, path: Path, memory: Path | None = None, resident_rows: int = RESIDENT_ROWS) -> None:
        """`resident_rows`: a file of at most this many rows is read into RAM as row objects."""
        self.path = Path(path)
        where = memory or self.path.parent
        try:
            source = pa.memory_map(str(self.path), "r")
            table = pa.ipc.open_file(source).read_all()
        except (OSError, pa.ArrowInvalid) as exc:
            raise MemoryCorruptError(
                f"memory {where}: {self.path.name} is not a readable Arrow rows file ({exc}); {REBUILD_HINT}"
            ) from None
        if not table.schema.equals(ARROW_SCHEMA):
            raise MemoryCorruptError(
                f"memory {where}: {self.path.name} has columns {table.schema.names}, expected "
                f"{ARROW_SCHEMA.names}; {REBUILD_HINT}"
            )
        self._table = table
        # Indexing a chunked column finds the chunk and builds a scalar on every call (about 40 us a row
        # over a 10M-item memory's 2,020 batches); the batches' own arrays, found by a binary search over
        # their starts, take a third of that, and the resolver reads hundreds of rows per question.
        batches = table.select(list(_ROW_FIELDS)).to_batches()
        self._batch_starts = np.cumsum([0] + [b.num_rows for b in batches[:-1]], dtype=np.int64)
        self._batch_columns = [b.columns for b in batches]
        # One contiguous int64 array: zero-copy when the file has one batch, else one copy of 8 bytes a row.
        self._keys = table.column("key").to_numpy()
        self._order = np.argsort(self._keys, kind="stable")
        self._sorted = self._keys[self._order]
        self._id_count = int(np.count_nonzero(np.diff(self._sorted))) + 1 if len(self._sorted) else 0
        # The one letter of every ID when the file holds one (as a kind's file does): then a key names one ID,
        # and `positions` need not read each row's ID back (6 us a row: a relation has up to 40 rows).
        # Strings between two that start with one letter start with it too.
        bounds = pc.min_max(table.column("id")).as_py() if len(table) else {"min": None, "max": None}
        low, high = bounds["min"] or "", bounds["max"] or ""
        self._letter: str | None = low[:1] if low[:1] and low[:1] == high[:1] else None
        # A small table (a dump's 77k relation rows) is held as row objects: the resolver reads each relation
        # candidate's rows several times a question, at ~15 us a row from the mapped file.
        self._resident: list[MemoryRow] | None = None
        if len(table) <= resident_rows:
            self._resident = [MemoryRow(**r) for r in table.select(list(_ROW_FIELDS)).to_pylist()]

    def __len__(self) -> int:
        return self._table.num_rows

    def __getitem__(self, position: int) -> MemoryRow:
        position = int(position)
        if not 0 <= position < len(self):
            raise IndexError(f"row {position} out of range for {len(self)} rows")
        if self._resident is not None:
            return self._resident[position]
        batch = int(np.searchsorted(self._batch_starts, position, side="right")) - 1
        local = position - int(self._batch_starts[batch])
        columns = self._batch_columns[batch]
        return MemoryRow(**{name: columns[n][local].as_py() for n, name in enumerate(_ROW_FIELDS)})

    def __iter__(self) -> Iterator[MemoryRow]:
        for batch in self._table.select(list(_ROW_FIELDS)).to_batches(BATCH_ROWS):
            for record in batch.to_pylist():
                yield MemoryRow(**record)

    def positions(self, wikidata_id: str) -> tuple[int, ...]:
        try:
            key = _row_key(wikidata_id)
        except ValueError:
            return ()
        start, stop = np.searchsorted(self._sorted, [key, key + 1])
        found: list[int] = self._order[start:stop].tolist()
        if self._letter is not None:
            return tuple(found) if wikidata_id[:1] == self._letter else ()
        # Keys are ID numbers: "Q5" and "P5" share one, so a file of several letters checks each row's ID.
        return tuple(p for p in found if self._id_at(p) == wikidata_id)

    def _id_at(self, position: int) -> str:
        batch = int(np.searchsorted(self._batch_starts, position, side="right")) - 1
        return str(self._batch_columns[batch][0][position - int(self._batch_starts[batch])].as_py())

    def id_count(self) -> int:
        return self._id_count

    def ids(self) -> frozenset[str]:
        """Every ID (builds a set of all of them: for experiments on small memories, not for serving)."""
        return frozenset(self._table.column("id").unique().to_pylist())

    @property
    def owners(self) -> np.ndarray:
        return self._keys


def as_row_table(rows: Sequence[MemoryRow] | RowTable) -> RowTable:
    if isinstance(rows, (ListRows, ArrowRows)):
        return rows
    return ListRows(rows)


def rows_batch(rows: Sequence[MemoryRow]) -> pa.RecordBatch:
    """Rows as one record batch of `ARROW_SCHEMA`."""
    return pa.record_batch(
        {
            "id": [r.id for r in rows],
            "key": [_row_key(r.id) for r in rows],
            "label": [r.label for r in rows],
            "description": [r.description for r in rows],
            "text": [r.text for r in rows],
            "is_alias": [r.is_alias for r in rows],
            "surface": [r.surface for r in rows],
        },
        schema=ARROW_SCHEMA,
    )


class ArrowRowsWriter:
    """Streams record batches into an Arrow rows file, written to a temporary sibling and renamed on `close`,
    so the target is never half-written."""

    def __init__(self, path: Path) -> None:
        self.path = Path(path)
        self._tmp = self.path.with_name(f".{self.path.name}.tmp-{uuid.uuid4().hex[:12]}")
        self._sink = pa.OSFile(str(self._tmp), "wb")
        self._writer = pa.ipc.new_file(self._sink, ARROW_SCHEMA)
        self.rows = 0

    def write(self, rows: Sequence[MemoryRow]) -> None:
        for start in range(0, len(rows), BATCH_ROWS):
            batch = rows_batch(rows[start : start + BATCH_ROWS])
            self._writer.write_batch(batch)
            self.rows += batch.num_rows

    def write_table(self, table: pa.Table) -> None:
        """Rows already in `ARROW_SCHEMA` (a dump build's parts)."""
        self._writer.write_table(table, max_chunksize=BATCH_ROWS)
        self.rows += table.num_rows

    def close(self) -> None:
        self._writer.close()
        self._sink.close()
        with open(self._tmp, "rb+") as handle:
            os.fsync(handle.fileno())
        os.replace(self._tmp, self.path)

    def abort(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
        finally:
            self._tmp.unlink(missing_ok=True)


def write_arrow_rows(path: Path, rows: Iterable[MemoryRow]) -> None:
    writer = ArrowRowsWriter(path)
    try:
        batch: list[MemoryRow] = []
        for row in rows:
            batch.append(row)
            if len(batch) >= BATCH_ROWS:
                writer.write(batch)
                batch = []
        if batch:
            writer.write(batch)
        writer.close()
    except BaseException:
        writer.abort()
        raise


def save_rows(path: Path, rows: RowTable) -> None:
    """A dictionary's rows in the format the file name says: JSONL, or Arrow (copied when already a file)."""
    if path.suffix != ".arrow":
        write_rows(path, list(rows))
    elif isinstance(rows, ArrowRows):
        # A hard link where the file system allows (a dump build's rows are GBs), else a copy.
        try:
            os.link(rows.path, path)
        except OSError:
            shutil.copyfile(rows.path, path)
        with path.open("rb+") as handle:
            os.fsync(handle.fileno())
    else:
        write_arrow_rows(path, rows)
