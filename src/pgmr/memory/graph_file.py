"""`graph.json` of a memory built from a user's graph (pgmr.kg.graph): its prefixes, sources, settings and
classes, written beside the rows and checked against the manifest's sha256 like every other file.

A Wikidata memory has none, and its manifest no `graph` entry: nothing about it changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pgmr.fsutil import write_file
from pgmr.kg.catalog import CatalogEntry
from pgmr.kg.graph import GraphCatalog, GraphInfo
from pgmr.memory.cache import file_sha256
from pgmr.memory.errors import MemoryCorruptError
from pgmr.memory.manifest import MemoryManifest
from pgmr.memory.rows import REBUILD_HINT, MemoryRow

GRAPH_FILE = "graph.json"


def save_graph(directory: Path, graph: GraphInfo | None) -> dict[str, Any]:
    """Write `graph.json` into a memory directory being built; the manifest's `graph` entry ({} for none)."""
    if graph is None:
        return {}
    path = directory / GRAPH_FILE
    write_file(path, json.dumps(graph.to_json(), indent=1, ensure_ascii=False).encode("utf-8") + b"\n")
    return {"file": GRAPH_FILE, "sha256": file_sha256(path), "sources": list(graph.sources)}


def load_graph(path: Path, manifest: MemoryManifest, verify: bool) -> GraphInfo | None:
    """The graph a memory was built from, or None for a Wikidata memory."""
    if not manifest.graph:
        return None
    graph_path = path / str(manifest.graph.get("file", GRAPH_FILE))
    if not graph_path.is_file():
        raise MemoryCorruptError(f"memory {path} is incomplete: {graph_path.name} is missing; {REBUILD_HINT}")
    if verify and file_sha256(graph_path) != manifest.graph.get("sha256"):
        raise MemoryCorruptError(
            f"memory {path} is corrupt: {graph_path.name} does not match its checksum; {REBUILD_HINT}"
        )
    try:
        return GraphInfo.from_json(json.loads(graph_path.read_text(encoding="utf-8")))
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise MemoryCorruptError(
            f"memory {path}: {graph_path.name} is unreadable ({exc}); {REBUILD_HINT}"
        ) from None


def graph_catalog(
    entity_rows: Iterable[MemoryRow], relation_rows: Iterable[MemoryRow], graph: GraphInfo
) -> GraphCatalog:
    """The catalog a graph memory was built from, back from its rows (label, description, aliases) and its
    graph.json (kinds, prefixes): what conversion names placeholders with, so that training data and
    resolution read the same labels."""
    entries: list[CatalogEntry] = []
    for rows, kind in ((entity_rows, None), (relation_rows, "property")):
        by_id: dict[str, tuple[MemoryRow, list[str]]] = {}
        for row in rows:
            first, aliases = by_id.setdefault(row.id, (row, []))
            if row.is_alias and row.surface and row.surface not in aliases:
                aliases.append(row.surface)
        entries.extend(
            CatalogEntry(i, row.label, row.description, tuple(aliases), kind)
            for i, (row, aliases) in by_id.items()
        )
    return GraphCatalog.from_info(entries, graph)


__all__ = ["GRAPH_FILE", "graph_catalog", "load_graph", "save_graph"]
