"""The non-parametric memory: per kind, rows of "label, description" texts with their Wikidata IDs and a vector
index over their embeddings. Placeholders are resolved to IDs by searching it.

A memory directory holds:

    manifest.json            format version, encoder, dimension, index kind, counts, sha256 of every file
    entities.rows.jsonl      one MemoryRow per line; line i is row id i of entities.faiss (or
                             entities.rows.arrow, memory-mapped: dump-built memories, pgmr.memory.row_table)
    entities.faiss
    relations.rows.jsonl
    relations.faiss
    prior.json               optional: how often each ID occurs in training gold queries (the resolver's prior)

It is written into a temporary sibling directory and renamed over the target only once complete, so an existing
memory survives a failed or interrupted build; a build killed between the two renames of the swap leaves the
previous memory aside, and the next load or build puts it back (`pgmr.fsutil.recover_dir`).

The rows (`pgmr.memory.rows`), the manifest (`pgmr.memory.manifest`) and one kind's searchable dictionary
(`pgmr.memory.dictionary`) have modules of their own; the names stay importable from here.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmr.failpoints import failpoint
from pgmr.fsutil import fsync_dir, recover_dir, replace_dir, temp_sibling, write_file
from pgmr.kg.catalog import LabelCatalog
from pgmr.kg.graph import GraphCatalog, GraphInfo
from pgmr.kg.ids import Kind, id_kind
from pgmr.memory.cache import EmbeddingCache, embed_texts, file_sha256
from pgmr.memory.dictionary import OVERFETCH, MemoryDictionary, MemoryHit, load_dictionary
from pgmr.memory.encoder import EncodeProgress, Encoder, encoder_precision
from pgmr.memory.graph_file import load_graph, save_graph
from pgmr.memory.index import create_index
from pgmr.memory.location import check_replaceable as _check_replaceable
from pgmr.memory.location import default_cache_dir
from pgmr.memory.manifest import (
    FORMAT_VERSION,
    INDEX_FILES,
    KINDS,
    MANIFEST_FILE,
    PRIOR_FILE,
    ROWS_FILES,
    DictionaryManifest,
    MemoryManifest,
    check_encoder,
    index_file,
    load_prior,
    read_manifest,
)
from pgmr.memory.page_cache import WarmUp, files_to_warm, warm_up
from pgmr.memory.row_table import save_rows
from pgmr.memory.rows import (
    REBUILD_HINT,
    TEXT_TEMPLATE,
    MemoryRow,
    memory_rows,
    memory_text,
)
from pgmr.precision import DEFAULT_PRECISION


@dataclass(frozen=True)
class BuildStats:
    """What a build did: `encoded` texts went through the encoder, `cached` came from the embedding cache."""

    texts: int
    encoded: int
    cached: int
    rows: Mapping[str, int]
    encode_seconds: float
    seconds: float


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
        prior_source: str = "",
        lexical: Mapping[Kind, Any] | None = None,
        graph: GraphInfo | None = None,
    ) -> None:
        # The graph a memory of another graph's IRIs was built from (its prefixes write final queries); None
        # for Wikidata.
        self.graph = graph
        # kind -> LexicalIndex: the on-disk lexical tier, when the memory has one (dump-built memories do).
        self.lexical: dict[Kind, Any] = dict(lexical or {})
        self.prior_counts: dict[str, int] = dict(prior_counts or {})
        # Reading its files into the page cache, when `load` started that (pgmr.memory.page_cache).
        self.warming: WarmUp | None = None
        # Where the prior's counts come from ("sitelinks" for a dump-built memory, a dataset's name otherwise).
        self.prior_source = prior_source or str(manifest.prior.get("source", ""))
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
        if ":" in wikidata_id:  # an IRI says nothing of its kind (a Wikidata ID never has a colon)
            return wikidata_id in self.entities or wikidata_id in self.relations
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
        progress: EncodeProgress | None = None,
        cache: EmbeddingCache | None = None,
        ids: set[str] | None = None,
        index_options: Mapping[str, Any] | None = None,
        prior_counts: Mapping[str, int] | None = None,
        prior_source: str = "",
        index_backend: str = "faiss",
    ) -> Memory:
        """Build without writing a memory directory (`save` writes one). `ids` keeps only those catalog IDs.

        A given `cache` supplies known vectors and is saved once the new texts are encoded. `progress(done,
        total)` follows the encoding of the texts the cache lacks.
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
        vectors, encoded = embed_texts(texts, encoder, batch_size, progress, cache)
        encode_seconds = time.perf_counter() - encode_started
        position = {text: i for i, text in enumerate(texts)}
        options = dict(index_options or {})
        dictionaries: dict[Kind, MemoryDictionary] = {}
        for kind in KINDS:
            index = create_index(index_kind, encoder.dimension, index_backend, **options)
            index.add(vectors[[position[row.text] for row in rows[kind]]])
            dictionaries[kind] = MemoryDictionary(kind, rows[kind], index, encoder)
        manifest = new_manifest(encoder, dictionaries, index_kind, options, index_backend)
        stats = BuildStats(
            texts=len(texts),
            encoded=encoded,
            cached=len(texts) - encoded,
            rows={kind: len(rows[kind]) for kind in KINDS},
            encode_seconds=encode_seconds,
            seconds=time.perf_counter() - started,
        )
        return cls(
            dictionaries["entity"],
            dictionaries["relation"],
            encoder,
            manifest,
            stats,
            prior_counts,
            prior_source,
            graph=catalog.info() if isinstance(catalog, GraphCatalog) else None,
        )

    @classmethod
    def build(
        cls,
        catalog: LabelCatalog,
        out_dir: Path | str,
        encoder: Encoder,
        index_kind: str = "flat",
        batch_size: int = 128,
        progress: EncodeProgress | None = None,
        cache_dir: Path | str | None = None,
        ids: set[str] | None = None,
        *,
        use_cache: bool = True,
        index_options: Mapping[str, Any] | None = None,
        prior_counts: Mapping[str, int] | None = None,
        prior_source: str = "",
        index_backend: str = "faiss",
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
            cache = EmbeddingCache(directory, encoder.name, encoder.dimension, encoder_precision(encoder))
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
            prior_source=prior_source,
            index_backend=index_backend,
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
                rows_path = tmp / self.manifest.dictionaries[kind].rows_file
                index_path = tmp / index_file(kind, self.manifest.index_backend)
                save_rows(rows_path, dictionary.rows)
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
                if self.prior_source:
                    prior["source"] = self.prior_source
            lexical = dict(self.manifest.lexical)
            if lexical:
                from pgmr.memory.lexical import write_lexical

                lexical = write_lexical(tmp, {kind: self.dictionary(kind).rows for kind in KINDS})
            graph = save_graph(tmp, self.graph)
            manifest = replace(
                self.manifest, dictionaries=dictionaries, prior=prior, lexical=lexical, graph=graph
            )
            # The manifest goes last: a directory with a manifest has everything the manifest names.
            write_file(tmp / MANIFEST_FILE, json.dumps(manifest.to_json(), indent=2).encode() + b"\n")
            fsync_dir(tmp)
            replace_dir(tmp, out_dir)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        self.manifest = manifest

    @classmethod
    def load(
        cls,
        path: Path | str,
        encoder: Encoder | None = None,
        *,
        verify: bool = True,
        precision: str = DEFAULT_PRECISION,
        warm: bool = True,
    ) -> Memory:
        """Load and validate a memory directory. `encoder` None loads the encoder named in the manifest, in
        `precision` (pgmr.precision; it only encodes queries here: the stored vectors stay as built).

        `verify` checks every file's sha256 against the manifest (reads each file once more). `warm`: a memory
        with Arrow rows (dump-built) has them and its lexical tier read into the page cache in the background
        (`memory.warming`, pgmr.memory.page_cache).
        """
        path = Path(path)
        manifest = read_manifest(path)
        if encoder is not None:
            check_encoder(path, manifest, encoder)
        dictionaries = {kind: load_dictionary(path, kind, manifest, verify) for kind in KINDS}
        if encoder is None:
            from pgmr.memory.encoders import load_query_encoder

            encoder = load_query_encoder(manifest.encoder, precision, manifest.query_precision)
            check_encoder(path, manifest, encoder)
        for dictionary in dictionaries.values():
            dictionary.encoder = encoder
        prior_counts = load_prior(path, manifest, verify)
        lexical: dict[Kind, Any] = {}
        if manifest.lexical:
            from pgmr.memory.lexical import LexicalIndex

            lexical = {kind: LexicalIndex(path / manifest.lexical[kind]) for kind in KINDS}
        memory = cls(
            dictionaries["entity"], dictionaries["relation"], encoder, manifest, None, prior_counts,
            lexical=lexical, graph=load_graph(path, manifest, verify),
        )  # fmt: skip
        memory.warming = warm_up(files_to_warm(path, manifest)) if warm else None
        return memory


def new_manifest(
    encoder: Encoder,
    dictionaries: Mapping[Kind, MemoryDictionary],
    index_kind: str,
    index_options: Mapping[str, Any],
    index_backend: str = "faiss",
    lexical: Mapping[str, str] | None = None,
    rows_format: str = "jsonl",
    vectors: str = "encoded",
) -> MemoryManifest:
    """The manifest of a memory just built (checksums are added by `Memory.save`). `rows_format` "arrow"
    writes the rows as memory-mapped Arrow files (memories of millions of items), "jsonl" as JSON lines."""
    if rows_format not in ("jsonl", "arrow"):
        raise ValueError(f"rows_format must be 'jsonl' or 'arrow', not {rows_format!r}")
    return MemoryManifest(
        encoder=encoder.name,
        dimension=encoder.dimension,
        precision=encoder_precision(encoder),
        index_kind=index_kind,
        index_options=dict(index_options),
        dictionaries={
            kind: DictionaryManifest(
                ids=len(dictionaries[kind]),
                rows=len(dictionaries[kind].rows),
                rows_file=ROWS_FILES[kind].replace(".jsonl", f".{rows_format}"),
                index_file=index_file(kind, index_backend),
            )
            for kind in KINDS
        },
        index_backend=index_backend,
        lexical=dict(lexical or {}),
        created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        vectors=vectors,
    )


__all__ = [
    "FORMAT_VERSION",
    "INDEX_FILES",
    "KINDS",
    "MANIFEST_FILE",
    "OVERFETCH",
    "PRIOR_FILE",
    "REBUILD_HINT",
    "ROWS_FILES",
    "TEXT_TEMPLATE",
    "BuildStats",
    "DictionaryManifest",
    "Memory",
    "MemoryDictionary",
    "MemoryHit",
    "MemoryManifest",
    "MemoryRow",
    "default_cache_dir",
    "memory_rows",
    "memory_text",
    "read_manifest",
]
