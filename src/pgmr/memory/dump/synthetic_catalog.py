"""A synthetic dump's catalog written directly: the parse stage's output without the dump.

A realistic 10M-item dump is ~100 GB decompressed; the parse stage is measured on 1M items (docs/scale.md), and
the larger builds start from the catalog. `write_synthetic_catalog` writes, for a `SyntheticDump`, the catalog
shards and ledger that parsing its dump with the same chunking would write (the same records:
`SyntheticDump.record` is `record_from_entity` of the entity the line renders, minus its statements), resumably:
shards already in the ledger are kept. `pgmr memory build --from-dump DIR` then starts at the encode stage.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from pgmr.jsonl import atomic_write_text
from pgmr.kg.dump.shards import records_table, table_bytes
from pgmr.kg.dump.synthetic import SyntheticDump
from pgmr.memory.dump.state import ChunkRecord, WorkDir
from pgmr.memory.errors import PgmrMemoryError

DESCRIPTION_FILE = "synthetic.json"


def _shard(args: tuple[SyntheticDump, int, int]) -> tuple[int, int, bytes]:
    dump, index, lines_per_chunk = args
    start = index * lines_per_chunk
    records = [dump.record(p) for p in range(start, min(start + lines_per_chunk, dump.total))]
    return index, len(records), table_bytes(records_table(records))


def write_synthetic_catalog(
    directory: Path,
    dump: SyntheticDump,
    lines_per_chunk: int = 5_000,
    workers: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Write (or finish writing) the catalog of `dump` into `directory`; returns the number of shards."""
    directory = Path(directory)
    description: dict[str, Any] = {
        "synthetic": {"n": dump.n, "seed": dump.seed, "homonym_rate": dump.homonym_rate, "real": dump.real},
        "lines_per_chunk": lines_per_chunk,
    }
    described = directory / DESCRIPTION_FILE
    if described.is_file():
        if json.loads(described.read_text(encoding="utf-8")) != description:
            raise PgmrMemoryError(
                f"{directory} holds the catalog of another synthetic dump; remove it or choose another path"
            )
    elif directory.exists() and any(directory.iterdir()):
        raise PgmrMemoryError(f"{directory} exists and is not a synthetic catalog; choose another path")
    directory.mkdir(parents=True, exist_ok=True)
    atomic_write_text(described, json.dumps(description, indent=2) + "\n")
    work = WorkDir(directory.parent, catalog=directory)
    count = -(-dump.total // lines_per_chunk)
    done = set(work.chunks())
    todo = [(dump, index, lines_per_chunk) for index in range(count) if index not in done]
    finished = len(done)

    def record(index: int, records: int, data: bytes) -> None:
        nonlocal finished
        start = index * lines_per_chunk
        end = min(start + lines_per_chunk, dump.total)
        work.finish_chunk(ChunkRecord(index, start, end, end - start, records), data)
        finished += 1
        if progress:
            progress(finished, count)

    if workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            for result in pool.map(_shard, todo, chunksize=1):
                record(*result)
    else:
        for args in todo:
            record(*_shard(args))
    return count
