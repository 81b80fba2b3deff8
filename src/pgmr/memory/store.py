"""The non-parametric memory: per kind, rows of "label, description" texts with their Wikidata IDs and a vector
index over their embeddings. Placeholders are resolved to IDs by searching it.

A memory directory holds:

    manifest.json            format version, encoder, dimension, index kind, counts, sha256 of every file
    entities.rows.jsonl      one MemoryRow per line; line i is row id i of entities.faiss
    entities.faiss
    relations.rows.jsonl
    relations.faiss
    prior.json               optional: how often each ID occurs in training gold queries (the resolver's prior)

It is written into a temporary sibling directory and renamed over the target only once complete, so an existing
memory survives a failed or interrupted build; a build killed between the two renames of the swap leaves the
previous memory aside, and the next load or build puts it back (`pgmr.fsutil.recover_dir`).
"""

from __future__ import annotations

import json
import logging
import shutil
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

from pgmr import __version__
from pgmr.failpoints import failpoint
from pgmr.fsutil import fsync_dir, recover_dir, replace_dir, temp_sibling, write_file
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.kg.ids import Kind, id_kind, id_number
from pgmr.memory.cache import EmbeddingCache, file_sha256
from pgmr.memory.encoder import Encoder, normalize_rows
from pgmr.memory.errors import (
    MemoryCorruptError,
    MemoryMismatchError,
    MemoryNotFoundError,
    PgmrMemoryError,
)
from pgmr.memory.index import VectorIndex, create_index, load_index

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
KINDS: tuple[Kind, ...] = ("entity", "relation")
MANIFEST_FILE = "manifest.json"
PRIOR_FILE = "prior.json"
_STEMS: dict[Kind, str] = {"entity": "entities", "relation": "relations"}
ROWS_FILES: dict[Kind, str] = {kind: f"{stem}.rows.jsonl" for kind, stem in _STEMS.items()}
INDEX_FILES: dict[Kind, str] = {kind: f"{stem}.faiss" for kind, stem in _STEMS.items()}

# Rows and queries must be embedded from the same template; the manifest records it so that a memory built with
# another template is refused instead of silently scoring worse.
TEXT_TEMPLATE = "{label}, {description}"

# Rows fetched per requested hit: aliases put several rows of one ID near each other, and collapsing them to
# unique IDs needs more rows than k.
OVERFETCH = 4

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


@dataclass(frozen=True)
class MemoryHit:
    id: str
    label: str
    description: str | None
    score: float
    matched_text: str


@dataclass(frozen=True)
class DictionaryManifest:
    ids: int
    rows: int
    rows_file: str
    index_file: str
    rows_sha256: str = ""
    index_sha256: str = ""


@dataclass(frozen=True)
class MemoryManifest:
    encoder: str
    dimension: int
    index_kind: str
    dictionaries: Mapping[str, DictionaryManifest]
    index_backend: str = "faiss"
    index_options: Mapping[str, Any] = field(default_factory=dict)
    text_template: str = TEXT_TEMPLATE
    created_at: str = ""
    pgmr_version: str = __version__
    format_version: int = FORMAT_VERSION
    # {"file": "prior.json", "sha256": ..., "ids": n} when the memory carries prominence counts.
    prior: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        # Explicit order: the version and encoder are what a reader of manifest.json looks for first.
        return {
            "format_version": self.format_version,
            "pgmr_version": self.pgmr_version,
            "created_at": self.created_at,
            "encoder": self.encoder,
            "dimension": self.dimension,
            "text_template": self.text_template,
            "index_backend": self.index_backend,
            "index_kind": self.index_kind,
            "index_options": dict(self.index_options),
            "dictionaries": {kind: asdict(d) for kind, d in self.dictionaries.items()},
            "prior": dict(self.prior),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryManifest:
        dictionaries = {kind: DictionaryManifest(**data["dictionaries"][kind]) for kind in KINDS}
        manifest = cls(**{**data, "dictionaries": dictionaries})
        if not isinstance(manifest.dimension, int) or not isinstance(manifest.encoder, str):
            raise TypeError("encoder must be a string and dimension an integer")
        return manifest


@dataclass(frozen=True)
class BuildStats:
    """What a build did: `encoded` texts went through the encoder, `cached` came from the embedding cache."""

    texts: int
    encoded: int
    cached: int
    rows: Mapping[str, int]
    encode_seconds: float
    seconds: float


def memory_rows(entries: Iterable[CatalogEntry]) -> list[MemoryRow]:
    """For each entry's label and each alias: a row with the entry's description and, when there is one, a row
    of the label/alias alone (so that a placeholder without a description, or with a misspelt label, meets a
    text of its own shape instead of one diluted by a description). Entries without a label get no rows.
    Sorted by ID so that a build does not depend on catalog order."""
    rows: list[MemoryRow] = []
    for entry in sorted(entries, key=lambda e: (id_number(e.id), e.id)):
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


class MemoryDictionary:
    """The memory of one kind: rows and the index over their vectors (row id i is rows[i])."""

    def __init__(
        self, kind: Kind, rows: Sequence[MemoryRow], index: VectorIndex, encoder: Encoder | None = None
    ) -> None:
        if len(rows) != len(index):
            raise ValueError(f"{kind} dictionary: {len(rows)} rows but {len(index)} vectors in the index")
        self.kind = kind
        self.rows: tuple[MemoryRow, ...] = tuple(rows)
        self.index = index
        self.encoder = encoder
        self._first_row: dict[str, int] = {}
        rows_by_id: dict[str, list[int]] = {}
        for position, row in enumerate(self.rows):
            self._first_row.setdefault(row.id, position)
            rows_by_id.setdefault(row.id, []).append(position)
        self._rows_by_id = {wid: tuple(positions) for wid, positions in rows_by_id.items()}
        self._ids = frozenset(self._first_row)

    def __len__(self) -> int:
        """The number of IDs (rows are more: aliases)."""
        return len(self._ids)

    def __contains__(self, wikidata_id: object) -> bool:
        return wikidata_id in self._ids

    def __repr__(self) -> str:
        return (
            f"MemoryDictionary({self.kind!r}, ids={len(self)}, rows={len(self.rows)}, index={self.index!r})"
        )

    def ids(self) -> frozenset[str]:
        return self._ids

    def get(self, wikidata_id: str) -> MemoryRow | None:
        """The label row of an ID (its label and description), or None."""
        position = self._first_row.get(wikidata_id)
        return None if position is None else self.rows[position]

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
        fetch = min(total, k * OVERFETCH)
        while pending and fetch:
            scores, row_ids = self.index.search(vectors[pending], fetch)
            short: list[int] = []
            for query, query_scores, query_rows in zip(pending, scores, row_ids, strict=True):
                hits = self._collapse(query_scores, query_rows, k)
                # IDs with many aliases can fill the fetched rows; fetch more until k IDs or all rows.
                if len(hits) < k and fetch < total:
                    short.append(query)
                else:
                    results[query] = hits
            pending = short
            fetch = min(total, fetch * OVERFETCH)
        return results

    def rows_of(self, wikidata_id: str) -> tuple[int, ...]:
        """Row ids of every row (label, aliases, with and without description) of an ID."""
        return self._rows_by_id.get(wikidata_id, ())

    def similarities(self, vector: np.ndarray, ids: Sequence[str]) -> dict[str, float]:
        """Best similarity of one query vector to each given ID's rows, for IDs the search did not return."""
        ids = [i for i in ids if i in self._ids]
        if not ids:
            return {}
        row_ids = np.array([r for i in ids for r in self._rows_by_id[i]], dtype=np.int64)
        scores = self.index.reconstruct(row_ids) @ np.asarray(vector, dtype=np.float32)
        best: dict[str, float] = {}
        for row_id, score in zip(row_ids.tolist(), scores.tolist(), strict=True):
            wid = self.rows[row_id].id
            best[wid] = max(best.get(wid, float("-inf")), score)
        return best

    def _collapse(self, scores: np.ndarray, row_ids: np.ndarray, k: int) -> list[MemoryHit]:
        best: dict[str, tuple[float, int]] = {}
        for score, row_id in zip(scores.tolist(), row_ids.tolist(), strict=True):
            if row_id < 0:
                continue
            wikidata_id = self.rows[row_id].id
            if wikidata_id not in best or score > best[wikidata_id][0]:
                best[wikidata_id] = (score, row_id)
        ranked = sorted(best.items(), key=lambda item: (-item[1][0], id_number(item[0]), item[0]))[:k]
        return [
            MemoryHit(
                id=row.id, label=row.label, description=row.description, score=score, matched_text=row.text
            )
            for score, row in ((score, self.rows[row_id]) for _, (score, row_id) in ranked)
        ]


class Memory:
    """Entity and relation dictionaries built with one encoder."""

    def __init__(
        self,
        entities: MemoryDictionary,
        relations: MemoryDictionary,
        encoder: Encoder,
        manifest: MemoryManifest,
        build_stats: BuildStats | None = None,
        prior_counts: Mapping[str, int] | None = None,
    ) -> None:
        self.prior_counts: dict[str, int] = dict(prior_counts or {})
        self.entities = entities
        self.relations = relations
        self.encoder = encoder
        self.manifest = manifest
        self.build_stats = build_stats

    def __repr__(self) -> str:
        return (
            f"Memory(encoder={self.encoder.name!r}, entities={self.entities!r}, relations={self.relations!r})"
        )

    def dictionary(self, kind: Kind) -> MemoryDictionary:
        if kind == "entity":
            return self.entities
        if kind == "relation":
            return self.relations
        raise ValueError(f"unknown kind {kind!r}; expected 'entity' or 'relation'")

    def contains(self, wikidata_id: str) -> bool:
        return wikidata_id in self.dictionary(id_kind(wikidata_id))

    def __contains__(self, wikidata_id: object) -> bool:
        return isinstance(wikidata_id, str) and self.contains(wikidata_id)

    # -- building ---------------------------------------------------------------------------------------------

    @classmethod
    def build_in_memory(
        cls,
        catalog: LabelCatalog,
        encoder: Encoder,
        index_kind: str = "flat",
        batch_size: int = 128,
        progress: bool = True,
        cache: EmbeddingCache | None = None,
        ids: set[str] | None = None,
        index_options: Mapping[str, Any] | None = None,
        prior_counts: Mapping[str, int] | None = None,
    ) -> Memory:
        """Build without writing a memory directory (`save` writes one). `ids` keeps only those catalog IDs.

        A given `cache` supplies known vectors and is saved once the new texts are encoded.
        """
        started = time.perf_counter()
        rows: dict[Kind, list[MemoryRow]] = {}
        for kind in KINDS:
            entries = catalog.of_kind(kind)
            if ids is not None:
                entries = [e for e in entries if e.id in ids]
            rows[kind] = memory_rows(entries)
        # Homonyms without descriptions share a text; each text is embedded once.
        texts = list(dict.fromkeys(row.text for kind in KINDS for row in rows[kind]))
        encode_started = time.perf_counter()
        vectors, encoded = _embed(texts, encoder, batch_size, progress, cache)
        encode_seconds = time.perf_counter() - encode_started
        position = {text: i for i, text in enumerate(texts)}
        options = dict(index_options or {})
        dictionaries: dict[Kind, MemoryDictionary] = {}
        for kind in KINDS:
            index = create_index(index_kind, encoder.dimension, **options)
            index.add(vectors[[position[row.text] for row in rows[kind]]])
            dictionaries[kind] = MemoryDictionary(kind, rows[kind], index, encoder)
        manifest = MemoryManifest(
            encoder=encoder.name,
            dimension=encoder.dimension,
            index_kind=index_kind,
            index_options=options,
            dictionaries={
                kind: DictionaryManifest(
                    ids=len(dictionaries[kind]),
                    rows=len(rows[kind]),
                    rows_file=ROWS_FILES[kind],
                    index_file=INDEX_FILES[kind],
                )
                for kind in KINDS
            },
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        )
        stats = BuildStats(
            texts=len(texts),
            encoded=encoded,
            cached=len(texts) - encoded,
            rows={kind: len(rows[kind]) for kind in KINDS},
            encode_seconds=encode_seconds,
            seconds=time.perf_counter() - started,
        )
        return cls(dictionaries["entity"], dictionaries["relation"], encoder, manifest, stats, prior_counts)

    @classmethod
    def build(
        cls,
        catalog: LabelCatalog,
        out_dir: Path | str,
        encoder: Encoder,
        index_kind: str = "flat",
        batch_size: int = 128,
        progress: bool = True,
        cache_dir: Path | str | None = None,
        ids: set[str] | None = None,
        *,
        use_cache: bool = True,
        index_options: Mapping[str, Any] | None = None,
        prior_counts: Mapping[str, int] | None = None,
    ) -> Memory:
        """Build and save to `out_dir`, replacing a memory there only once the new one is complete.

        Embeddings are cached in `cache_dir`, by default the sibling directory `<out_dir>.cache` (outside the
        memory directory, which a rebuild replaces whole).
        """
        out_dir = Path(out_dir)
        recover_dir(out_dir, clean=True)
        _check_replaceable(out_dir)
        cache = None
        if use_cache:
            directory = Path(cache_dir) if cache_dir is not None else default_cache_dir(out_dir)
            cache = EmbeddingCache(directory, encoder.name, encoder.dimension)
        memory = cls.build_in_memory(
            catalog,
            encoder,
            index_kind=index_kind,
            batch_size=batch_size,
            progress=progress,
            cache=cache,
            ids=ids,
            index_options=index_options,
            prior_counts=prior_counts,
        )
        memory.save(out_dir)
        return memory

    # -- saving and loading -----------------------------------------------------------------------------------

    def save(self, out_dir: Path | str) -> None:
        """Write into a temporary sibling directory, fsync, then rename it over `out_dir`."""
        out_dir = Path(out_dir)
        # A build killed mid-swap left the previous memory aside (and one killed mid-write a partial copy).
        recover_dir(out_dir, clean=True)
        _check_replaceable(out_dir)
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        tmp = temp_sibling(out_dir)
        tmp.mkdir()
        try:
            dictionaries: dict[str, DictionaryManifest] = {}
            for kind in KINDS:
                dictionary = self.dictionary(kind)
                rows_path, index_path = tmp / ROWS_FILES[kind], tmp / INDEX_FILES[kind]
                _write_rows(rows_path, dictionary.rows)
                dictionary.index.save(index_path)
                failpoint("memory.write")
                dictionaries[kind] = replace(
                    self.manifest.dictionaries[kind],
                    rows_sha256=file_sha256(rows_path),
                    index_sha256=file_sha256(index_path),
                )
            prior: dict[str, Any] = {}
            if self.prior_counts:
                prior_path = tmp / PRIOR_FILE
                write_file(prior_path, json.dumps(self.prior_counts, sort_keys=True).encode() + b"\n")
                prior = {"file": PRIOR_FILE, "sha256": file_sha256(prior_path), "ids": len(self.prior_counts)}
            manifest = replace(self.manifest, dictionaries=dictionaries, prior=prior)
            # The manifest goes last: a directory with a manifest has everything the manifest names.
            write_file(tmp / MANIFEST_FILE, json.dumps(manifest.to_json(), indent=2).encode() + b"\n")
            fsync_dir(tmp)
            replace_dir(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.manifest = manifest

    @classmethod
    def load(cls, path: Path | str, encoder: Encoder | None = None, *, verify: bool = True) -> Memory:
        """Load and validate a memory directory. `encoder` None loads the encoder named in the manifest.

        `verify` checks every file's sha256 against the manifest (reads each file once more).
        """
        path = Path(path)
        manifest = read_manifest(path)
        if encoder is not None:
            _check_encoder(path, manifest, encoder)
        dictionaries = {kind: _load_dictionary(path, kind, manifest, verify) for kind in KINDS}
        if encoder is None:
            from pgmr.memory.encoders import load_encoder

            encoder = load_encoder(manifest.encoder)
            _check_encoder(path, manifest, encoder)
        for dictionary in dictionaries.values():
            dictionary.encoder = encoder
        prior_counts = _load_prior(path, manifest, verify)
        return cls(dictionaries["entity"], dictionaries["relation"], encoder, manifest, None, prior_counts)


def default_cache_dir(out_dir: Path | str) -> Path:
    """`<out_dir>.cache` beside the memory directory."""
    out_dir = Path(out_dir)
    return out_dir.with_name(f"{out_dir.name}.cache")


def read_manifest(path: Path) -> MemoryManifest:
    manifest_path = path / MANIFEST_FILE
    if not manifest_path.is_file() and recover_dir(path):
        log.warning(
            "%s: restored the previous memory, which a killed `pgmr memory build` had moved aside", path
        )
    if not manifest_path.is_file():
        leftovers = sorted(path.parent.glob(f".{path.name}.old-*")) if path.parent.is_dir() else []
        hint = (
            f"; an interrupted replace left the previous memory at {leftovers[-1]}: rename it to {path}"
            if leftovers
            else ""
        )
        what = "has no manifest.json" if path.is_dir() else "does not exist"
        raise MemoryNotFoundError(
            f"no pgmr memory at {path}: the directory {what}; build one with `pgmr memory build`{hint}"
        )
    try:
        data = json.loads(manifest_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MemoryCorruptError(f"{manifest_path} is unreadable ({exc}); {REBUILD_HINT}") from None
    if not isinstance(data, dict) or not isinstance(data.get("format_version"), int):
        raise MemoryCorruptError(f"{manifest_path} has no format_version; {REBUILD_HINT}")
    version = data["format_version"]
    if version != FORMAT_VERSION:
        newer = "a newer pgmr: upgrade pgmr or " if version > FORMAT_VERSION else "an older pgmr: "
        raise MemoryMismatchError(
            f"{path} has memory format {version}, this pgmr reads format {FORMAT_VERSION}; it was written by "
            f"{newer}{REBUILD_HINT}"
        )
    try:
        manifest = MemoryManifest.from_json(data)
    except (KeyError, TypeError) as exc:
        raise MemoryCorruptError(f"{manifest_path} is incomplete ({exc}); {REBUILD_HINT}") from None
    if manifest.text_template != TEXT_TEMPLATE:
        raise MemoryMismatchError(
            f"{path} embeds texts as {manifest.text_template!r} but this pgmr queries with {TEXT_TEMPLATE!r}; "
            f"{REBUILD_HINT}"
        )
    return manifest


def _check_encoder(path: Path, manifest: MemoryManifest, encoder: Encoder) -> None:
    if encoder.name != manifest.encoder:
        raise MemoryMismatchError(
            f"{path} was built with encoder {manifest.encoder!r}, not {encoder.name!r}: query it with that "
            f"encoder (or load without one), or {REBUILD_HINT} --encoder {encoder.name}"
        )
    if encoder.dimension != manifest.dimension:
        raise MemoryMismatchError(
            f"{path} holds {manifest.dimension}-dimensional vectors but encoder {encoder.name!r} makes "
            f"{encoder.dimension}-dimensional ones; {REBUILD_HINT}"
        )


def _load_dictionary(path: Path, kind: Kind, manifest: MemoryManifest, verify: bool) -> MemoryDictionary:
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
    rows = _read_rows(rows_path, path)
    try:
        index = load_index(index_path, manifest.index_backend)
    except (RuntimeError, ValueError) as exc:
        raise MemoryCorruptError(
            f"memory {path}: {index_path.name} is unreadable ({exc}); {REBUILD_HINT}"
        ) from None
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


def _load_prior(path: Path, manifest: MemoryManifest, verify: bool) -> dict[str, int]:
    if not manifest.prior:
        return {}
    prior_path = path / str(manifest.prior.get("file", PRIOR_FILE))
    if not prior_path.is_file():
        raise MemoryCorruptError(f"memory {path} is incomplete: {prior_path.name} is missing; {REBUILD_HINT}")
    if verify and file_sha256(prior_path) != manifest.prior.get("sha256"):
        raise MemoryCorruptError(
            f"memory {path} is corrupt: {prior_path.name} does not match its checksum; {REBUILD_HINT}"
        )
    try:
        counts = json.loads(prior_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise MemoryCorruptError(
            f"memory {path}: {prior_path.name} is unreadable ({exc}); {REBUILD_HINT}"
        ) from None
    if not isinstance(counts, dict) or not all(isinstance(v, int) for v in counts.values()):
        raise MemoryCorruptError(
            f"memory {path}: {prior_path.name} is not an ID -> count map; {REBUILD_HINT}"
        )
    return counts


def _embed(
    texts: list[str], encoder: Encoder, batch_size: int, progress: bool, cache: EmbeddingCache | None
) -> tuple[np.ndarray, int]:
    """(unit vectors for all texts, how many texts were encoded rather than taken from the cache)."""
    if cache is None:
        vectors, missing = (
            np.zeros((len(texts), encoder.dimension), dtype=np.float32),
            list(range(len(texts))),
        )
    else:
        vectors, missing = cache.lookup(texts)
    if missing:
        new_texts = [texts[i] for i in missing]
        new = encoder.encode(new_texts, batch_size=batch_size, show_progress_bar=progress)
        if new.shape != (len(missing), encoder.dimension):
            raise PgmrMemoryError(
                f"encoder {encoder.name!r} returned shape {new.shape} for {len(missing)} texts, expected "
                f"({len(missing)}, {encoder.dimension})"
            )
        if not np.isfinite(new).all():
            raise PgmrMemoryError(f"encoder {encoder.name!r} returned non-finite vectors")
        new = normalize_rows(new)
        vectors[missing] = new
        if cache is not None:
            cache.put(new_texts, new)
            cache.save()
    return vectors, len(missing)


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


def _write_rows(path: Path, rows: Sequence[MemoryRow]) -> None:
    write_file(path, "".join(_row_record(row) + "\n" for row in rows).encode("utf-8"))


def _read_rows(path: Path, memory: Path) -> list[MemoryRow]:
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


def _check_replaceable(out_dir: Path) -> None:
    """Refuse to replace anything but a memory or an empty directory: a wrong --out must not delete data."""
    if not out_dir.exists():
        return
    if not out_dir.is_dir():
        raise PgmrMemoryError(f"cannot write a memory to {out_dir}: it is a file; choose another output path")
    if (out_dir / MANIFEST_FILE).is_file() or not any(out_dir.iterdir()):
        return
    raise PgmrMemoryError(
        f"refusing to replace {out_dir}: it is a non-empty directory without a pgmr manifest.json; "
        "choose another output path or remove it first"
    )
