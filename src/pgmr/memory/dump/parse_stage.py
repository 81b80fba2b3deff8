"""The parse stage: dump chunks -> catalog shards, on the cluster's workers.

This process decompresses and cuts chunks (bzip2 on several threads); workers parse them and send back the
shard's bytes, which are written here. At most a few chunks per worker are in flight, so memory stays bounded
whatever the dump's size. A resumed stage seeks to the first chunk it lacks and skips the ones it has.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgmr.failpoints import failpoint
from pgmr.kg.dump.reader import Chunk, DumpError, iter_chunks
from pgmr.kg.dump.records import REASONS
from pgmr.kg.dump.shards import parse_chunk
from pgmr.memory.dump.cluster import worker_count
from pgmr.memory.dump.state import ChunkRecord, WorkDir
from pgmr.memory.errors import PgmrMemoryError


@dataclass(frozen=True)
class StageProgress:
    """What a stage reports as it goes: units done of total (bytes for parsing, shards for encoding)."""

    stage: str
    done: int
    total: int
    items: int
    seconds: float

    @property
    def items_per_second(self) -> float:
        return self.items / self.seconds if self.seconds > 0 else 0.0


ProgressCallback = Callable[[StageProgress], None]


@dataclass(frozen=True)
class ParseReport:
    chunks: int
    parsed_now: int  # chunks parsed in this call (the rest were done before)
    lines: int
    records: int
    counts: dict[str, int]
    samples: dict[str, list[str]]
    truncated: str
    seconds: float
    decompressed_bytes: int
    parsed_items_now: int = 0


def _chunk_record(chunk: Chunk, parsed: Any) -> ChunkRecord:
    return ChunkRecord(
        index=chunk.index,
        start=chunk.start,
        end=chunk.end,
        lines=parsed.lines,
        records=parsed.records,
        compressed_offset=chunk.compressed_offset,
        counts={k: v for k, v in parsed.counts.items() if v},
        samples=parsed.samples,
        truncated=chunk.truncated,
    )


def _resume_point(done: dict[int, ChunkRecord]) -> tuple[int, int]:
    index = 0
    while index in done:
        index += 1
    return index, (done[index - 1].end if index else 0)


def run_parse_stage(
    client: Any,
    work: WorkDir,
    dump: Path,
    languages: tuple[str, ...],
    lines_per_chunk: int,
    progress: ProgressCallback | None = None,
    decompress_threads: int | None = None,
) -> ParseReport:
    started = time.perf_counter()
    done = work.chunks()
    start_index, start_offset = _resume_point(done)
    total = dump.stat().st_size
    in_flight: dict[Any, Chunk] = {}
    limit = 2 * worker_count(client)
    parsed_now = parsed_items = 0

    def collect(futures: list[Any]) -> None:
        nonlocal parsed_now, parsed_items
        for future in futures:
            chunk = in_flight.pop(future)
            try:
                parsed = future.result()
            except Exception as exc:  # a worker's error, raised here with the chunk it came from
                raise PgmrMemoryError(f"parsing chunk {chunk.index} of {dump} failed: {exc}") from exc
            work.finish_chunk(_chunk_record(chunk, parsed), parsed.parquet)
            failpoint("dump.chunk")
            parsed_now += 1
            parsed_items += parsed.lines

    from distributed import wait

    last_offset = start_offset
    try:
        for chunk in iter_chunks(
            dump,
            lines_per_chunk,
            start_index=start_index,
            start_offset=start_offset,
            threads=decompress_threads,
        ):
            known = done.get(chunk.index)
            if known is not None:
                if (known.start, known.end) != (chunk.start, chunk.end):
                    raise PgmrMemoryError(
                        f"{dump} changed since chunk {chunk.index} was parsed; pass --restart to build again"
                    )
                continue
            if chunk.lines == 0:
                # Only a truncated file's end: recorded, so that the report still says it was cut short.
                empty = parse_chunk(b"", languages)
                work.finish_chunk(_chunk_record(chunk, empty), empty.parquet)
                continue
            while len(in_flight) >= limit:
                finished, _ = wait(list(in_flight), return_when="FIRST_COMPLETED")
                collect(list(finished))
            # Scattered straight to a worker: a chunk is tens of MB, too big to travel inside the task graph.
            data = client.scatter(chunk.data, direct=True, hash=False)
            future = client.submit(parse_chunk, data, languages, chunk.index * lines_per_chunk, pure=False)
            in_flight[future] = chunk
            last_offset = chunk.compressed_offset
            if progress:
                progress(
                    StageProgress("parse", last_offset, total, parsed_items, time.perf_counter() - started)
                )
        if in_flight:
            wait(list(in_flight))
            collect(list(in_flight))
    except DumpError as exc:
        raise PgmrMemoryError(str(exc)) from None
    if progress:
        progress(StageProgress("parse", total, total, parsed_items, time.perf_counter() - started))
    return catalog_report(work, parsed_now, parsed_items, time.perf_counter() - started)


def catalog_report(work: WorkDir, parsed_now: int, parsed_items: int, seconds: float) -> ParseReport:
    chunks = work.chunks()
    counts = dict.fromkeys(REASONS, 0)
    samples: dict[str, list[str]] = {}
    truncated = ""
    for index in sorted(chunks):
        chunk = chunks[index]
        for reason, count in chunk.counts.items():
            counts[reason] = counts.get(reason, 0) + count
        for reason, lines in chunk.samples.items():
            samples.setdefault(reason, []).extend(lines[: max(0, 3 - len(samples.get(reason, [])))])
        truncated = truncated or chunk.truncated
    return ParseReport(
        chunks=len(chunks),
        parsed_now=parsed_now,
        lines=sum(c.lines for c in chunks.values()),
        records=sum(c.records for c in chunks.values()),
        counts=counts,
        samples=samples,
        truncated=truncated,
        seconds=seconds,
        decompressed_bytes=max((c.end for c in chunks.values()), default=0),
        parsed_items_now=parsed_items,
    )
