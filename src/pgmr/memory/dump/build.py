"""`pgmr memory build --from-dump`: a memory from a Wikidata JSON dump, in three resumable stages.

1. parse: dump chunks -> catalog shards (Parquet: id, kind, label, aliases, description, sitelinks, ...);
2. encode: each shard's memory rows -> embeddings;
3. index: the vector indexes, rows, sitelink prior and manifest, written atomically over the target.

`dump` may also be a catalog directory (shards + ledger, e.g. another build's `catalog/` or
`pgmr memory synthetic-dump --catalog`): the parse stage is then skipped. Settings `cache_dir` (an embedding
cache, e.g. a memory built from the data directory: `<memory>.cache`) and `drawn_vectors` (synthetic dumps
only, `pgmr.memory.dump.drawn`) cut the encode stage's work.

The stages run on a Dask cluster (local by default): parsing, encoding, and the index stage's costly part
(encoding each shard's rows into index codes). Their units are written one by one into a work directory beside
the target (`<out>.build/`), so a build killed at any point resumes where it was and loses at most the units
in flight; the memory it finally writes is the same as an uninterrupted build's. The work
directory is kept after success (`keep_work=False` removes it): the catalog shards are a columnar copy of the
dump's labels that other tools can read.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from pgmr.failpoints import failpoint
from pgmr.kg.dump.records import DEFAULT_LANGUAGES
from pgmr.memory.cache import EmbeddingCache, embed_texts
from pgmr.memory.dump.cluster import ClusterSettings, dask_client
from pgmr.memory.dump.drawn import DrawnVectors, prepare_drawn
from pgmr.memory.dump.encode_stage import EncodeReport, run_encode_stage, vector_dtype
from pgmr.memory.dump.index_stage import build_memory
from pgmr.memory.dump.parse_stage import ParseReport, ProgressCallback, catalog_report, run_parse_stage
from pgmr.memory.dump.state import LEDGER, BuildIdentity, WorkDir
from pgmr.memory.encoder import Encoder, encoder_precision
from pgmr.memory.errors import PgmrMemoryError
from pgmr.memory.store import Memory
from pgmr.precision import check_encoder_precision

# ~50 MB of a real dump: what a kill can lose at most, and one catalog shard of ~5,000 records.
DEFAULT_LINES_PER_CHUNK = 5_000


@dataclass(frozen=True)
class DumpBuildSettings:
    languages: tuple[str, ...] = DEFAULT_LANGUAGES
    lines_per_chunk: int = DEFAULT_LINES_PER_CHUNK
    encoder: str | None = None  # None: the bundled default encoder
    index_kind: str = "flat"
    index_options: Mapping[str, Any] = field(default_factory=dict)
    index_backend: str = "faiss"
    batch_size: int = 128
    cluster: ClusterSettings = field(default_factory=ClusterSettings)
    decompress_threads: int | None = None
    restart: bool = False
    keep_work: bool = True
    cache_dir: Path | None = None  # an embedding cache to read vectors from (never written)
    drawn_vectors: bool = False  # synthetic dumps: draw non-namesake synthetic items' vectors
    # The query encoder the memory asks for (manifest `query_precision`; ENCODER_PRECISIONS). int8: at 10M items
    # encoding is the largest part of a slow question, and int8 halves it with the same validation Query EM
    # (docs/scale.md, 2026-12-07); `auto` follows the caller's precision.
    query_precision: str = "int8"

    def __post_init__(self) -> None:
        if not self.languages or not all(isinstance(x, str) and x for x in self.languages):
            raise ValueError("languages must be a non-empty list of language codes")
        if self.lines_per_chunk < 1:
            raise ValueError("lines_per_chunk must be positive")
        if self.batch_size < 1:
            raise ValueError("batch_size must be positive")
        check_encoder_precision(self.query_precision, "query_precision")


@dataclass(frozen=True)
class DumpBuildReport:
    parse: ParseReport
    encode: EncodeReport
    index_seconds: float
    seconds: float
    work_dir: Path
    entities: int
    relations: int
    prior_ids: int


def work_dir_for(out_dir: Path) -> Path:
    return out_dir.with_name(f"{out_dir.name}.build")


def build_from_dump(
    dump: Path | str,
    out_dir: Path | str,
    settings: DumpBuildSettings | None = None,
    progress: ProgressCallback | None = None,
) -> tuple[Memory, DumpBuildReport]:
    settings = settings or DumpBuildSettings()
    dump, out_dir = Path(dump), Path(out_dir)
    from_catalog = dump.is_dir()
    if from_catalog and not (dump / LEDGER).is_file():
        raise PgmrMemoryError(f"{dump} is a directory but not a catalog (it has no {LEDGER})")
    if not from_catalog and not dump.is_file():
        raise PgmrMemoryError(f"no dump at {dump}")
    from pgmr.memory.encoders import load_encoder

    started = time.perf_counter()
    encoder = load_encoder(settings.encoder)
    work = WorkDir(work_dir_for(out_dir), catalog=dump if from_catalog else None)
    cache = _cache(settings, encoder)
    drawn = _drawn(work, encoder, cache) if settings.drawn_vectors else None
    work.open(
        BuildIdentity.of(
            dump,
            settings.languages,
            settings.lines_per_chunk,
            encoder.name,
            drawn.describe() if drawn else "encoded",
        ),
        restart=settings.restart,
    )
    with dask_client(settings.cluster) as client:
        if from_catalog:
            parse = catalog_report(work, 0, 0, 0.0)
        else:
            parse = run_parse_stage(
                client,
                work,
                dump,
                settings.languages,
                settings.lines_per_chunk,
                progress,
                settings.decompress_threads,
            )
        failpoint("dump.parsed")
        if parse.records == 0:
            raise PgmrMemoryError(
                f"{dump} gave no entity with a label in {', '.join(settings.languages)} "
                f"({parse.lines} lines; {_problems(parse)}); nothing to build a memory from"
            )
        encode = run_encode_stage(
            client, work, encoder.name, encoder.dimension, settings.batch_size, progress, cache, drawn,
            vector_dtype(settings.index_kind),
        )  # fmt: skip
        failpoint("dump.encoded")
        memory, index_seconds = build_memory(
            work,
            encoder,
            settings.index_kind,
            settings.index_options,
            index_backend=settings.index_backend,
            vectors=drawn.describe() if drawn else "encoded",
            progress=progress,
            client=client,
        )
    failpoint("dump.indexed")
    tuned = "" if settings.query_precision == "auto" else settings.query_precision
    memory.manifest = replace(memory.manifest, query_precision=tuned)
    memory.save(out_dir)
    if not settings.keep_work:
        shutil.rmtree(work.path, ignore_errors=True)
    report = DumpBuildReport(
        parse=parse,
        encode=encode,
        index_seconds=index_seconds,
        seconds=time.perf_counter() - started,
        work_dir=work.path,
        entities=len(memory.entities),
        relations=len(memory.relations),
        prior_ids=len(memory.prior_counts),
    )
    return memory, report


def _cache(settings: DumpBuildSettings, encoder: Encoder) -> EmbeddingCache | None:
    if settings.cache_dir is None:
        return None
    if not Path(settings.cache_dir).is_dir():
        raise PgmrMemoryError(f"no embedding cache at {settings.cache_dir}")
    return EmbeddingCache(settings.cache_dir, encoder.name, encoder.dimension, encoder_precision(encoder))


def _drawn(work: WorkDir, encoder: Encoder, cache: EmbeddingCache | None) -> DrawnVectors:
    """The drawing pool comes from the catalog's real rows: cached vectors where the cache has them."""
    shards = work.catalog_shards()
    if not shards:
        raise PgmrMemoryError(
            "--drawn-vectors needs a catalog to start from (a catalog directory as the dump)"
        )

    def encode(texts: list[str]) -> np.ndarray:
        # The cache is read, never written: it belongs to another memory.
        return embed_texts(texts, encoder, 128, None, cache, record=False)[0]

    return prepare_drawn(shards, encode)


def _problems(parse: ParseReport) -> str:
    parts = [f"{count} {reason}" for reason, count in parse.counts.items() if count]
    if parse.truncated:
        parts.append(f"truncated ({parse.truncated})")
    return ", ".join(parts) or "no problems"
