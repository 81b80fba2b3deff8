"""`pgmr memory build --from-rdf FILE` / `--from-endpoint URL`: a memory of any RDF graph (docs/own-graph.md).

The options live here, and the build: the graph's catalog is read whole (files streamed by pyoxigraph, an
endpoint page by page) before anything is encoded, so a broken file or an endpoint that gives up leaves no
memory behind, and the memory is then written as every memory is (atomically, same format, same encoder).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from pgmr.cli.common import console, out, print_error, progress_callback
from pgmr.kg.catalog import CatalogError
from pgmr.kg.graph import ANY_LANGUAGE, DEFAULT_LANGUAGES, UNTAGGED, GraphCatalog, GraphSettings

FROM_RDF_OPTION = typer.Option(
    None,
    "--from-rdf",
    help="An RDF file of your own graph (Turtle, N-Triples, N-Quads, TriG, N3, RDF/XML; optionally .gz); "
    "repeat for several files. Every IRI with a label becomes an entry (docs/own-graph.md)",
)
FROM_ENDPOINT_OPTION = typer.Option(
    None, "--from-endpoint", help="A SPARQL endpoint URL of your own graph, read page by page"
)
LABEL_PREDICATE_OPTION = typer.Option(
    None,
    "--label-predicate",
    help="--from-rdf/--from-endpoint: a further label predicate (full IRI; repeat), after skos:prefLabel, "
    "rdfs:label, schema:name, dct:title, foaf:name",
)
DESCRIPTION_PREDICATE_OPTION = typer.Option(
    None,
    "--description-predicate",
    help="--from-rdf/--from-endpoint: a further description predicate (full IRI; repeat), after "
    "rdfs:comment, skos:definition, schema:description",
)
PAGE_SIZE_OPTION = typer.Option(10_000, "--page-size", min=1, help="--from-endpoint: rows per page")
ENDPOINT_TIMEOUT_OPTION = typer.Option(
    60.0, "--endpoint-timeout", min=0.1, help="--from-endpoint: seconds one page may take"
)
RETRIES_OPTION = typer.Option(
    3,
    "--retries",
    min=0,
    max=10,
    help="--from-endpoint: retries of a page after a 429, 5xx or lost connection",
)
PAGE_PAUSE_OPTION = typer.Option(
    0.0,
    "--page-pause",
    min=0.0,
    help="--from-endpoint: seconds to wait between pages (be kind to a shared endpoint)",
)


def languages_of(text: str | None) -> tuple[str, ...]:
    """`en,untagged,any` -> ("en", "", "*") (also accepts "" and "*" themselves)."""
    if text is None:
        return DEFAULT_LANGUAGES
    words = {"untagged": UNTAGGED, "none": UNTAGGED, "any": ANY_LANGUAGE}
    return tuple(words.get(x.strip().lower(), x.strip().lower()) for x in text.split(","))


def graph_settings(
    languages: str | None, labels: list[str] | None, descriptions: list[str] | None
) -> GraphSettings:
    """The settings, checked at the edge: a usage error (exit 2) names the bad value."""
    try:
        return GraphSettings(languages=languages_of(languages)).with_extra(labels or (), descriptions or ())
    except ValueError as exc:
        print_error(exc)
        raise typer.Exit(2) from None


def check_sources(dump: Path | None, files: list[Path] | None, endpoint: str | None) -> None:
    if sum(bool(x) for x in (dump, files, endpoint)) > 1:
        print_error("give one of --from-dump, --from-rdf and --from-endpoint")
        raise typer.Exit(2)


def read_graph(
    files: list[Path] | None,
    endpoint: str | None,
    settings: GraphSettings,
    *,
    page_size: int,
    timeout: float,
    retries: int,
    pause: float,
) -> GraphCatalog:
    """The catalog of the files or the endpoint; exits 2 with the reason when it cannot be read whole."""
    from pgmr.stores import HttpSparqlStore, StoreError
    from pgmr.stores.graph_pages import PageSettings, read_endpoint

    try:
        if files:
            from pgmr.kg.rdf import read_rdf_files

            with progress_callback("reading triples") as progress:
                return read_rdf_files(files, settings, progress)
        assert endpoint is not None
        paging = PageSettings(page_size=page_size, timeout=timeout, pause=pause)
        with (
            HttpSparqlStore(endpoint, timeout=timeout, retries=retries) as store,
            progress_callback(f"reading {endpoint}") as progress,
        ):
            return read_endpoint(store, endpoint, settings, paging, progress)
    except (CatalogError, StoreError, ValueError) as exc:
        print_error(f"{exc}; no memory was written")
        raise typer.Exit(2) from None


def build_from_graph(catalog: GraphCatalog, target: Path, **build: Any) -> None:
    """Encode and write the memory; print what it holds."""
    from pgmr.memory import Memory, PgmrMemoryError, build_encoder

    counts = catalog.counts()
    console.print(
        f"graph: {len(catalog):,} labelled IRIs ({counts['class']:,} classes, {counts['property']:,} "
        f"properties, {counts['instance']:,} instances), {len(catalog.prefixes)} prefixes"
    )
    text_encoder = build_encoder(build.pop("encoder"), build.pop("precision", "auto"))
    try:
        with progress_callback("encoding texts") as progress:
            memory = Memory.build(catalog, target, text_encoder, progress=progress, **build)
    except PgmrMemoryError as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    table = Table(title=f"memory of {', '.join(catalog.sources)} written to {target}")
    table.add_column("measure")
    table.add_column("value", justify="right")
    for kind, what in (("entity", "classes and instances"), ("relation", "properties")):
        d = memory.dictionary(kind)  # type: ignore[arg-type]
        table.add_row(f"{kind} IRIs / rows ({what})", f"{len(d):,} / {len(d.rows):,}")
    stats = memory.build_stats
    if stats:
        table.add_row("texts (encoded / cached)", f"{stats.texts:,} ({stats.encoded:,} / {stats.cached:,})")
        table.add_row("seconds (encoding / total)", f"{stats.encode_seconds:.1f} / {stats.seconds:.1f}")
    out.print(table)


__all__ = [
    "DESCRIPTION_PREDICATE_OPTION",
    "ENDPOINT_TIMEOUT_OPTION",
    "FROM_ENDPOINT_OPTION",
    "FROM_RDF_OPTION",
    "LABEL_PREDICATE_OPTION",
    "PAGE_PAUSE_OPTION",
    "PAGE_SIZE_OPTION",
    "RETRIES_OPTION",
    "build_from_graph",
    "check_sources",
    "graph_settings",
    "languages_of",
    "read_graph",
]
