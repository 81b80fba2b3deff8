"""The SPARQL store seam (`SparqlStore`: one read-only `query()`), its result and error types, and its backends:
embedded oxigraph (`oxigraph_store`) and any SPARQL 1.1 protocol endpoint (`http_store`).

Every backend sends its text through the one SPARQL gate (`pgmr.query.gate`) first, so an UPDATE or a text
that does not parse never reaches a store, and a SERVICE clause is never evaluated while checking. The
embedded store also refuses to run SERVICE clauses (`ServiceRefusedError`) unless opened with
`allow_service=True`: pyoxigraph would call the endpoint they name from this machine.
"""

from __future__ import annotations

import re
from pathlib import Path

from pgmr.query.gate import PreparedQuery, QueryForm
from pgmr.stores.base import (
    GRAPH_VARIABLES,
    RDF_LANG_STRING,
    XSD_STRING,
    QueryResult,
    QuerySyntaxError,
    ReadOnlyError,
    ResultKind,
    ServiceRefusedError,
    SparqlStore,
    StoreBadResponse,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    Term,
    TermKind,
    ensure_read_only,
    prepare_query,
    service_calls,
    shorten_iri,
    term_from_oxigraph,
)
from pgmr.stores.http_store import HttpSparqlStore
from pgmr.stores.oxigraph_store import LoadProgress, OxigraphStore

RDF_SUFFIXES = (".nt", ".ttl", ".nq", ".trig", ".n3", ".rdf", ".owl", ".xml", ".jsonld")


def default_kg_file(data_dir: Path) -> Path:
    """The small N-Triples graph derived from QALD-10 gold answers (196 triples), for end-to-end tests."""
    return Path(data_dir) / "kg" / "qald10_answer_derived.nt"


def is_rdf_file(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in RDF_SUFFIXES


# Public Wikidata endpoints by name (`--store wdqs`). WDQS stops a query after 60 s on its side and answers 429
# with Retry-After to clients that send too much; the HTTP store waits as asked and names itself by User-Agent,
# as the Wikimedia policy requires. QLever's Wikidata endpoint answers the same SPARQL, usually faster on large
# joins, without the WDQS-only `SERVICE wikibase:label`.
STORE_PRESETS: dict[str, str] = {
    "wdqs": "https://query.wikidata.org/sparql",
    "qlever-wikidata": "https://qlever.cs.uni-freiburg.de/api/wikidata",
}


def open_store(spec: str | Path, *, timeout: float = 30.0) -> SparqlStore:
    """Open a store from a spec.

    - a preset name (`wdqs`, `qlever-wikidata`: STORE_PRESETS): that public Wikidata endpoint;
    - `http://...` / `https://...`: a SPARQL 1.1 protocol endpoint (HttpSparqlStore);
    - a directory, or `oxigraph:DIR`: an existing on-disk oxigraph store, opened read-only;
    - an RDF file (.nt, .ttl, .nq, ..., optionally .gz): an in-memory oxigraph store loaded from it.
    `timeout` (seconds) becomes the store's default per-query timeout.
    """
    text = str(spec).strip()
    if not text:
        raise StoreError("empty store spec: give an http(s) endpoint URL, a store directory or an RDF file")
    if timeout is None or timeout <= 0:
        raise StoreError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(spec, str) and text.lower() in STORE_PRESETS:
        return HttpSparqlStore(STORE_PRESETS[text.lower()], timeout=timeout)
    if isinstance(spec, str) and re.match(r"^https?://", text, re.IGNORECASE):
        return HttpSparqlStore(text, timeout=timeout)
    if isinstance(spec, str) and text.startswith("oxigraph:"):
        return OxigraphStore.open(
            Path(text[len("oxigraph:") :]).expanduser(), read_only=True, timeout=timeout
        )
    path = Path(text).expanduser()
    if path.is_dir():
        return OxigraphStore.open(path, read_only=True, timeout=timeout)
    if not path.exists():
        raise StoreError(
            f"store {text!r} not found: give a preset ({', '.join(STORE_PRESETS)}), an http(s) endpoint URL, "
            "an oxigraph store directory or an RDF file (.nt, .ttl, .nq, optionally .gz)"
        )
    if not is_rdf_file(path):
        raise StoreError(
            f"{path} is not an RDF file pgmr can load (suffixes: {', '.join(RDF_SUFFIXES)}, .gz)"
        )
    return OxigraphStore.from_file(path, timeout=timeout)


__all__ = [
    "GRAPH_VARIABLES",
    "RDF_LANG_STRING",
    "RDF_SUFFIXES",
    "STORE_PRESETS",
    "XSD_STRING",
    "HttpSparqlStore",
    "LoadProgress",
    "OxigraphStore",
    "PreparedQuery",
    "QueryForm",
    "QueryResult",
    "QuerySyntaxError",
    "ReadOnlyError",
    "ResultKind",
    "ServiceRefusedError",
    "SparqlStore",
    "StoreBadResponse",
    "StoreError",
    "StoreTimeout",
    "StoreUnavailable",
    "Term",
    "TermKind",
    "default_kg_file",
    "ensure_read_only",
    "is_rdf_file",
    "open_store",
    "prepare_query",
    "service_calls",
    "shorten_iri",
    "term_from_oxigraph",
]
