"""`pgmr memory build|search|info`: the non-parametric memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from pgmr.cli.common import Settings, console, out, print_error, progress_callback
from pgmr.cli.memory_backends import (
    BUILD_PRECISION_OPTION,
    NBITS_OPTION,
    NPROBE_OPTION,
    RERANK_OPTION,
    RERANK_VECTORS_OPTION,
    backend_options,
)
from pgmr.cli.memory_graph import (
    DESCRIPTION_PREDICATE_OPTION,
    ENDPOINT_TIMEOUT_OPTION,
    FROM_ENDPOINT_OPTION,
    FROM_RDF_OPTION,
    LABEL_PREDICATE_OPTION,
    PAGE_PAUSE_OPTION,
    PAGE_SIZE_OPTION,
    RETRIES_OPTION,
)
from pgmr.cli.memory_recode import recode
from pgmr.config import default_memory_dir
from pgmr.datasets import DatasetError
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import INDEX_KINDS, Memory, PgmrMemoryError, build_encoder, read_manifest, tune_search
from pgmr.precision import DEFAULT_PRECISION
from pgmr.resolver.priors import counts_from_dataset

app = typer.Typer(help="Build, inspect and search the entity and relation memory.", no_args_is_help=True)

MEMORY_OPTION = typer.Option(None, "--memory", "-m", help="Memory directory (default: ~/.cache/pgmr/memory)")


def open_memory(path: Path | None, precision: str = DEFAULT_PRECISION) -> Memory:
    try:
        return Memory.load(path or default_memory_dir(), precision=precision)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


@app.command()
def build(
    ctx: typer.Context,
    out_dir: Path | None = typer.Option(None, "--out", "-o", help="Memory directory to write"),
    encoder: str | None = typer.Option(
        None, help="sentence-transformers model path or name (default: bundled all-MiniLM-L6-v2)"
    ),
    index: str = typer.Option("flat", help=f"Index kind: {', '.join(INDEX_KINDS)}"),
    prior_from: str | None = typer.Option(
        "lcquad2-train-part",
        help="Dataset (file or name) whose gold queries give the prominence prior; 'none' for ID numbers only "
        "(default: LC-QuAD 2.0 train without the validation carve, so validation figures stay honest)",
    ),
    batch_size: int = typer.Option(128, min=1),
    from_dump: Path | None = typer.Option(
        None,
        "--from-dump",
        help="A Wikidata JSON dump (latest-all.json.bz2, .gz or plain): build from it instead of the data "
        "directory's label files; the prior is then the dump's sitelink counts",
    ),
    languages: str | None = typer.Option(
        None,
        help="Label languages in order of preference (comma-separated); --from-dump: default en,mul; "
        "--from-rdf/--from-endpoint: default en,untagged,any ('untagged': literals without a language tag)",
    ),
    scheduler: str | None = typer.Option(
        None, help="--from-dump: a running Dask scheduler (tcp://host:8786); default: a local cluster"
    ),
    workers: int = typer.Option(0, min=0, help="--from-dump: local cluster workers (0: one per core)"),
    chunk_lines: int = typer.Option(5_000, min=1, help="--from-dump: dump lines per chunk (one shard each)"),
    restart: bool = typer.Option(False, help="--from-dump: discard an unfinished build and start again"),
    cache: Path | None = typer.Option(
        None,
        help="--from-dump: an embedding cache to take vectors from (read only), e.g. <memory>.cache of a memory "
        "built from the data directory",
    ),
    drawn_vectors: bool = typer.Option(
        False,
        help="--from-dump of a synthetic catalog: draw the vectors of synthetic items that name no real entity "
        "instead of encoding them (for scale measurements only; the manifest says so)",
    ),
    index_backend: str = typer.Option(
        "faiss", help="Where the vectors live: faiss (files in the memory) or milvus (a Milvus collection)"
    ),
    milvus_uri: str | None = typer.Option(
        None,
        help="--index-backend milvus: the cluster's URI (http://host:19530; token in $MILVUS_TOKEN) or a Milvus "
        "Lite file (default: <memory>.milvus.db beside the memory)",
    ),
    from_rdf: list[Path] | None = FROM_RDF_OPTION,
    from_endpoint: str | None = FROM_ENDPOINT_OPTION,
    label_predicate: list[str] | None = LABEL_PREDICATE_OPTION,
    description_predicate: list[str] | None = DESCRIPTION_PREDICATE_OPTION,
    page_size: int = PAGE_SIZE_OPTION,
    endpoint_timeout: float = ENDPOINT_TIMEOUT_OPTION,
    retries: int = RETRIES_OPTION,
    page_pause: float = PAGE_PAUSE_OPTION,
    precision: str = BUILD_PRECISION_OPTION,
    rerank_vectors: str | None = RERANK_VECTORS_OPTION,
    nbits: int | None = NBITS_OPTION,
    nprobe: int | None = NPROBE_OPTION,
    rerank: int | None = RERANK_OPTION,
) -> None:
    """Embed every label (+ aliases) with its description and write the FAISS indexes atomically."""
    settings: Settings = ctx.obj
    if index not in INDEX_KINDS:
        console.print(f"[red]error:[/red] unknown index kind {index!r}; choose from {', '.join(INDEX_KINDS)}")
        raise typer.Exit(2)
    target = out_dir or default_memory_dir()
    try:
        index_settings = backend_options(
            index_backend,
            index,
            milvus_uri,
            target,
            rerank_vectors,
            nbits=nbits,
            nprobe=nprobe,
            rerank=rerank,
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    if from_rdf or from_endpoint:
        from pgmr.cli import memory_graph

        memory_graph.check_sources(from_dump, from_rdf, from_endpoint)
        graph = memory_graph.graph_settings(languages, label_predicate, description_predicate)
        own = memory_graph.read_graph(
            from_rdf, from_endpoint, graph, page_size=page_size, timeout=endpoint_timeout, retries=retries,
            pause=page_pause,
        )  # fmt: skip
        memory_graph.build_from_graph(
            own, target, encoder=encoder, index_kind=index, batch_size=batch_size,
            index_backend=index_backend, index_options=index_settings, precision=precision,
        )  # fmt: skip
        return
    if from_dump is not None:
        _build_from_dump(
            from_dump,
            target,
            encoder=encoder,
            index_kind=index,
            batch_size=batch_size,
            languages=tuple(x.strip() for x in (languages or "en,mul").split(",") if x.strip()),
            lines_per_chunk=chunk_lines,
            restart=restart,
            index_backend=index_backend,
            index_options=index_settings,
            cache_dir=cache,
            drawn_vectors=drawn_vectors,
            scheduler=scheduler,
            workers=workers,
        )
        return
    if cache is not None or drawn_vectors:
        print_error("--cache and --drawn-vectors apply to --from-dump builds")
        raise typer.Exit(2)
    catalog = LabelCatalog.from_data_dir(settings.data_dir)
    counts = None
    if prior_from and prior_from.lower() != "none":
        try:
            counts = counts_from_dataset(prior_from, settings.data_dir)
        except DatasetError as exc:
            print_error(
                f"cannot count the prior from {prior_from}: {exc} (use --prior-from none to build without)"
            )
            raise typer.Exit(2) from None
        console.print(f"prior: {len(counts)} IDs counted in the gold queries of {prior_from}")
    text_encoder = build_encoder(encoder, precision)
    with progress_callback("encoding texts") as progress:
        memory = Memory.build(
            catalog,
            target,
            text_encoder,
            index_kind=index,
            batch_size=batch_size,
            progress=progress,
            prior_counts=counts,
            prior_source=f"gold queries of {prior_from}" if counts else "",
            index_backend=index_backend,
            index_options=index_settings,
        )
    stats = memory.build_stats
    table = Table(title=f"memory written to {target}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for kind in ("entity", "relation"):
        d = memory.dictionary(kind)
        table.add_row(f"{kind} IDs / rows", f"{len(d)} / {len(d.rows)}")
    if stats:
        table.add_row("texts (encoded / cached)", f"{stats.texts} ({stats.encoded} / {stats.cached})")
        table.add_row("seconds (encoding / total)", f"{stats.encode_seconds:.1f} / {stats.seconds:.1f}")
    out.print(table)


def _build_from_dump(
    dump: Path, target: Path, *, scheduler: str | None, workers: int, **settings: Any
) -> None:
    from pgmr.cli import memory_dump
    from pgmr.memory.dump import ClusterSettings, DumpBuildSettings

    try:
        build_settings = DumpBuildSettings(
            **settings, cluster=ClusterSettings(scheduler=scheduler, workers=workers)
        )
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    try:
        memory_dump.run(dump, target, build_settings)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


@app.command()
def search(
    text: str = typer.Argument(..., help="Label, or 'label, description'"),
    kind: str = typer.Option("entity", help="entity | relation"),
    k: int = typer.Option(5, "-k", min=1),
    memory_dir: Path | None = MEMORY_OPTION,
    json_out: bool = typer.Option(False, "--json", help="JSON lines instead of a table"),
) -> None:
    """Nearest memory entries of a text."""
    if kind not in ("entity", "relation"):
        console.print("[red]error:[/red] --kind must be entity or relation")
        raise typer.Exit(2)
    memory = open_memory(memory_dir)
    hits = memory.dictionary(kind).search([text], k=k)[0]  # type: ignore[arg-type]
    if json_out:
        import json

        for h in hits:
            out.print_json(
                json.dumps({"id": h.id, "label": h.label, "description": h.description, "score": h.score})
            )
        return
    table = Table(title=f"{kind} memory: {text!r}")
    for col in ("rank", "id", "label", "description", "score"):
        table.add_column(col, justify="right" if col in ("rank", "score") else "left")
    for rank, h in enumerate(hits, 1):
        table.add_row(str(rank), h.id, escape(h.label), escape(h.description or ""), f"{h.score:.3f}")
    out.print(table)


@app.command()
def info(memory_dir: Path | None = MEMORY_OPTION) -> None:
    """Show a memory's manifest."""
    path = memory_dir or default_memory_dir()
    try:
        manifest = read_manifest(path)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    import json

    out.print_json(json.dumps(manifest.to_json()))


@app.command()
def tune(
    memory_dir: Path = typer.Argument(..., help="Memory directory"),
    nprobe: int | None = typer.Option(None, min=1, help="IVF lists searched per query (ivfpq, ivfpq-rerank)"),
    rerank: int | None = typer.Option(None, min=1, help="Candidates scored exactly (ivfpq-rerank)"),
    ef_search: int | None = typer.Option(None, min=1, help="HNSW search breadth (hnsw)"),
    prior_age_share: float | None = typer.Option(
        None, min=0.0, max=1.0, help="Dump-built memories: the ID-age share of the sitelinks prior"
    ),
    prior_scale: float | None = typer.Option(
        None, min=0.0, help="Dump-built memories: the sitelinks prior's weight, times the resolver's"
    ),
    query_precision: str | None = typer.Option(
        None, help="The query encoder's precision for this memory: int8, fp32, bf16, or auto (the caller's)"
    ),
) -> None:
    """Change a built memory's search settings (recall against speed) or the shape of its sitelinks prior
    (fitted on validation with bench/grown_prior.py) without rebuilding it."""
    chosen = {"nprobe": nprobe, "rerank": rerank, "ef_search": ef_search}
    options = {name: value for name, value in chosen.items() if value is not None}
    shape = {"age_share": prior_age_share, "scale": prior_scale}
    prior = {name: value for name, value in shape.items() if value is not None}
    try:
        before = read_manifest(memory_dir)
        changed = options or prior or query_precision is not None
        tuned = tune_search(memory_dir, options, prior, query_precision) if changed else before
    except (PgmrMemoryError, ValueError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    shown = ", ".join(f"{k}={v}" for k, v in tuned.search_options.items()) or "as saved in its index files"
    was = ", ".join(f"{k}={v}" for k, v in before.search_options.items())
    console.print(
        f"{memory_dir}: {tuned.index_kind} index searches with {shown}"
        + (f" (was: {was})" if options and was else "")
    )
    if tuned.prior.get("source") == "sitelinks":
        from pgmr.resolver.ranking import prior_for

        console.print(f"{memory_dir}: ranks with {prior_for('sitelinks', {}, tuned.prior)!r}")
    console.print(f"{memory_dir}: encodes queries in {tuned.query_precision or 'the precision asked (auto)'}")
    if not changed:
        console.print(
            "nothing changed: pass --nprobe, --rerank, --ef-search, --query-precision or a --prior- option"
        )


app.command()(recode)


__all__ = ["app", "open_memory"]


@app.command("synthetic-dump")
def synthetic_dump(
    ctx: typer.Context,
    out_file: Path | None = typer.Option(
        None, "--out", "-o", help="Dump to write: .json.bz2, .json.gz or .json"
    ),
    catalog: Path | None = typer.Option(
        None,
        help="Instead of a dump, write the catalog its parse would give (shards + ledger) into this directory, "
        "for `pgmr memory build --from-dump DIR`: how the 10M-item measurements skip a ~100 GB dump",
    ),
    chunk_lines: int = typer.Option(5_000, min=1, help="--catalog: records per shard"),
    items: int = typer.Option(1000, min=0, help="Synthetic items beside the real catalog's entities"),
    seed: int = typer.Option(0, help="Seed: the same seed, items and catalog give the same dump"),
    homonym_rate: float = typer.Option(
        0.05, min=0.0, max=1.0, help="Share of synthetic items that take a real entity's label or alias"
    ),
    workers: int = typer.Option(1, min=1, help="Processes rendering and compressing blocks"),
    real_entities: int = typer.Option(
        -1, help="Real entities to include, a seeded sample (default -1: all); properties are always all"
    ),
) -> None:
    """Write a synthetic Wikidata dump: the data directory's real entities and properties plus N synthetic
    items (hard homonyms among them), in the real dump's format, for trying and measuring dump builds."""
    if (out_file is None) == (catalog is None):
        print_error("give one of --out (a dump file) and --catalog (a catalog directory)")
        raise typer.Exit(2)
    from pgmr.kg.dump.synthetic import SyntheticDump, load_real, write_synthetic_dump

    settings: Settings = ctx.obj
    try:
        entities, properties = load_real(settings.data_dir)
    except (OSError, ValueError) as exc:
        print_error(f"cannot read the real catalog under {settings.data_dir}: {exc}")
        raise typer.Exit(2) from None
    if 0 <= real_entities < len(entities):
        import random

        entities = sorted(random.Random(seed).sample(entities, real_entities), key=lambda e: int(e.id[1:]))
    dump = SyntheticDump(entities, properties, items, seed=seed, homonym_rate=homonym_rate)
    what = f"{dump.total:,} entities ({dump.real:,} real, {items:,} synthetic)"
    if catalog is not None:
        from pgmr.memory.dump.synthetic_catalog import write_synthetic_catalog

        with progress_callback("writing catalog shards") as progress:
            try:
                shards = write_synthetic_catalog(catalog, dump, chunk_lines, workers, progress)
            except PgmrMemoryError as exc:
                print_error(exc)
                raise typer.Exit(2) from None
        out.print(f"{catalog}: {what} in {shards:,} shards")
        return
    assert out_file is not None
    written = write_synthetic_dump(out_file, dump, workers=workers)
    out.print(f"{out_file}: {what}, {written:,} bytes")
