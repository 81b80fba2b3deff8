"""The SPARQL store seam: the read-only gate, both backends (contract + specifics), open_store and `pgmr kg`."""

from __future__ import annotations

import gzip
import json
import socket
import threading
import time
from collections.abc import Iterator
from email.utils import formatdate
from pathlib import Path

import httpx
import pyoxigraph as ox
import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.stores import (
    HttpSparqlStore,
    LoadProgress,
    OxigraphStore,
    QueryResult,
    QuerySyntaxError,
    ReadOnlyError,
    ServiceRefusedError,
    SparqlStore,
    StoreBadResponse,
    StoreError,
    StoreTimeout,
    StoreUnavailable,
    Term,
    default_kg_file,
    ensure_read_only,
    open_store,
    prepare_query,
)
from pgmr.stores.http_store import USER_AGENT, retry_after_seconds
from pgmr.stores.oxigraph_store import term_from_oxigraph
from pgmr.testing.stores import CONTRACT_NT, CONTRACT_TRIPLES, SLOW_QUERY, WD, WDT, StoreContract
from sparql_server import Fault, FaultProxy, OxigraphServer

runner = CliRunner()


def _flat(text: str) -> str:
    """Rich wraps long lines at the test terminal's width; compare messages with whitespace collapsed."""
    return " ".join(text.split())


# --- the read-only gate -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "form"),
    [
        ("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 }", "select"),
        ("ask { wd:Q64 p:P31 ?s . ?s ps:P31 ?o ; pq:P580 ?t }", "ask"),
        ("CONSTRUCT WHERE { ?s schema:description ?o }", "construct"),
        ("DESCRIBE wd:Q64", "describe"),
        ("# leading comment\nPREFIX ex: <http://example.org/>\nSELECT * WHERE { ex:a ?p ?o }", "select"),
        # extension functions are valid SPARQL that oxigraph parses but cannot evaluate (found by the fuzzer)
        ("SELECT ?x WHERE { ?x rdfs:label ?l FILTER wd:(lang(?l) = 'en') }", "select"),
        (
            "ASK { ?x wdt:P625 ?c FILTER(<http://www.opengis.net/def/function/geosparql/distance>(?c, ?c) < 1) }",
            "ask",
        ),
        (
            "CONSTRUCT { ?x ?p ?o } WHERE { ?x ?p ?o BIND(<http://a/>(1) AS ?y) BIND(<http://b/>(?y) AS ?z) }",
            "construct",
        ),
    ],
)
def test_queries_pass_the_gate_with_their_form(query: str, form: str) -> None:
    ensure_read_only(query)
    assert prepare_query(query).form == form


def test_prepared_text_declares_only_missing_standard_prefixes() -> None:
    text = prepare_query("PREFIX wd: <http://www.wikidata.org/entity/> SELECT ?x { wd:Q64 wdt:P31 ?x }").text
    assert text.count("PREFIX wd:") == 1 and "PREFIX wdt: <http://www.wikidata.org/prop/direct/>" in text
    assert "PREFIX p:" not in text


@pytest.mark.parametrize(
    "update",
    [
        "insert data { <http://a> <http://b> <http://c> }",
        "LOAD <http://x/y.nt> INTO GRAPH <http://g>",
        "DROP SILENT ALL",
    ],
)
def test_updates_are_refused_with_a_clear_message(update: str) -> None:
    with pytest.raises(ReadOnlyError) as info:
        ensure_read_only(update)
    assert str(info.value).startswith("SPARQL UPDATE is refused: pgmr only reads")
    assert info.value.code == "read_only"


def test_syntax_errors_point_into_the_text_as_given() -> None:
    # Two undeclared prefixes are declared in front of the text; the position must not move by them.
    with pytest.raises(QuerySyntaxError) as info:
        ensure_read_only("SELECT ?x WHERE {\n  ?x wdt:P31 wd:Q5 .\n  FILTER( }")
    with pytest.raises(QuerySyntaxError) as plain:
        ensure_read_only(f"SELECT ?x WHERE {{\n  ?x <{WDT}P31> <{WD}Q5> .\n  FILTER( }}")
    assert info.value.line == plain.value.line == 3
    assert info.value.column == plain.value.column and info.value.column is not None
    assert f"line 3, column {info.value.column}" in str(info.value)
    assert "..=" not in str(info.value)  # oxigraph's character-class lists are dropped


@pytest.mark.parametrize(
    ("template", "form"),
    [
        ("ASK {{ SERVICE <{url}> {{ ?s ?p ?o }} }}", "ask"),
        ("SELECT * WHERE {{ SERVICE SILENT <{url}> {{ ?s ?p ?o }} }}", "select"),
        ("CONSTRUCT {{ ?s ?p ?o }} WHERE {{ service <{url}> {{ ?s ?p ?o }} }}", "construct"),
        ("SELECT * WHERE {{ VALUES ?e {{ <{url}> }} SERVICE ?e {{ ?s ?p ?o }} }}", "select"),
    ],
)
def test_the_gate_never_calls_a_service(contract_file_path: Path, template: str, form: str) -> None:
    with OxigraphServer(contract_file_path) as server, FaultProxy(server.query_url) as endpoint:
        query = template.format(url=endpoint.url)
        assert prepare_query(query).form == form
        assert endpoint.requests == []
        # The embedded store refuses to run it (pyoxigraph would call the endpoint from this machine) ...
        with pytest.raises(ServiceRefusedError, match="SERVICE .* is refused") as info:
            OxigraphStore.in_memory().query(query)
        assert info.value.code == "service_refused" and info.value.endpoints
        assert endpoint.requests == []
        if "SERVICE ?e" in query:
            return  # oxigraph cannot run a SERVICE named by a variable
        # ... unless told to: then the federated query runs, against a real endpoint that answers.
        result = OxigraphStore.in_memory(allow_service=True).query(query)
        assert endpoint.requests and (result.boolean or len(result) == CONTRACT_TRIPLES)


# --- values -------------------------------------------------------------------------------------------------


def test_terms_normalize_literals_like_sparql_json() -> None:
    assert Term.literal("x", "http://www.w3.org/2001/XMLSchema#string") == Term("literal", "x")
    assert Term.literal("x", "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString", "EN") == Term(
        "literal", "x", None, "en"
    )
    assert Term.iri(WD + "Q64").short() == "wd:Q64"
    assert Term.iri("http://example.org/a b").short() == "<http://example.org/a b>"
    three = Term.literal("3", "http://www.w3.org/2001/XMLSchema#integer")
    assert three.short() == '"3"^^xsd:integer'
    assert Term.literal('say "hi"\n', language="en").to_sparql() == '"say \\"hi\\"\\n"@en'


def test_query_results_round_trip_through_sparql_json() -> None:
    rows = (
        {"x": Term.iri(WD + "Q1"), "y": Term.literal("1", "http://www.w3.org/2001/XMLSchema#integer")},
        {"x": Term.bnode("b0"), "y": Term.literal("a", language="de")},
        {"x": Term.literal("plain")},
    )
    result = QueryResult("bindings", ("x", "y"), rows)
    assert QueryResult.from_json(json.loads(json.dumps(result.to_json()))) == result
    boolean = QueryResult("boolean", boolean=False)
    assert QueryResult.from_json(boolean.to_json()) == boolean
    legacy = {
        "head": {},
        "results": {"bindings": [{"v": {"type": "typed-literal", "value": "2", "datatype": "urn:t"}}]},
    }
    assert QueryResult.from_json(legacy).values() == [Term("literal", "2", "urn:t")]
    with pytest.raises(ValueError):
        QueryResult.from_json({"head": {"vars": ["x"]}})


def test_sparql_json_output_is_read_by_an_independent_parser() -> None:
    triple = Term("triple", f'<<( <{WD}Q64> <{WDT}P31> "x"@en )>>')
    rows = (
        {"x": Term.iri(WD + "Q1")},
        {"x": Term.bnode("b0")},
        {"x": Term.literal("a", language="de")},
        {"x": triple},
    )
    text = json.dumps(QueryResult("bindings", ("x",), rows).to_json())
    solutions = list(ox.parse_query_results(text, ox.QueryResultsFormat.JSON))
    assert [term_from_oxigraph(s["x"]) for s in solutions] == [r["x"] for r in rows]
    assert str(solutions[3]["x"].subject) == f"<{WD}Q64>"
    assert Term.from_json(triple.to_json()) == triple


# --- the embedded backend -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def contract_file_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kg") / "contract.nt"
    path.write_text(CONTRACT_NT, encoding="utf-8")
    return path


class TestInMemoryOxigraph(StoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, contract_file: Path) -> Iterator[SparqlStore]:
        with OxigraphStore.from_file(contract_file) as store:
            yield store


class TestOnDiskOxigraphReopenedReadOnly(StoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, contract_file: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SparqlStore]:
        directory = tmp_path_factory.mktemp("store") / "kg"
        with OxigraphStore.open(directory, read_only=False) as writable:
            assert writable.load(contract_file) == CONTRACT_TRIPLES
        with OxigraphStore.open(directory) as store:
            assert store.read_only
            yield store


def _turtle() -> str:
    return (
        "@prefix wd: <http://www.wikidata.org/entity/> .\n@prefix wdt: <http://www.wikidata.org/prop/direct/> .\n"
        "wd:Q64 wdt:P31 wd:Q515 ; wdt:P17 wd:Q183 .\nwd:Q1055 wdt:P31 wd:Q515 .\n"
    )


def test_load_gzipped_ntriples_and_turtle_with_progress(tmp_path: Path, contract_file_path: Path) -> None:
    gz = tmp_path / "contract.nt.gz"
    gz.write_bytes(gzip.compress(contract_file_path.read_bytes()))
    ttl = tmp_path / "more.ttl"
    ttl.write_text(_turtle(), encoding="utf-8")
    reports: list[LoadProgress] = []
    with OxigraphStore.open(tmp_path / "store", read_only=False) as store:
        assert store.load(gz, progress=reports.append) == CONTRACT_TRIPLES
        assert store.load(ttl, progress=reports.append) == 3
        assert len(store) == CONTRACT_TRIPLES + 1  # two of the three were already there
        assert store.query("ASK { wd:Q64 wdt:P17 wd:Q183 }").boolean is True
    final = [r for r in reports if r.bytes_read == r.total_bytes]
    assert [(r.path, r.triples) for r in final] == [(gz, CONTRACT_TRIPLES), (ttl, 3)]
    assert final[0].total_bytes == gz.stat().st_size


def test_load_nquads_keeps_named_graphs(tmp_path: Path) -> None:
    nq = tmp_path / "data.nq"
    nq.write_text(f"<{WD}Q64> <{WDT}P31> <{WD}Q515> <http://example.org/g> .\n", encoding="utf-8")
    store = OxigraphStore.in_memory()
    assert store.load(nq) == 1
    assert store.query("ASK { GRAPH <http://example.org/g> { wd:Q64 wdt:P31 wd:Q515 } }").boolean is True
    assert store.query("ASK { wd:Q64 wdt:P31 wd:Q515 }").boolean is False  # the default graph stays standard


def test_load_errors_are_store_errors(tmp_path: Path) -> None:
    store = OxigraphStore.in_memory()
    bad = tmp_path / "bad.nt"
    bad.write_text(f"<{WD}Q1> <{WDT}P31> <{WD}Q5> .\n<{WD}Q2> <{WDT}P31> oops .\n", encoding="utf-8")
    with pytest.raises(StoreError, match=r"bad\.nt: not valid"):
        store.load(bad)
    with pytest.raises(StoreError, match="not found"):
        store.load(tmp_path / "missing.nt")
    odd = tmp_path / "data.csv"
    odd.write_text("a,b\n", encoding="utf-8")
    with pytest.raises(StoreError, match="cannot tell the RDF format"):
        store.load(odd)
    with pytest.raises(StoreError, match="unknown RDF format"):
        store.load(odd, "csv")
    ttl_named_txt = tmp_path / "graph.txt"
    ttl_named_txt.write_text(_turtle(), encoding="utf-8")
    assert store.load(ttl_named_txt, "turtle") == 3


def test_read_only_store_refuses_loading_and_missing_store_is_reported(tmp_path: Path) -> None:
    with OxigraphStore.open(tmp_path / "s", read_only=False) as store:
        store.load(_write(tmp_path / "a.ttl", _turtle()))
    with OxigraphStore.open(tmp_path / "s") as store, pytest.raises(StoreError, match="read-only"):
        store.load(tmp_path / "a.ttl")
    with pytest.raises(StoreError, match="no oxigraph store"):
        OxigraphStore.open(tmp_path / "nothing-here")
    (tmp_path / "empty").mkdir()
    with pytest.raises(StoreError, match="cannot open"):
        OxigraphStore.open(tmp_path / "empty")


def test_evaluation_errors_in_the_worker_thread_are_store_errors() -> None:
    # A failing federated call: the error crosses from the query worker thread to the caller; pyoxigraph
    # aborts the process if its result objects die on another thread, so this must also not crash.
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    store = OxigraphStore.in_memory(allow_service=True)
    for _ in range(2):
        with pytest.raises(StoreError, match="query failed in the embedded store"):
            store.query(f"SELECT * WHERE {{ SERVICE <http://127.0.0.1:{port}/sparql> {{ ?s ?p ?o }} }}")
    assert store.query("ASK { }").boolean is True


def test_abandoned_streaming_query_stops_its_worker(contract_file_path: Path) -> None:
    store = OxigraphStore.from_file(contract_file_path)
    before = set(threading.enumerate())
    with pytest.raises(StoreTimeout, match="within 0.2 s"):
        store.query(SLOW_QUERY, timeout=0.2)
    (worker,) = [t for t in threading.enumerate() if t not in before and t.name == "pgmr-oxigraph-query"]
    worker.join(timeout=2.0)
    assert not worker.is_alive()


def test_closed_store_refuses_queries() -> None:
    store = OxigraphStore.in_memory()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.query("ASK { ?s ?p ?o }")


def test_no_timeout_runs_in_the_calling_thread(contract_file_path: Path) -> None:
    store = OxigraphStore.from_file(contract_file_path, timeout=None)
    assert len(store.query("SELECT * WHERE { ?s ?p ?o }")) == CONTRACT_TRIPLES


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# --- the HTTP backend ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def endpoint(contract_file_path: Path) -> Iterator[FaultProxy]:
    """The real Oxigraph server (the `oxigraph` package) behind the fault-injecting proxy of tests/."""
    with OxigraphServer(contract_file_path) as server, FaultProxy(server.query_url) as proxy:
        yield proxy


@pytest.fixture
def fresh(endpoint: FaultProxy) -> Iterator[FaultProxy]:
    endpoint.reset()
    yield endpoint
    endpoint.reset()


@pytest.fixture
def client(fresh: FaultProxy) -> Iterator[HttpSparqlStore]:
    with HttpSparqlStore(fresh.url, timeout=5.0, retries=2, backoff=0.01) as store:
        yield store


class TestHttpStore(StoreContract):
    @pytest.fixture(scope="class")
    @classmethod
    def store(cls, contract_file: Path) -> Iterator[SparqlStore]:
        with (
            OxigraphServer(contract_file) as server,
            HttpSparqlStore(server.query_url, timeout=5.0, backoff=0.01) as store,
        ):
            yield store


def test_user_agent_and_accept_reach_the_server(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    client.query("SELECT ?x WHERE { ?x wdt:P31 wd:Q515 }")
    client.query("CONSTRUCT WHERE { ?x wdt:P31 wd:Q515 }")
    select, construct = fresh.requests
    assert select.headers["User-Agent"] == USER_AGENT
    assert USER_AGENT.startswith("pgmr/0.") and "KGQA toolkit" in USER_AGENT
    assert select.headers["Accept"].startswith("application/sparql-results+json")
    assert construct.headers["Accept"].startswith("application/n-triples")
    assert select.method == "GET" and "PREFIX wdt:" in (select.query or "")


def test_long_queries_go_by_post(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    filters = " ".join(f"FILTER(?o != {i})" for i in range(300))
    result = client.query(f"SELECT ?s WHERE {{ ?s wdt:P31 ?o {filters} }}")
    assert len(result) == 2
    assert [r.method for r in fresh.requests] == ["POST"]


def test_updates_never_reach_the_server(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    with pytest.raises(ReadOnlyError):
        client.query("INSERT DATA { wd:Q1 wdt:P31 wd:Q5 }")
    assert fresh.requests == []


def test_retries_503_then_succeeds(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.fail(503, times=2)
    assert client.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True
    assert len(fresh.requests) == 3


def test_429_waits_as_long_as_retry_after_asks(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.fail(429, retry_after=0.4)
    started = time.monotonic()
    assert client.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True
    assert time.monotonic() - started >= 0.4
    assert len(fresh.requests) == 2


def test_retry_after_longer_than_the_limit_gives_up_at_once(fresh: FaultProxy) -> None:
    fresh.fail(429, retry_after=120)
    with HttpSparqlStore(fresh.url, retries=3, backoff=0.01, max_retry_wait=5) as store:
        started = time.monotonic()
        with pytest.raises(StoreUnavailable, match="retry in 120 s"):
            store.query("ASK { ?s ?p ?o }")
    assert time.monotonic() - started < 2 and len(fresh.requests) == 1


def test_unavailable_after_retries(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.fail(503, times=3, body="Service Unavailable: maintenance")
    with pytest.raises(
        StoreUnavailable, match="HTTP 503: Service Unavailable: maintenance .gave up after 3 attempts"
    ):
        client.query("ASK { ?s ?p ?o }")
    assert len(fresh.requests) == 3


def test_slow_answer_is_a_timeout_not_retried(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.delay(2.0)
    started = time.monotonic()
    with pytest.raises(StoreTimeout, match="did not answer within 0.3 s"):
        client.query("ASK { ?s ?p ?o }", timeout=0.3)
    assert time.monotonic() - started < 1.5
    assert len(fresh.requests) == 1


def test_server_side_timeout_is_a_timeout_not_retried(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.fail(500, body="java.util.concurrent.ExecutionException: java.util.concurrent.TimeoutException")
    with pytest.raises(StoreTimeout, match="its own timeout"):
        client.query("ASK { ?s ?p ?o }")
    assert len(fresh.requests) == 1


def test_400_is_a_syntax_error_with_the_endpoint_message(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    # The client's own parser stops malformed text first, so the endpoint's 400 is injected for a valid query
    # (a real endpoint may be stricter, e.g. about a function it does not know).
    fresh.fail(400, body="MalformedQueryException: Unknown function wikibase:foo " + "x" * 2000)
    with pytest.raises(QuerySyntaxError, match="HTTP 400.*MalformedQueryException: Unknown function") as info:
        client.query("SELECT ?s WHERE { ?s ?p ?o }")
    assert len(str(info.value)) < 700  # the body is truncated
    assert len(fresh.requests) == 1


def test_reset_connection_is_retried_then_unavailable(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.inject(Fault("reset"))
    assert client.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True  # the retry gets through
    fresh.inject(Fault("reset"), times=3)
    with pytest.raises(StoreUnavailable, match="cannot reach .*reset by peer.*gave up after 3 attempts"):
        client.query("ASK { ?s ?p ?o }")
    assert len(fresh.requests) == 5


def test_body_cut_short_is_a_bad_response_after_retries(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.inject(Fault("truncate"), times=3)
    with pytest.raises(StoreBadResponse, match="incomplete answer.*gave up after 3 attempts"):
        client.query("SELECT ?s ?o WHERE { ?s wdt:P31 ?o }")
    fresh.inject(Fault("truncate"))
    assert len(client.query("SELECT ?s ?o WHERE { ?s wdt:P31 ?o }")) == 2


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("not_json", r"cannot read \(application/sparql-results\+json\): Expecting value"),
        ("wrong_type", "cannot read SPARQL results sent as 'text/html'"),
    ],
)
def test_unreadable_answers_are_bad_responses_not_retried(
    client: HttpSparqlStore, fresh: FaultProxy, kind: str, message: str
) -> None:
    fresh.inject(Fault(kind))
    with pytest.raises(StoreBadResponse, match=message) as info:
        client.query("SELECT ?s WHERE { ?s wdt:P31 ?o }")
    assert str(info.value).startswith(fresh.url)
    assert len(fresh.requests) == 1
    assert len(client.query("SELECT ?s WHERE { ?s wdt:P31 ?o }")) == 2  # the next request is fine


def test_the_real_server_refuses_updates_sent_around_the_gate(endpoint: FaultProxy) -> None:
    # pgmr never sends an UPDATE (the gate stops it first); the server itself is read-only as well.
    upstream = httpx.post(endpoint.upstream.replace("/query", "/update"), data={"update": "CLEAR ALL"})
    assert upstream.status_code >= 400
    with HttpSparqlStore(endpoint.url) as store:
        assert store.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True


def test_other_client_errors_are_not_retried(fresh: FaultProxy) -> None:
    with (
        HttpSparqlStore(fresh.url.replace("/sparql", "/nowhere"), backoff=0.01) as store,
        pytest.raises(StoreError, match="HTTP 404") as info,
    ):
        store.query("ASK { ?s ?p ?o }")
    assert not isinstance(info.value, StoreUnavailable)
    assert len(fresh.requests) == 1


def test_connection_refused_is_unavailable_after_retries() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with (
        HttpSparqlStore(f"http://127.0.0.1:{port}/sparql", retries=1, backoff=0.01) as store,
        pytest.raises(StoreUnavailable, match=f"cannot reach http://127.0.0.1:{port}/sparql.*2 attempts"),
    ):
        store.query("ASK { ?s ?p ?o }")


def test_retry_after_header_forms() -> None:
    assert retry_after_seconds("3") == 3.0
    assert retry_after_seconds(None) is None and retry_after_seconds("soon") is None
    in_ten = retry_after_seconds(formatdate(time.time() + 10, usegmt=True))
    assert in_ten is not None and 8 <= in_ten <= 11


def test_bad_urls_and_settings_are_refused() -> None:
    with pytest.raises(StoreError, match="not an http"):
        HttpSparqlStore("ftp://example.org/sparql")
    with pytest.raises(StoreError, match="timeout"):
        HttpSparqlStore("http://127.0.0.1:1/sparql", timeout=0)


# --- open_store and the real KG -----------------------------------------------------------------------------


def test_open_store_dispatches_on_the_spec(
    tmp_path: Path, contract_file_path: Path, endpoint: FaultProxy
) -> None:
    http = open_store(endpoint.url, timeout=4)
    assert isinstance(http, HttpSparqlStore) and http.timeout == 4
    assert http.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True
    http.close()
    in_memory = open_store(contract_file_path)
    assert isinstance(in_memory, OxigraphStore) and in_memory.path is None
    with OxigraphStore.open(tmp_path / "kg", read_only=False) as writable:
        writable.load(contract_file_path)
    for spec in (tmp_path / "kg", f"oxigraph:{tmp_path / 'kg'}"):
        store = open_store(spec)
        assert isinstance(store, OxigraphStore) and store.read_only
        assert len(store.query("SELECT * WHERE { ?s ?p ?o }")) == CONTRACT_TRIPLES
        store.close()
    with pytest.raises(StoreError, match="not found"):
        open_store(tmp_path / "missing.nt")
    with pytest.raises(StoreError, match="not an RDF file"):
        open_store(_write(tmp_path / "notes.md", "# hi"))


def test_public_wikidata_endpoints_are_named_presets(tmp_path: Path) -> None:
    # Opening sends nothing: the stores only name their endpoint, with pgmr's User-Agent and the retry policy
    # (429/503 with Retry-After) that the fault tests above check against a real server.
    from pgmr.stores import STORE_PRESETS

    for name, url in (("wdqs", "https://query.wikidata.org/sparql"),
                      ("QLever-Wikidata", "https://qlever.cs.uni-freiburg.de/api/wikidata")):  # fmt: skip
        store = open_store(name, timeout=7)
        assert isinstance(store, HttpSparqlStore) and store.url == url == STORE_PRESETS[name.lower()]
        assert store.timeout == 7 and "pgmr" in store.user_agent
        store.close()
    with pytest.raises(StoreError, match="preset.*wdqs, qlever-wikidata"):
        open_store(str(tmp_path / "wdqs-typo"))


@pytest.mark.slow
def test_the_real_qald10_graph_answers_its_own_triples() -> None:
    path = default_kg_file(resolve_data_dir(None))
    assert path.name == "qald10_answer_derived.nt" and path.parent.name == "kg"
    triples = [q.triple for q in ox.parse(path=str(path), format=ox.RdfFormat.N_TRIPLES)]
    store = open_store(path)
    assert len(store.query("SELECT * WHERE { ?s ?p ?o }")) == len(set(triples)) == 196
    for triple in (triples[0], triples[len(triples) // 2], triples[-1]):
        result = store.query(f"SELECT ?o WHERE {{ {triple.subject} {triple.predicate} ?o }}")
        assert str(triple.object) in {t.to_sparql() for t in result.values()}


# --- the CLI ------------------------------------------------------------------------------------------------


def test_cli_load_then_query_table_and_json(tmp_path: Path, contract_file_path: Path) -> None:
    ttl = _write(tmp_path / "more.ttl", _turtle())
    result = runner.invoke(
        app, ["kg", "load", str(contract_file_path), str(ttl), "--store", str(tmp_path / "kg")]
    )
    assert result.exit_code == 0, result.output
    assert (
        f"{CONTRACT_TRIPLES + 3:,}" in result.output and f"{CONTRACT_TRIPLES + 1:,} distinct" in result.output
    )
    query = (
        "SELECT ?city ?label WHERE { ?city wdt:P31 wd:Q515 ; rdfs:label ?label FILTER(lang(?label) = 'en') }"
    )
    table = runner.invoke(app, ["kg", "query", query, "--store", str(tmp_path / "kg")])
    assert table.exit_code == 0, table.output
    assert "wd:Q64" in table.stdout and '"Hamburg"@en' in table.stdout and "2 rows" in table.stderr
    as_json = runner.invoke(app, ["kg", "query", query, "--store", str(tmp_path / "kg"), "--json"])
    assert as_json.exit_code == 0, as_json.output
    parsed = QueryResult.from_json(json.loads(as_json.stdout))
    assert {t.value for t in parsed.values()} == {WD + "Q64", WD + "Q1055", "Berlin", "Hamburg"}
    ask = runner.invoke(app, ["kg", "query", "ASK { wd:Q64 wdt:P17 wd:Q183 }", "-s", str(tmp_path / "kg")])
    assert ask.exit_code == 0 and ask.stdout.strip() == "true"


def test_cli_query_defaults_to_the_data_dir_graph_and_reads_files(
    tmp_path: Path, contract_file_path: Path
) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "kg").mkdir(parents=True)
    (data_dir / "kg" / "qald10_answer_derived.nt").write_text(CONTRACT_NT, encoding="utf-8")
    query_file = _write(tmp_path / "q.rq", "SELECT ?capital WHERE { wd:Q183 wdt:P36 ?capital }")
    for arg, stdin in ((f"@{query_file}", None), ("-", query_file.read_text())):
        result = runner.invoke(app, ["--data-dir", str(data_dir), "kg", "query", arg, "--json"], input=stdin)
        assert result.exit_code == 0, result.output
        assert QueryResult.from_json(json.loads(result.stdout)).values() == [Term.iri(WD + "Q64")]


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("INSERT DATA { wd:Q1 wdt:P31 wd:Q5 }", "error: SPARQL UPDATE is refused: pgmr only reads"),
        ("SELECT ?x WHERE { ?x wdt:P31 ", "error: invalid SPARQL query at line 1, column 30"),
    ],
)
def test_cli_query_errors_exit_2_cleanly(contract_file_path: Path, query: str, message: str) -> None:
    result = runner.invoke(app, ["kg", "query", query, "--store", str(contract_file_path)])
    assert result.exit_code == 2
    assert message in _flat(result.output)
    assert "Traceback" not in result.output


def test_cli_query_endpoint_failures_exit_2(fresh: FaultProxy, tmp_path: Path) -> None:
    fresh.delay(2.0)
    slow = runner.invoke(app, ["kg", "query", "ASK { ?s ?p ?o }", "--store", fresh.url, "--timeout", "0.3"])
    assert slow.exit_code == 2 and "did not answer within 0.3 s" in _flat(slow.output)
    fresh.fail(500, body="java.util.concurrent.TimeoutException")
    server_timeout = runner.invoke(app, ["kg", "query", "ASK { ?s ?p ?o }", "--store", fresh.url])
    assert server_timeout.exit_code == 2 and "its own timeout" in _flat(server_timeout.output)
    missing = runner.invoke(app, ["kg", "query", "ASK { ?s ?p ?o }", "--store", str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "not found" in _flat(missing.output)


def test_cli_load_errors_exit_2(tmp_path: Path) -> None:
    missing = runner.invoke(app, ["kg", "load", str(tmp_path / "none.nt"), "--store", str(tmp_path / "kg")])
    assert missing.exit_code == 2 and "not found" in _flat(missing.output)
    bad = _write(tmp_path / "bad.nt", "<http://a> <http://b> nonsense .\n")
    broken = runner.invoke(app, ["kg", "load", str(bad), "--store", str(tmp_path / "kg")])
    assert broken.exit_code == 2 and "bad.nt: not valid" in _flat(broken.output)
    assert "Traceback" not in broken.output


def test_a_streamed_answer_is_bounded_in_time_and_size(endpoint: FaultProxy) -> None:
    # Oxigraph streams results: a per-read timeout alone would let a cross product run until the server's
    # own limit and hold hundreds of MB; the whole exchange is bounded instead. (Straight to the server: the
    # proxy reads whole answers before passing them on.)
    with HttpSparqlStore(endpoint.upstream, timeout=0.3, retries=0) as store:
        started = time.monotonic()
        with pytest.raises(StoreTimeout, match="did not answer within 0.3 s"):
            store.query(SLOW_QUERY)
        assert time.monotonic() - started < 2.0
    with HttpSparqlStore(endpoint.upstream, timeout=5.0, retries=0, max_bytes=4096) as store:
        with pytest.raises(StoreBadResponse, match="over 4,096 bytes"):
            store.query(SLOW_QUERY)
        assert store.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True
    with pytest.raises(StoreError, match="max_bytes must be positive"):
        HttpSparqlStore(endpoint.url, max_bytes=0)


def test_a_gzipped_answer_is_read(client: HttpSparqlStore, fresh: FaultProxy) -> None:
    fresh.inject(Fault("gzip"))
    rows = client.query("SELECT ?s ?o WHERE { ?s wdt:P31 ?o }")
    assert len(rows) == 2 and len(fresh.requests) == 1
