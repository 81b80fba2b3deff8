"""Memory rows: the texts that are embedded (a label or alias, alone and with its description) and the
`*.rows.jsonl` files that hold them, line i being row id i of the kind's index."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgmr.fsutil import write_file
from pgmr.kg.catalog import CatalogEntry
from pgmr.kg.ids import id_order
from pgmr.memory.errors import MemoryCorruptError

# Rows and queries must be embedded from the same template; the manifest records it so that a memory built with
# another template is refused instead of silently scoring worse.
TEXT_TEMPLATE = "{label}, {description}"

REBUILD_HINT = "rebuild it with `pgmr memory build`"


def memory_text(label: str, description: str | None) -> str:
    """The text that is embedded for a label (or alias) and its description; queries use it too."""
    return TEXT_TEMPLATE.format(label=label, description=description) if description else label


@dataclass(frozen=True)
class MemoryRow:
    id: str
    label: str
    description: str | None
    text: str
    is_alias: bool
    # The label or alias this row embeds; `text` is it alone, or it with the description.
    surface: str = ""


def memory_rows(entries: Iterable[CatalogEntry]) -> list[MemoryRow]:
    """For each entry's label and each alias: a row with the entry's description and, when there is one, a row
    of the label/alias alone (so that a placeholder without a description, or with a misspelt label, meets a
    text of its own shape instead of one diluted by a description). Entries without a label get no rows.
    Sorted by ID so that a build does not depend on catalog order."""
    rows: list[MemoryRow] = []
    for entry in sorted(entries, key=lambda e: id_order(e.id)):
        if not entry.label:
            continue
        seen: set[str] = set()
        surfaces = [(entry.label, False), *((alias, True) for alias in entry.aliases)]
        for surface, is_alias in surfaces:
            for text in dict.fromkeys((memory_text(surface, entry.description), surface)):
                if text not in seen:
                    seen.add(text)
                    rows.append(MemoryRow(entry.id, entry.label, entry.description, text, is_alias, surface))
    return rows


def _row_record(row: MemoryRow) -> str:
    record = {
        "id": row.id,
        "label": row.label,
        "description": row.description,
        "text": row.text,
        "is_alias": row.is_alias,
        "surface": row.surface,
    }
    return json.dumps(record, ensure_ascii=False)


def write_rows(path: Path, rows: Sequence[MemoryRow]) -> None:
    write_file(path, "".join(_row_record(row) + "\n" for row in rows).encode("utf-8"))


def read_rows(path: Path, memory: Path) -> list[MemoryRow]:
    rows: list[MemoryRow] = []
    try:
        with path.open(encoding="utf-8") as handle:
            for line_no, line in enumerate(handle, 1):
                try:
                    record = json.loads(line)
                    row = MemoryRow(**record)
                except (json.JSONDecodeError, TypeError) as exc:
                    raise MemoryCorruptError(
                        f"memory {memory}: {path.name} line {line_no} is not a row ({exc}); {REBUILD_HINT}"
                    ) from None
                rows.append(row)
    except UnicodeDecodeError:
        raise MemoryCorruptError(f"memory {memory}: {path.name} is not UTF-8; {REBUILD_HINT}") from None
    return rows
