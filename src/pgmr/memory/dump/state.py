"""A dump build's work directory: what it builds from, and which units of each stage are finished.

    <work>/build.json              the build's identity: dump (path, size, mtime), languages, chunking, encoder
    <work>/catalog/shard-NNNNN.parquet   one per dump chunk (parse stage)
    <work>/catalog/ledger.jsonl    one line per finished chunk: offsets, record and problem counts
    <work>/vectors/shard-NNNNN.npy       the embeddings of one catalog shard's memory rows (encode stage)

A unit's file is written atomically and then recorded, so a kill at any point loses at most the units in
flight; a ledger line cut short by a kill is ignored (its unit is simply done again). A work directory made
for another dump or other settings is refused unless the build is restarted.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pgmr.jsonl import atomic_write_bytes, atomic_write_text
from pgmr.memory.errors import PgmrMemoryError

BUILD_FILE = "build.json"
LEDGER = "ledger.jsonl"


def shard_name(index: int, suffix: str) -> str:
    return f"shard-{index:05d}{suffix}"


@dataclass(frozen=True)
class BuildIdentity:
    dump: str
    dump_size: int
    dump_mtime_ns: int
    languages: tuple[str, ...]
    lines_per_chunk: int
    encoder: str
    # How vectors are made: "encoded", or "drawn ..." for synthetic items (pgmr.memory.dump.drawn).
    vectors: str = "encoded"

    @classmethod
    def of(
        cls,
        dump: Path,
        languages: tuple[str, ...],
        lines_per_chunk: int,
        encoder: str,
        vectors: str = "encoded",
    ) -> BuildIdentity:
        # A catalog directory is identified by its ledger, which changes whenever a shard is added.
        stat = (dump / LEDGER).stat() if dump.is_dir() else dump.stat()
        return cls(
            str(dump.resolve()), stat.st_size, stat.st_mtime_ns, languages, lines_per_chunk, encoder, vectors
        )

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "languages": list(self.languages)}


@dataclass(frozen=True)
class ChunkRecord:
    """A finished parse unit, as its ledger line holds it."""

    index: int
    start: int
    end: int
    lines: int
    records: int
    compressed_offset: int = 0
    counts: Mapping[str, int] = field(default_factory=dict)
    samples: Mapping[str, list[str]] = field(default_factory=dict)
    truncated: str = ""


class WorkDir:
    """`catalog` given: the build starts from that catalog directory (one written earlier, or a synthetic one
    from `pgmr memory synthetic-dump --catalog`), read only, and the parse stage is skipped."""

    def __init__(self, path: Path, catalog: Path | None = None) -> None:
        self.path = path
        self.external_catalog = catalog is not None
        self.catalog = catalog if catalog is not None else path / "catalog"
        self.vectors = path / "vectors"

    def open(self, identity: BuildIdentity, *, restart: bool) -> None:
        """Create the directory, or check that an existing one belongs to this build."""
        build_file = self.path / BUILD_FILE
        if restart and self.path.exists():
            shutil.rmtree(self.path)
        if build_file.is_file():
            try:
                existing = json.loads(build_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                existing = None
            if existing != identity.to_json():
                raise PgmrMemoryError(
                    f"{self.path} holds a build of another dump or with other settings "
                    f"({_difference(existing, identity.to_json())}); pass --restart to discard it"
                )
        elif self.path.exists() and any(self.path.iterdir()):
            raise PgmrMemoryError(
                f"{self.path} exists and is not a pgmr dump build; remove it or choose another --out"
            )
        if not self.external_catalog:
            self.catalog.mkdir(parents=True, exist_ok=True)
        self.vectors.mkdir(parents=True, exist_ok=True)
        atomic_write_text(build_file, json.dumps(identity.to_json(), indent=2) + "\n")

    # -- the parse stage's ledger -------------------------------------------------------------------------

    def chunks(self) -> dict[int, ChunkRecord]:
        ledger = self.catalog / LEDGER
        done: dict[int, ChunkRecord] = {}
        if not ledger.is_file():
            return done
        for line in ledger.read_bytes().splitlines():
            try:
                record = ChunkRecord(**json.loads(line))
            except (ValueError, TypeError):
                continue  # a line cut short by a kill: that chunk is parsed again
            if (self.catalog / shard_name(record.index, ".parquet")).is_file():
                done[record.index] = record
        return done

    def finish_chunk(self, record: ChunkRecord, parquet: bytes) -> None:
        atomic_write_bytes(self.catalog / shard_name(record.index, ".parquet"), parquet)
        line = json.dumps(asdict(record), sort_keys=True) + "\n"
        with (self.catalog / LEDGER).open("a", encoding="utf-8") as handle:
            handle.write(line)
            handle.flush()
            os.fsync(handle.fileno())

    def catalog_shards(self) -> list[Path]:
        return [self.catalog / shard_name(i, ".parquet") for i in sorted(self.chunks())]

    # -- the encode stage ---------------------------------------------------------------------------------

    def vector_file(self, shard: Path) -> Path:
        return self.vectors / shard.with_suffix(".npy").name


def _difference(existing: object, wanted: dict[str, Any]) -> str:
    if not isinstance(existing, dict):
        return "its build.json is unreadable"
    keys = [k for k in wanted if existing.get(k) != wanted[k]]
    return ", ".join(f"{k}: {existing.get(k)!r} there, {wanted[k]!r} now" for k in keys) or "unknown"
