"""One kind's memory: its rows and the vector index over their embeddings, searched for the best unique IDs,
and loaded from a memory directory's files."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pgmr.kg.ids import Kind, id_order
from pgmr.memory.cache import file_sha256
from pgmr.memory.encoder import Encoder
from pgmr.memory.errors import MemoryCorruptError, PgmrMemoryError
from pgmr.memory.index import VectorIndex, load_index
from pgmr.memory.manifest import MemoryManifest, apply_search_options
from pgmr.memory.row_table import ArrowRows, RowTable, as_row_table
from pgmr.memory.rows import REBUILD_HINT, MemoryRow, read_rows

# Rows fetched per requested hit: aliases put several rows of one ID near each other, and collapsing them to
# unique IDs needs more rows than k.
OVERFETCH = 4
# The first fetch of an exact ("flat") index: a flat scan costs the same for 200 or 3,200 rows kept, and every
# fetch that comes back short is a whole new scan (with 4, 35 of 80 searches on 40 test questions went
# round again). Not for ivfpq-rerank: there a larger fetch re-ranks (reads) that many more rows, and 16 was
# slower at 10M items than 4 with its second searches (p50 44 against 41 ms per placeholder).
FLAT_FIRST_FETCH = 16
FIRST_FETCH = {"flat": FLAT_FIRST_FETCH}


@dataclass(frozen=True)
class MemoryHit:
    id: str
    label: str
    description: str | None
    score: float
    matched_text: str


class MemoryDictionary:
    """The memory of one kind: rows and the index over their vectors (row id i is rows[i])."""

    def __init__(
        self,
        kind: Kind,
        rows: Sequence[MemoryRow] | RowTable,
        index: VectorIndex,
        encoder: Encoder | None = None,
    ) -> None:
        if len(rows) != len(index):
            raise ValueError(f"{kind} dictionary: {len(rows)} rows but {len(index)} vectors in the index")
        self.kind = kind
        # In RAM (ListRows) or memory-mapped from an Arrow file (ArrowRows) for memories of millions of items.
        self.rows: RowTable = as_row_table(rows)
        self.index = index
        self.encoder = encoder
        # Row -> an integer shared by the rows of one ID, for collapsing fetched rows to IDs in numpy.
        self._row_owner = self.rows.owners

    def __len__(self) -> int:
        """The number of IDs (rows are more: aliases)."""
        return self.rows.id_count()

    def __contains__(self, wikidata_id: object) -> bool:
        return isinstance(wikidata_id, str) and bool(self.rows.positions(wikidata_id))

    def __repr__(self) -> str:
        return (
            f"MemoryDictionary({self.kind!r}, ids={len(self)}, rows={len(self.rows)}, index={self.index!r})"
        )

    def ids(self) -> frozenset[str]:
        return self.rows.ids()

    def get(self, wikidata_id: str) -> MemoryRow | None:
        """The label row of an ID (its label and description), or None."""
        positions = self.rows.positions(wikidata_id)
        return self.rows[positions[0]] if positions else None

    def search(self, texts: Sequence[str], k: int = 5) -> list[list[MemoryHit]]:
        """Per text, the k best unique IDs, best first. Texts should come from `memory_text`."""
        if self.encoder is None:
            raise PgmrMemoryError("this memory has no encoder to embed texts; use search_vectors")
        if isinstance(texts, str):
            raise TypeError("search takes a sequence of texts, not one string")
        return self.search_vectors(self.encoder.encode(list(texts)), k)

    def search_vectors(self, vectors: np.ndarray, k: int = 5) -> list[list[MemoryHit]]:
        """Like `search`, from query vectors of the memory's encoder (shape (n, dimension), unit rows)."""
        if k < 1:
            raise ValueError(f"k must be positive, got {k}")
        vectors = np.asarray(vectors, dtype=np.float32)
        if vectors.ndim != 2:
            raise ValueError(f"query vectors must be a 2-d array, got shape {vectors.shape}")
        results: list[list[MemoryHit]] = [[] for _ in range(len(vectors))]
        total = len(self.rows)
        pending = list(range(len(vectors)))
        fetch = min(total, k * FIRST_FETCH.get(self.index.kind, OVERFETCH))
        while pending and fetch:
            scores, row_ids = self.index.search(vectors[pending], fetch)
            short: list[int] = []
            for query, query_scores, query_rows in zip(pending, scores, row_ids, strict=True):
                best = self._best_rows(query_scores, query_rows, k)
                # IDs with many aliases can fill the fetched rows; fetch more until k IDs or all rows.
                if len(best) < k and fetch < total:
                    short.append(query)
                else:
                    results[query] = self._hits(query_scores, query_rows, best, k)
            pending = short
            fetch = min(total, fetch * OVERFETCH)
        return results

    def rows_of(self, wikidata_id: str) -> tuple[int, ...]:
        """Row ids of every row (label, aliases, with and without description) of an ID."""
        return self.rows.positions(wikidata_id)

    def similarities(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Best similarity of one query vector to each given ID's rows, for IDs the search did not return."""
        positions = {i: self.rows.positions(i) for i in ids}
        owners = [wid for wid, rows in positions.items() for _ in rows]
        row_ids = np.array([r for rows in positions.values() for r in rows], dtype=np.int64)
        if not len(row_ids):
            return {}
        scores = self.index.reconstruct(row_ids) @ np.asarray(vector, dtype=np.float32)
        best: dict[str, float] = {}
        # Owners come from the lookup itself: reading rows back would cost a row object per vector.
        for wid, score in zip(owners, scores.tolist(), strict=True):
            best[wid] = max(best.get(wid, float("-inf")), score)
        return best

    def _collapse(self, scores: np.ndarray, row_ids: np.ndarray, k: int) -> list[MemoryHit]:
        """The k best IDs among fetched rows: each ID scored by its best row (the first of equal ones), ranked
        by score, then ID number, then ID."""
        return self._hits(scores, row_ids, self._best_rows(scores, row_ids, k), k)

    def _best_rows(self, scores: np.ndarray, row_ids: np.ndarray, k: int) -> np.ndarray:
        """Positions in `row_ids` of each fetched ID's best row, for the IDs that can make the top k (more than
        k where scores tie with the k-th). Vectorized because a flat search fetches hundreds of rows per query,
        and apart from `_hits` because a fetch with fewer than k IDs is fetched again, not read."""
        keep = np.flatnonzero(row_ids >= 0)
        if not len(keep):
            return keep
        kept = scores[keep]
        # Best score first, and among equal scores the row fetched first.
        order = keep[np.lexsort((keep, -kept))]
        owners = self._row_owner[row_ids[order]]
        _, first = np.unique(owners, return_index=True)
        best = order[np.sort(first)]
        best_scores = scores[best]
        if len(best) > k:
            # Everything tied with the k-th best score still competes on the ID tie-breaks of `_hits`.
            best = best[best_scores >= np.partition(best_scores, len(best) - k)[len(best) - k]]
        return best

    def _hits(self, scores: np.ndarray, row_ids: np.ndarray, best: np.ndarray, k: int) -> list[MemoryHit]:
        """The rows at `best` (from `_best_rows`) read back, the top k of them as hits."""
        candidates = [(float(scores[i]), self.rows[int(row_ids[i])]) for i in best]
        candidates.sort(key=lambda item: (-item[0], *id_order(item[1].id)))
        return [
            MemoryHit(
                id=row.id, label=row.label, description=row.description, score=score, matched_text=row.text
            )
            for score, row in candidates[:k]
        ]


def load_dictionary(path: Path, kind: Kind, manifest: MemoryManifest, verify: bool) -> MemoryDictionary:
    """One kind's rows and index from a memory directory, checked against its manifest (and, with `verify`,
    against the files' sha256). Without an encoder: `Memory.load` attaches one."""
    expected = manifest.dictionaries[kind]
    rows_path, index_path = path / expected.rows_file, path / expected.index_file
    for file, checksum in ((rows_path, expected.rows_sha256), (index_path, expected.index_sha256)):
        if not file.is_file():
            raise MemoryCorruptError(f"memory {path} is incomplete: {file.name} is missing; {REBUILD_HINT}")
        if verify and file_sha256(file) != checksum:
            raise MemoryCorruptError(
                f"memory {path} is corrupt: {file.name} does not match the checksum in its manifest "
                f"(truncated or edited); {REBUILD_HINT}"
            )
    rows: RowTable = (
        ArrowRows(rows_path, path)
        if rows_path.suffix == ".arrow"
        else as_row_table(read_rows(rows_path, path))
    )
    try:
        index = load_index(index_path, manifest.index_backend)
    except (RuntimeError, ValueError) as exc:
        raise MemoryCorruptError(
            f"memory {path}: {index_path.name} is unreadable ({exc}); {REBUILD_HINT}"
        ) from None
    apply_search_options(index, manifest, path)
    problems = []
    if len(rows) != expected.rows:
        problems.append(f"{rows_path.name} has {len(rows)} rows, the manifest says {expected.rows}")
    if len(index) != len(rows):
        problems.append(f"{index_path.name} has {len(index)} vectors for {len(rows)} rows")
    if index.dimension != manifest.dimension:
        problems.append(
            f"{index_path.name} has dimension {index.dimension}, the manifest says {manifest.dimension}"
        )
    if index.kind != manifest.index_kind:
        problems.append(f"{index_path.name} is a {index.kind} index, the manifest says {manifest.index_kind}")
    if problems:
        raise MemoryCorruptError(f"memory {path} is inconsistent: {'; '.join(problems)}; {REBUILD_HINT}")
    dictionary = MemoryDictionary(kind, rows, index)
    if len(dictionary) != expected.ids:
        raise MemoryCorruptError(
            f"memory {path} is inconsistent: {rows_path.name} has {len(dictionary)} IDs, the manifest says "
            f"{expected.ids}; {REBUILD_HINT}"
        )
    return dictionary
