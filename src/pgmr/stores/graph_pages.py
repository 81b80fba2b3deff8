"""A graph's label catalog (pgmr.kg.graph) read from a SPARQL endpoint, page by page.

Five SELECTs, each paged with ORDER BY / LIMIT / OFFSET (an order makes the pages of a live endpoint
disjoint): the labels and descriptions (only the predicates the settings name), the types of labelled
subjects, the schema triples (`rdfs:subClassOf`, `subPropertyOf`, `domain`, `range`), and the labelled IRIs
used as predicates and as classes. Nothing else of the graph is fetched.

Politeness is the HTTP store's (pgmr.stores.http_store): a User-Agent naming pgmr, a timeout per page, 429 and
5xx retried with exponential backoff (and Retry-After honoured); `pause` adds a wait between pages. A page that
still fails raises its `StoreError`, and since the catalog is returned only once every page is in, no memory is
ever built from part of a graph.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from pgmr.kg.graph import RDF_TYPE, RDFS, GraphCatalog, GraphCatalogBuilder, GraphSettings, GraphTerm
from pgmr.kg.rdf import finish
from pgmr.stores.base import SparqlStore, StoreError, Term

DEFAULT_PAGE_SIZE = 10_000
# progress(rows read so far, 0: the total is not known)
RowProgress = Callable[[int, int], None]
_SCHEMA = ("subClassOf", "subPropertyOf", "domain", "range")


@dataclass(frozen=True)
class PageSettings:
    """How to read an endpoint: rows per page, seconds per page, and a pause between pages."""

    page_size: int = DEFAULT_PAGE_SIZE
    timeout: float = 60.0
    pause: float = 0.0

    def __post_init__(self) -> None:
        if self.page_size < 1:
            raise ValueError(f"page_size must be positive, got {self.page_size}")
        if not self.timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {self.timeout}")
        if self.pause < 0:
            raise ValueError(f"pause must not be negative, got {self.pause}")


def _values(iris: Sequence[str]) -> str:
    return " ".join(f"<{iri}>" for iri in iris)


def queries(settings: GraphSettings) -> dict[str, str]:
    """The SELECTs (without their LIMIT/OFFSET), by what they read."""
    named = _values([*settings.label_predicates, *settings.alias_predicates])
    literal_predicates = _values(
        [*settings.label_predicates, *settings.alias_predicates, *settings.description_predicates]
    )
    labelled = f"FILTER EXISTS {{ VALUES ?lp {{ {named} }} ?x ?lp ?l }}"
    schema = _values([RDFS + name for name in _SCHEMA])
    return {
        "labels": (
            f"SELECT ?s ?p ?o WHERE {{ VALUES ?p {{ {literal_predicates} }} ?s ?p ?o . "
            "FILTER(isIRI(?s) && isLITERAL(?o)) } ORDER BY ?s ?p ?o"
        ),
        "types": (
            f"SELECT ?s ?o WHERE {{ ?s <{RDF_TYPE}> ?o . FILTER(isIRI(?s) && isIRI(?o)) "
            f"{labelled.replace('?x', '?s')} }} ORDER BY ?s ?o"
        ),
        "schema": (
            f"SELECT ?s ?p ?o WHERE {{ VALUES ?p {{ {schema} }} ?s ?p ?o . FILTER(isIRI(?s) && isIRI(?o)) }} "
            "ORDER BY ?s ?p ?o"
        ),
        "properties": (f"SELECT DISTINCT ?x WHERE {{ ?s ?x ?o . {labelled} }} ORDER BY ?x"),
        "classes": (
            f"SELECT DISTINCT ?x WHERE {{ ?s <{RDF_TYPE}> ?x . FILTER(isIRI(?x)) {labelled} }} ORDER BY ?x"
        ),
    }


def _pages(
    store: SparqlStore, query: str, paging: PageSettings, seen: list[int], progress: RowProgress | None
) -> Iterator[Mapping[str, Term]]:
    offset = 0
    while True:
        if offset and paging.pause:
            time.sleep(paging.pause)
        result = store.query(f"{query} LIMIT {paging.page_size} OFFSET {offset}", timeout=paging.timeout)
        if result.kind != "bindings":
            raise StoreError(f"the endpoint answered a SELECT with a {result.kind} result")
        yield from result.rows
        seen[0] += len(result.rows)
        if progress:
            progress(seen[0], 0)
        if len(result.rows) < paging.page_size:
            return
        offset += paging.page_size


def _term(term: Term | None) -> GraphTerm | None:
    if term is None or term.kind not in ("iri", "literal"):
        return None
    return GraphTerm(term.value, term.kind == "literal", term.language or "")


def read_endpoint(
    store: SparqlStore,
    source: str,
    settings: GraphSettings | None = None,
    paging: PageSettings | None = None,
    progress: RowProgress | None = None,
) -> GraphCatalog:
    """The catalog of the graph behind `store` (`source`: its URL, recorded in the catalog). Raises
    StoreError when a page fails for good, CatalogError when no IRI has a label."""
    settings = settings or GraphSettings()
    paging = paging or PageSettings()
    builder = GraphCatalogBuilder(settings)
    seen = [0]
    found = queries(settings)
    for name in ("labels", "types", "schema"):
        for row in _pages(store, found[name], paging, seen, progress):
            subject, obj = row.get("s"), _term(row.get("o"))
            predicate = row.get("p")
            if subject is None or subject.kind != "iri" or obj is None:
                continue
            builder.add(subject.value, predicate.value if predicate is not None else RDF_TYPE, obj)
    for name, kind in (("properties", "property"), ("classes", "class")):
        for row in _pages(store, found[name], paging, seen, progress):
            term = row.get("x")
            if term is not None and term.kind == "iri":
                builder.mark(term.value, kind)  # type: ignore[arg-type]
    return finish(builder, {}, [source])


__all__ = ["DEFAULT_PAGE_SIZE", "PageSettings", "queries", "read_endpoint"]
