"""The memory rows of a catalog shard: what each stage after parsing reads from the catalog."""

from __future__ import annotations

from typing import Any

from pgmr.kg.catalog import CatalogEntry
from pgmr.memory.rows import MemoryRow, memory_rows


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
