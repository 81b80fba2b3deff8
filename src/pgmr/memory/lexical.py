"""The lexical tier on disk: exact and fuzzy lookup of labels and aliases, for memories too big for RAM.

The resolver joins label matches to the dense hits (exact ones always, the closest fuzzy ones when none is
exact). For the 96k-entry memory it keeps every surface in a Python dict and scans them with rapidfuzz; at the
size of Wikidata (110M items, ~250M labels and aliases) neither fits. This tier is a Tantivy index per kind:
each (normalized surface, ID) pair is a document whose surface is one untokenized term, so an exact lookup is a
term query and a fuzzy one a Levenshtein automaton over the term dictionary (distance 1, or 2 for surfaces of
more than 5 characters), re-scored with the same edit ratio the in-memory tier uses. Tantivy keeps its index
in memory-mapped segment files: lookups touch a few pages, and resident memory stays small at any size.

Its answers differ from the in-memory tier's in one way: a fuzzy match more than 2 edits away (a long label
with several typos) is not found, where rapidfuzz's ratio cutoff would admit it.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rapidfuzz import fuzz, process

from pgmr.fsutil import replace_dir, temp_sibling
from pgmr.kg.ids import Kind, id_number
from pgmr.kg.labels import normalize_label
from pgmr.memory.errors import MemoryCorruptError
from pgmr.memory.rows import MemoryRow

LEXICAL_DIRS: dict[Kind, str] = {"entity": "lexical/entities", "relation": "lexical/relations"}

# Documents a fuzzy lookup considers before re-scoring: an automaton at distance 2 over a short surface can
# match thousands of terms in a 100M-term dictionary; the closest ones are kept.
FUZZY_FETCH = 256
_WRITER_HEAP = 256_000_000


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    builder.add_text_field("surface", stored=True, tokenizer_name="raw", index_option="basic")
    builder.add_text_field("id", stored=True, tokenizer_name="raw", index_option="basic")
    return builder.build()


def build_lexical_index(path: Path, surfaces: Iterable[tuple[str, str]], threads: int = 1) -> int:
    """Write the index of (normalized surface, ID) pairs to `path` (a directory, replaced atomically); returns the
    number of pairs. Duplicate pairs are written once."""
    import tantivy

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_sibling(path)
    tmp.mkdir()
    try:
        index = tantivy.Index(_schema(), path=str(tmp))
        writer = index.writer(heap_size=_WRITER_HEAP, num_threads=max(1, threads))
        seen: set[tuple[str, str]] = set()
        count = 0
        for surface, wid in surfaces:
            if not surface or (surface, wid) in seen:
                continue
            seen.add((surface, wid))
            writer.add_document(tantivy.Document(surface=surface, id=wid))
            count += 1
            if len(seen) >= 1_000_000:
                seen.clear()  # bounded memory: pairs repeat only within an entity, which comes whole
        writer.commit()
        writer.wait_merging_threads()
        replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return count


def write_lexical(directory: Path, rows: Mapping[Kind, Iterable[MemoryRow]]) -> dict[str, str]:
    """The lexical indexes of a memory's rows, inside the memory directory being written; returns the manifest's
    `lexical` entry (kind -> relative directory)."""
    written: dict[str, str] = {}
    for kind, kind_rows in rows.items():
        pairs = ((normalize_label(row.surface or row.label), row.id) for row in kind_rows)
        build_lexical_index(directory / LEXICAL_DIRS[kind], pairs)
        written[kind] = LEXICAL_DIRS[kind]
    return written


class LexicalIndex:
    """Lookups in one kind's lexical index. Keys must be normalized as the surfaces were (resolver's
    `normalize_label`)."""

    def __init__(self, path: Path) -> None:
        import tantivy

        self.path = Path(path)
        try:
            self._index = tantivy.Index.open(str(self.path))
        except (ValueError, OSError) as exc:
            raise MemoryCorruptError(f"{self.path} is not a readable lexical index ({exc})") from None
        self._schema = self._index.schema
        self._local = threading.local()

    def _searcher(self) -> Any:
        searcher = getattr(self._local, "searcher", None)
        if searcher is None:
            searcher = self._local.searcher = self._index.searcher()
        return searcher

    def _pairs(self, query: Any, limit: int) -> list[tuple[str, str]]:
        searcher = self._searcher()
        out = []
        for _, address in searcher.search(query, limit).hits:
            doc = searcher.doc(address)
            out.append((doc["surface"][0], doc["id"][0]))
        return out

    def __len__(self) -> int:
        return int(self._searcher().num_docs)

    def ids_of(self, key: str, limit: int = 1000) -> list[str]:
        import tantivy

        query = tantivy.Query.term_query(self._schema, "surface", key)
        return [wid for _, wid in self._pairs(query, limit)]

    def knows(self, key: str) -> bool:
        return bool(key) and bool(self.ids_of(key, 1))

    def exact(self, key: str, limit: int) -> list[str]:
        if not key or not limit:
            return []
        return sorted(set(self.ids_of(key)), key=lambda i: (id_number(i), i))[:limit]

    def fuzzy(self, key: str, limit: int, cutoff: float) -> list[str]:
        """IDs of the surfaces closest to `key` by edit ratio (at least `cutoff`), best first."""
        import tantivy

        if not key or not limit:
            return []
        distance = 1 if len(key) <= 5 else 2
        query = tantivy.Query.fuzzy_term_query(self._schema, "surface", key, distance=distance,
                                               transposition_cost_one=True)  # fmt: skip
        scored: dict[str, float] = {}
        for surface, wid in self._pairs(query, FUZZY_FETCH):
            ratio = fuzz.ratio(key, surface)
            if ratio >= cutoff * 100 and ratio > scored.get(wid, -1.0):
                scored[wid] = ratio
        ranked = sorted(scored, key=lambda wid: (-scored[wid], id_number(wid), wid))
        return ranked[:limit]

    def surfaces_of(self, wikidata_id: str) -> set[str]:
        import tantivy

        query = tantivy.Query.term_query(self._schema, "id", wikidata_id)
        return {surface for surface, _ in self._pairs(query, 1000)}

    def similarities(self, wikidata_ids: Sequence[str], key: str) -> list[float]:
        """Per ID, the best edit similarity (fuzz.ratio / 100) of `key` with its surfaces (0 without any)."""
        return best_edit_similarities([self.surfaces_of(wid) for wid in wikidata_ids], key)


def best_edit_similarities(surface_sets: Sequence[Iterable[str]], key: str) -> list[float]:
    """Per set of surfaces (one set per ID), the best edit similarity (fuzz.ratio / 100) of `key` with any of
    them, 0 for an empty set; one rapidfuzz call over all of them."""
    owners: list[int] = []
    surfaces: list[str] = []
    for n, group in enumerate(surface_sets):
        for surface in group:
            owners.append(n)
            surfaces.append(surface)
    best = np.zeros(len(surface_sets), dtype=np.float64)
    if surfaces:
        ratios = process.cdist([key], surfaces, scorer=fuzz.ratio, dtype=np.float64, workers=1)[0]
        np.maximum.at(best, np.asarray(owners), ratios)
    return (best / 100).tolist()
