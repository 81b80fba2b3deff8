"""Acceptance (#20): model output with a SERVICE clause never makes pgmr call the endpoint it names.

A real HTTP server on 127.0.0.1 records every request it gets and answers each like a SPARQL endpoint (an
empty solution), so that a call would succeed and could not hide behind an error. Texts naming it in SERVICE
clauses go through every entry point that parses or checks SPARQL (the intermediate-query parser, the gate,
the stores' gate, the pipeline) and through the embedded store, which refuses them unless allowed; a control
test shows the same endpoint does get requests when SERVICE is allowed, so "0 requests" means something.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pgmr.pipeline import Pipeline, PipelineConfig
from pgmr.query import IntermediateQueryError, parse
from pgmr.query.errors import InvalidSparqlError
from pgmr.query.gate import check_query, is_valid_query
from pgmr.query.gate import prepare_query as gate_prepare_query
from pgmr.stores import (
    HttpSparqlStore,
    OxigraphStore,
    QuerySyntaxError,
    ServiceRefusedError,
    StoreError,
    ensure_read_only,
    prepare_query,
    service_calls,
)
from pgmr.testing import ScriptedGenerator

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
ANSWER = b'{"head": {"vars": []}, "results": {"bindings": [{}]}}'


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    body: bytes


class RecordingEndpoint:
    """A loopback HTTP server that records every request and answers it with one empty SPARQL solution."""

    def __init__(self) -> None:
        self.requests: list[Request] = []
        self._lock = threading.Lock()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def _record(self, body: bytes) -> None:
                with endpoint._lock:
                    endpoint.requests.append(Request(self.command, self.path, body))
                self.send_response(200)
                self.send_header("Content-Type", "application/sparql-results+json")
                self.send_header("Content-Length", str(len(ANSWER)))
                self.end_headers()
                self.wfile.write(ANSWER)

            def do_GET(self) -> None:
                self._record(b"")

            def do_POST(self) -> None:
                self._record(self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05})
        self._thread.daemon = True
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/sparql"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


@pytest.fixture(scope="module")
def recorder() -> Iterator[RecordingEndpoint]:
    server = RecordingEndpoint()
    yield server
    server.close()


@pytest.fixture
def endpoint(recorder: RecordingEndpoint) -> Iterator[RecordingEndpoint]:
    recorder.requests.clear()
    yield recorder
    # Oxigraph calls SERVICE endpoints from its own threads; a late request would still be counted here.
    recorder.requests.clear()


# SERVICE clauses as a model could write them. {url}: the recording endpoint, {base}: its root.
QUERIES = {
    "select": "SELECT ?o WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
    "ask": "ASK {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",  # oxigraph evaluates an ASK while parsing it
    "silent": "SELECT * WHERE {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}",
    "lower case": "select * where {{ service <{url}> {{ ?s ?p ?o }} }}",
    "mixed case, no spaces": "ASK{{SeRvIcE<{url}>{{?s ?p ?o}}}}",
    "construct": "CONSTRUCT {{ ?s ?p ?o }} WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }}",
    "prefixed name": "PREFIX e: <{base}/> ASK {{ SERVICE e:sparql {{ ?s ?p ?o }} }}",
    "variable": "SELECT * WHERE {{ VALUES ?e {{ <{url}> }} SERVICE ?e {{ ?s ?p ?o }} }}",
    "comment between": "ASK {{ SERVICE # where to\n <{url}> {{ ?s ?p ?o }} }}",
    "in OPTIONAL": "SELECT * WHERE {{ BIND(1 AS ?x) OPTIONAL {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
    "in FILTER EXISTS": "ASK {{ BIND(1 AS ?x) FILTER EXISTS {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }}",
    "in a subquery": "SELECT ?o WHERE {{ {{ SELECT ?o WHERE {{ SERVICE <{url}> {{ ?s ?p ?o }} }} }} }}",
    "undeclared prefix": "SELECT ?o WHERE {{ ?c rdfs:label ?l . SERVICE <{url}> {{ ?c ?p ?o }} }}",
}
# pgmr's lexer misreads these (an escaped IRI or `\#` name reads to it as the start of a comment), so they hide
# the keyword from it; pyoxigraph runs them (and calls the endpoint) once given them.
HIDDEN = {
    "after an escaped IRI": "ASK {{ BIND(<http://a/\\u0041#x> AS ?z) SERVICE <{url}> {{ ?s ?p ?o }} }}",
    "after a \\# name": "PREFIX ex: <http://a/> ASK {{ VALUES ?z {{ ex:a\\#x }} SERVICE <{url}> {{ ?s ?p ?o }} }}",
}
INTERMEDIATE = (
    "SELECT ?x ?o WHERE {{ wd:entity0 wdt:relation0 ?x . SERVICE <{url}> {{ ?x ?p ?o }} }}\n"
    "entity0 = [ENT] Paris [/ENT] capital city of France\n"
    "relation0 = [REL] capital of [/REL]"
)


def _text(template: str, endpoint: RecordingEndpoint) -> str:
    return template.format(url=endpoint.url, base=f"http://127.0.0.1:{endpoint.port}")


def _all_texts() -> dict[str, str]:
    return {**QUERIES, **{f"hidden: {k}": v for k, v in HIDDEN.items()}}


# --- the control: the endpoint records calls, and pyoxigraph does call it ----------------------------------


@pytest.mark.parametrize("name", ["select", "ask", "prefixed name", "hidden: after an escaped IRI"])
def test_control_the_embedded_store_calls_the_endpoint_when_allowed(
    endpoint: RecordingEndpoint, name: str
) -> None:
    # Without the refusal, running model output on the embedded store sends it to any address it names.
    text = _text(_all_texts()[name], endpoint)
    store = OxigraphStore.in_memory(allow_service=True)
    if name.startswith("hidden"):
        # The gate refuses what it cannot read safely, even where SERVICE is allowed; pyoxigraph alone runs it.
        with pytest.raises(QuerySyntaxError):
            store.query(text)
        import pyoxigraph

        pyoxigraph.Store().query(text)
    else:
        result = store.query(text)
        assert result.boolean or len(result) == 1
    assert len(endpoint.requests) >= 1
    assert endpoint.requests[0].method in ("GET", "POST") and endpoint.requests[0].path.startswith("/sparql")


# --- checking and parsing never call out ---------------------------------------------------------------------


@pytest.mark.parametrize("name", list(_all_texts()))
def test_the_gate_sends_nothing(endpoint: RecordingEndpoint, name: str) -> None:
    text = _text(_all_texts()[name], endpoint)
    if name.startswith("hidden"):
        # Fail closed: a SERVICE the lexer cannot see reaches the parser masked, and no longer parses.
        assert not is_valid_query(text)
        with pytest.raises(InvalidSparqlError):
            check_query(text)
    else:
        assert gate_prepare_query(text).form in ("select", "ask", "construct")
        check_query(text)
        assert is_valid_query(text)
    assert endpoint.requests == []


@pytest.mark.parametrize("name", list(_all_texts()))
def test_the_stores_gate_sends_nothing(endpoint: RecordingEndpoint, name: str) -> None:
    text = _text(_all_texts()[name], endpoint)
    if name.startswith("hidden"):
        with pytest.raises(QuerySyntaxError):
            prepare_query(text)
    else:
        assert prepare_query(text).text.endswith(text)
        ensure_read_only(text)
    assert endpoint.requests == []


@pytest.mark.parametrize("name", list(_all_texts()))
def test_parsing_model_output_sends_nothing(endpoint: RecordingEndpoint, name: str) -> None:
    text = _text(_all_texts()[name], endpoint)
    if name.startswith("hidden"):
        with pytest.raises(IntermediateQueryError):
            parse(text)
    else:
        parse(text)
    assert endpoint.requests == []


def test_parsing_an_intermediate_query_with_a_service_clause_sends_nothing(
    endpoint: RecordingEndpoint,
) -> None:
    query = parse(_text(INTERMEDIATE, endpoint))
    assert query.names == ("entity0", "relation0")
    assert f"SERVICE <{endpoint.url}>" in query.skeleton
    assert endpoint.requests == []


# --- the embedded store refuses SERVICE ----------------------------------------------------------------------


@pytest.mark.parametrize("name", list(QUERIES))
def test_the_embedded_store_refuses_service_clauses(endpoint: RecordingEndpoint, name: str) -> None:
    text = _text(QUERIES[name], endpoint)
    store = OxigraphStore.in_memory()
    with pytest.raises(ServiceRefusedError) as info:
        store.query(text)
    error = info.value
    assert isinstance(error, StoreError) and error.code == "service_refused"
    assert "is refused: the embedded oxigraph store would send a request" in str(error)
    assert "allow_service=True" in str(error)
    named = {"prefixed name": "e:sparql", "variable": "?e"}.get(name, f"<{endpoint.url}>")
    assert error.endpoints == (named,) and named in str(error)
    assert endpoint.requests == []
    assert store.query("ASK { }").boolean is True  # the store stays usable


def test_stores_from_files_and_directories_refuse_too(endpoint: RecordingEndpoint, tmp_path: Path) -> None:
    kg = tmp_path / "kg.nt"
    kg.write_text(f"<{WD}Q64> <{WDT}P31> <{WD}Q515> .\n", encoding="utf-8")
    with OxigraphStore.open(tmp_path / "store", read_only=False) as writable:
        writable.load(kg)
    text = f"SELECT ?o WHERE {{ wd:Q64 wdt:P31 ?c . SERVICE <{endpoint.url}> {{ ?c ?p ?o }} }}"
    for store in (OxigraphStore.from_file(kg), OxigraphStore.open(tmp_path / "store")):
        with store, pytest.raises(ServiceRefusedError):
            store.query(text)
    assert endpoint.requests == []
    # Opened with the option, the same query runs and reaches the endpoint.
    with OxigraphStore.from_file(kg, allow_service=True) as allowed:
        allowed.query(text)
    assert len(endpoint.requests) == 1


@pytest.mark.parametrize(
    "query",
    [
        'SELECT ?service WHERE { ?service rdfs:label "customer service"@en }',
        "SELECT * WHERE { ?s <http://example.org/Service> ?o } # no SERVICE call here",
        "PREFIX service: <http://example.org/> ASK { service:a service:b ?o }",
        'ASK { ?s ?p "SERVICE <http://127.0.0.1:1/sparql> { }" }',
        "SELECT ?x WHERE { ?x rdfs:label ?l FILTER(CONTAINS(LCASE(?l), 'train service')) }",
    ],
)
def test_the_word_service_elsewhere_is_not_refused(endpoint: RecordingEndpoint, query: str) -> None:
    assert service_calls(prepare_query(query).text) == ()
    result = OxigraphStore.in_memory().query(query)
    assert result.kind in ("bindings", "boolean")
    assert endpoint.requests == []


@pytest.mark.parametrize("name", list(HIDDEN))
def test_a_service_clause_hidden_from_the_lexer_is_still_found(
    endpoint: RecordingEndpoint, name: str
) -> None:
    # The gate already refuses these; the store's own check must not depend on the lexer either.
    assert service_calls(_text(HIDDEN[name], endpoint)) == ("",)
    assert endpoint.requests == []


# --- a SPARQL endpoint evaluates SERVICE itself ------------------------------------------------------------


def test_the_http_store_sends_the_query_to_its_endpoint_only(endpoint: RecordingEndpoint) -> None:
    # Whether an endpoint runs SERVICE is its own policy: pgmr passes the text on and calls nothing else.
    other = RecordingEndpoint()
    try:
        with HttpSparqlStore(endpoint.url, timeout=5.0, retries=0) as store:
            result = store.query(f"SELECT * WHERE {{ SERVICE <{other.url}> {{ ?s ?p ?o }} }}")
        assert len(result) == 1
        assert len(endpoint.requests) == 1 and other.requests == []
    finally:
        other.close()


# --- the pipeline ---------------------------------------------------------------------------------------------

PARIS = "What is Paris the capital of?"


@pytest.fixture(scope="module")
def memory(encoder: Any) -> Any:
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory

    catalog = LabelCatalog(
        [
            CatalogEntry("Q90", "Paris", "capital city of France"),
            CatalogEntry("Q142", "France", "country in Western Europe"),
            CatalogEntry("P1376", "capital of", "country or region of which the place is the seat"),
        ]
    )
    return Memory.build_in_memory(catalog, encoder, progress=False)


@pytest.fixture(scope="module")
def kg_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(f"<{WD}Q90> <http://www.wikidata.org/prop/direct/P1376> <{WD}Q142> .\n", encoding="utf-8")
    return path


def _pipeline(
    memory: Any, store: OxigraphStore | None, generator: ScriptedGenerator | None = None
) -> Pipeline:
    return Pipeline(generator, memory, store=store, config=PipelineConfig(min_confidence=0.0, timeout=5.0))


def test_the_pipeline_resolves_it_without_calling_out(
    endpoint: RecordingEndpoint, memory: Any, kg_file: Path
) -> None:
    pipeline = _pipeline(memory, OxigraphStore.from_file(kg_file))
    try:
        result = pipeline.resolve_text(_text(INTERMEDIATE, endpoint), question=PARIS, execute=False)
        assert result.status == "resolved", result.reason
        assert result.sparql is not None and f"SERVICE <{endpoint.url}>" in result.sparql
        assert "wd:Q90" in result.sparql and "wdt:P1376" in result.sparql
        for name, template in QUERIES.items():
            skipped = pipeline.resolve_text(_text(template, endpoint), execute=False)
            assert skipped.status == "resolved", (name, skipped.reason)
        for template in HIDDEN.values():
            hidden = pipeline.resolve_text(_text(template, endpoint), execute=False)
            assert hidden.status == "invalid" and hidden.sparql is None
    finally:
        pipeline.close()
    assert endpoint.requests == []


def test_the_pipeline_refuses_to_run_it_on_the_embedded_store(
    endpoint: RecordingEndpoint, memory: Any, kg_file: Path
) -> None:
    text = _text(INTERMEDIATE, endpoint)
    pipeline = _pipeline(memory, OxigraphStore.from_file(kg_file), ScriptedGenerator({PARIS: text}))
    try:
        for result in (pipeline.resolve_text(text, question=PARIS), pipeline.ask(PARIS)):
            assert result.status == "invalid" and result.error is not None, result
            assert result.error.code == "service_refused"
            assert "SERVICE" in result.error.message and "is refused" in result.error.message
            assert result.answers == ()
    finally:
        pipeline.close()
    assert endpoint.requests == []
    # The control: the same pipeline over a store that allows SERVICE does call the endpoint.
    allowed = _pipeline(memory, OxigraphStore.from_file(kg_file, allow_service=True))
    try:
        assert allowed.resolve_text(text, question=PARIS).status in ("answered", "empty")
    finally:
        allowed.close()
    assert endpoint.requests
