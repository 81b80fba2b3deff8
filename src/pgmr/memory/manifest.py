"""A memory directory's manifest.json: format version, encoder, index, counts and the sha256 of every file.

Reading it is where a memory from another pgmr, another encoder or another text template is refused, and where
a memory left aside by a killed build is put back.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from pgmr import __version__
from pgmr.fsutil import fsync_dir, recover_dir, write_file
from pgmr.kg.ids import Kind
from pgmr.memory.cache import file_sha256
from pgmr.memory.encoder import Encoder
from pgmr.memory.errors import MemoryCorruptError, MemoryMismatchError, MemoryNotFoundError
from pgmr.memory.rows import REBUILD_HINT, TEXT_TEMPLATE
from pgmr.precision import check_encoder_precision

log = logging.getLogger(__name__)

FORMAT_VERSION = 2
KINDS: tuple[Kind, ...] = ("entity", "relation")
MANIFEST_FILE = "manifest.json"
PRIOR_FILE = "prior.json"
_STEMS: dict[Kind, str] = {"entity": "entities", "relation": "relations"}
ROWS_FILES: dict[Kind, str] = {kind: f"{stem}.rows.jsonl" for kind, stem in _STEMS.items()}
INDEX_FILES: dict[Kind, str] = {kind: f"{stem}.faiss" for kind, stem in _STEMS.items()}
# What `pgmr memory tune` may set per index kind: the indexes' own attribute names, read at load.
SEARCH_OPTIONS: dict[str, tuple[str, ...]] = {
    "ivfpq-rerank": ("nprobe", "rerank"),
    "ivfpq": ("nprobe",),
    "hnsw": ("ef_search",),
}
PRIOR_OPTIONS = {"age_share", "scale"}


def index_file(kind: Kind, backend: str = "faiss") -> str:
    """The file a kind's index is saved to: the FAISS index itself, or a Milvus collection's descriptor."""
    return INDEX_FILES[kind] if backend == "faiss" else f"{_STEMS[kind]}.{backend}.json"


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
    # kind -> directory of its on-disk lexical index (pgmr.memory.lexical), for memories built with one.
    lexical: Mapping[str, str] = field(default_factory=dict)
    # "encoded" (every vector from the encoder), or how a synthetic memory's vectors were drawn.
    vectors: str = "encoded"
    # The number format the rows were encoded in (fp32, bf16, int8); manifests from before 2026-12-07: fp32.
    precision: str = "fp32"
    # The query encoder's precision when the caller asks for the default (`auto`); "" follows the caller. Set
    # by `pgmr memory tune --query-precision`, and int8 for dump-built memories, where encoding is the largest
    # part of a slow question (docs/scale.md).
    query_precision: str = ""
    # Search settings that override those saved in the index files (`pgmr memory tune`): e.g. nprobe and
    # rerank of an ivfpq-rerank index, chosen after the build without rewriting its files.
    search_options: Mapping[str, int] = field(default_factory=dict)
    # {"file": "graph.json", "sha256": ..., "sources": [...]} for a memory built from a user's graph
    # (pgmr.memory.graph_file); empty, and absent from manifest.json, for Wikidata memories.
    graph: Mapping[str, Any] = field(default_factory=dict)

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
            "vectors": self.vectors,
            "precision": self.precision,
            "dictionaries": {kind: asdict(d) for kind, d in self.dictionaries.items()},
            "prior": dict(self.prior),
            "lexical": dict(self.lexical),
            "search_options": dict(self.search_options),
            **({"graph": dict(self.graph)} if self.graph else {}),
            **({"query_precision": self.query_precision} if self.query_precision else {}),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MemoryManifest:
        dictionaries = {kind: DictionaryManifest(**data["dictionaries"][kind]) for kind in KINDS}
        manifest = cls(**{**data, "dictionaries": dictionaries})
        if not isinstance(manifest.dimension, int) or not isinstance(manifest.encoder, str):
            raise TypeError("encoder must be a string and dimension an integer")
        return manifest


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


def check_encoder(path: Path, manifest: MemoryManifest, encoder: Encoder) -> None:
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


def load_prior(path: Path, manifest: MemoryManifest, verify: bool) -> dict[str, int]:
    """The prominence counts the manifest names ({} when it names none)."""
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


def tune_search(
    path: Path,
    options: Mapping[str, int],
    prior: Mapping[str, float] | None = None,
    query_precision: str | None = None,
) -> MemoryManifest:
    """Set search options of a memory's indexes and the shape of its prior in its manifest (no other file
    changes, so no checksum does): validated, written to a temporary file and renamed over manifest.json.
    `prior`: age_share and scale of a dump-built memory's sitelinks prior (pgmr.resolver.ranking.prior_for).
    `query_precision`: one of pgmr.precision.ENCODER_PRECISIONS for the query encoder; `auto` follows the
    caller's precision."""
    if query_precision is not None:
        check_encoder_precision(query_precision, "query precision")
    manifest = read_manifest(path)
    for name, value in options.items():
        if problem := _search_option_problem(manifest.index_kind, name, value):
            raise ValueError(f"{path}: {problem}")
    prior = dict(prior or {})
    if prior and manifest.prior.get("source") != "sitelinks":
        raise ValueError(f"{path} has no sitelinks prior (a dump-built memory's) to shape")
    if (
        not 0.0 <= prior.get("age_share", 0.0) <= 1.0
        or prior.get("scale", 0.0) < 0
        or set(prior) - PRIOR_OPTIONS
    ):
        raise ValueError(f"prior options are age_share in [0, 1] and scale >= 0, got {prior}")
    tuned = replace(
        manifest,
        search_options={**manifest.search_options, **options},
        prior={**manifest.prior, **prior},
        query_precision=manifest.query_precision
        if query_precision is None
        else ("" if query_precision == "auto" else query_precision),
    )
    write_manifest(path, tuned)
    return tuned


def write_manifest(path: Path, manifest: MemoryManifest) -> None:
    """Replace a memory's manifest.json atomically (a temporary file renamed over it)."""
    tmp = path / f".{MANIFEST_FILE}.tmp-{os.getpid()}"
    try:
        write_file(tmp, json.dumps(manifest.to_json(), indent=2).encode() + b"\n")
        os.replace(tmp, path / MANIFEST_FILE)
    finally:
        tmp.unlink(missing_ok=True)
    fsync_dir(path)


def swap_index_file(path: Path, kind: Kind, index_file: str, sha256: str) -> MemoryManifest:
    """Point a memory's `kind` at another index file (already written and checksummed) in one manifest write,
    then remove the file it had: a crash before the write leaves the old memory, after it the new one."""
    manifest = read_manifest(path)
    old = manifest.dictionaries[kind]
    moved = replace(old, index_file=index_file, index_sha256=sha256)
    swapped = replace(manifest, dictionaries={**manifest.dictionaries, kind: moved})
    write_manifest(path, swapped)
    if old.index_file != index_file:
        (path / old.index_file).unlink(missing_ok=True)
    return swapped


def apply_search_options(index: Any, manifest: MemoryManifest, where: Path) -> None:
    """The manifest's search options onto a loaded index (those its kind takes; others are a corrupt manifest)."""
    for name, value in manifest.search_options.items():
        if problem := _search_option_problem(manifest.index_kind, name, value):
            raise MemoryCorruptError(
                f"{where / MANIFEST_FILE}: {problem}; set it again with `pgmr memory tune`"
            )
        setattr(index, name, value)


def _search_option_problem(index_kind: str, name: str, value: object) -> str | None:
    """Why a search option does not apply to an index kind, or None when it does."""
    known = SEARCH_OPTIONS.get(index_kind, ())
    if name not in known:
        can = f"only {', '.join(known)}" if known else "no search option"
        return f"a {index_kind} index takes {can}, not {name!r}"
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        return f"{name} must be a positive integer, got {value!r}"
    return None
