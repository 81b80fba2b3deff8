"""The label catalog: Wikidata ID -> label, description, aliases.

Loaded from pgmr's memory files (`memory/entities.jsonl`, `memory/properties.jsonl`: one JSON object per line
with id, label, description, aliases) or streamed from a Wikidata JSON dump in bounded memory.
"""

from __future__ import annotations

import bz2
import gzip
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from pgmr.jsonl import JsonlError, read_jsonl
from pgmr.kg.ids import Kind, id_kind, is_wikidata_id

# `progress(done, total)`: how far a long read has got, in the unit the caller is told (bytes of a dump).
Progress = Callable[[int, int], None]


@dataclass(frozen=True)
class CatalogEntry:
    id: str
    label: str | None
    description: str | None = None
    aliases: tuple[str, ...] = field(default_factory=tuple)
    # An entry of another graph (`id` an IRI: pgmr.kg.graph): "class", "property" or "instance". A Wikidata ID
    # says its kind itself (P... is a property), an IRI does not.
    graph_kind: str | None = None

    @property
    def kind(self) -> Kind:
        if self.graph_kind is not None:
            return "relation" if self.graph_kind == "property" else "entity"
        return id_kind(self.id)


class CatalogError(ValueError):
    """A catalog file that cannot be read as one."""


def _clean(text: object) -> str | None:
    if not isinstance(text, str):
        return None
    text = " ".join(text.split())
    return text or None


def entry_from_record(record: dict) -> CatalogEntry | None:
    """A memory-file record -> entry; None for records without a usable ID."""
    wid = record.get("id")
    if not isinstance(wid, str) or not is_wikidata_id(wid):
        return None
    aliases = tuple(a for a in (_clean(x) for x in record.get("aliases") or ()) if a)
    return CatalogEntry(wid, _clean(record.get("label")), _clean(record.get("description")), aliases)


def entry_from_dump_entity(entity: dict, language: str = "en") -> CatalogEntry | None:
    """One entity of a Wikidata JSON dump (the `wbgetentities` shape) -> entry in one language."""
    wid = entity.get("id")
    if not isinstance(wid, str) or not is_wikidata_id(wid):
        return None
    label = (entity.get("labels") or {}).get(language, {}).get("value")
    description = (entity.get("descriptions") or {}).get(language, {}).get("value")
    aliases = tuple(
        a for a in (_clean(x.get("value")) for x in (entity.get("aliases") or {}).get(language, [])) if a
    )
    return CatalogEntry(wid, _clean(label), _clean(description), aliases)


class LabelCatalog:
    """ID -> entry lookups. Later additions replace earlier entries with the same ID."""

    def __init__(self, entries: Iterable[CatalogEntry] = ()) -> None:
        self._entries: dict[str, CatalogEntry] = {}
        self.add(entries)

    def add(self, entries: Iterable[CatalogEntry]) -> None:
        for entry in entries:
            self._entries[entry.id] = entry

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, wikidata_id: object) -> bool:
        return wikidata_id in self._entries

    def __iter__(self) -> Iterator[CatalogEntry]:
        return iter(self._entries.values())

    def get(self, wikidata_id: str) -> CatalogEntry | None:
        return self._entries.get(wikidata_id)

    def label(self, wikidata_id: str) -> str | None:
        entry = self._entries.get(wikidata_id)
        return entry.label if entry else None

    def ids(self) -> set[str]:
        return set(self._entries)

    def of_kind(self, kind: Kind) -> list[CatalogEntry]:
        return [e for e in self._entries.values() if e.kind == kind]

    @classmethod
    def from_jsonl(cls, *paths: Path | str) -> LabelCatalog:
        catalog = cls()
        for path in paths:
            catalog.add(iter_memory_file(Path(path)))
        return catalog

    @classmethod
    def from_data_dir(cls, data_dir: Path | str) -> LabelCatalog:
        """All `memory/*.jsonl` files of a pgmr data directory."""
        memory_dir = Path(data_dir) / "memory"
        files = sorted(memory_dir.glob("*.jsonl"))
        if not files:
            raise CatalogError(f"no memory/*.jsonl files under {data_dir}")
        return cls.from_jsonl(*files)

    @classmethod
    def from_dump(
        cls,
        path: Path | str,
        language: str = "en",
        ids: set[str] | None = None,
        progress: Progress | None = None,
    ) -> LabelCatalog:
        return cls(iter_dump(Path(path), language=language, ids=ids, progress=progress))


def iter_memory_file(path: Path) -> Iterator[CatalogEntry]:
    try:
        for record in read_jsonl(path):
            entry = entry_from_record(record)
            if entry is not None:
                yield entry
    except JsonlError as exc:
        raise CatalogError(str(exc)) from None


def iter_dump(
    path: Path, language: str = "en", ids: set[str] | None = None, progress: Progress | None = None
) -> Iterator[CatalogEntry]:
    """Stream a Wikidata JSON dump: a JSON array with one entity per line (`[`, `{...},`, ..., `]`).

    Memory stays bounded by one line. `progress(done, total)` is told the compressed bytes read every
    1000 lines and once at the end. `ids` keeps only those IDs.
    """
    raw = path.open("rb")
    total = path.stat().st_size
    with raw:
        # Read through the raw handle so that progress counts compressed bytes, which is what `total` counts.
        stream = _decompressing(raw, path)
        for line_no, line in enumerate(stream, 1):
            if progress and line_no % 1000 == 0:
                progress(raw.tell(), total)
            line = line.strip().rstrip(b",")
            if not line or line in (b"[", b"]"):
                continue
            try:
                entity = json.loads(line)
            except json.JSONDecodeError as exc:
                raise CatalogError(f"{path}: line {line_no} is not a JSON entity ({exc.msg})") from None
            if not isinstance(entity, dict):
                raise CatalogError(f"{path}: line {line_no} is not a JSON object")
            if ids is not None and entity.get("id") not in ids:
                continue
            entry = entry_from_dump_entity(entity, language)
            if entry is not None:
                yield entry
        if progress:
            progress(total, total)


def _decompressing(raw: IO[bytes], path: Path) -> IO[bytes]:
    name = path.name.lower()
    if name.endswith(".gz"):
        return gzip.GzipFile(fileobj=raw)  # type: ignore[return-value]
    if name.endswith(".bz2"):
        return bz2.BZ2File(raw)
    return raw
