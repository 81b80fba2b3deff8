"""The HTTP service: a REAL uvicorn server on 127.0.0.1 (random free port, in a thread) over the real pipeline of
test_pipeline.py (tiny trained T5, MiniLM memory, oxigraph store), driven with httpx."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

import httpx
import pytest

from pgmr.service import MAX_BODY_BYTES, create_app
from test_pipeline import ATLANTIS, BERLIN, HAMBURG, PARIS, TARGETS, TRIPLES, Parts


@contextmanager
def running_server(app: Any, timeout: float = 60.0) -> Iterator[str]:
    """Serve `app` with uvicorn on a free loopback port until the block ends; yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError("the server stopped during startup (see the log above)")
        if time.monotonic() > deadline:
            raise TimeoutError("the server did not start in time")
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=15)
        sock.close()


@pytest.fixture(scope="module")
def base_url(parts: Parts) -> Iterator[str]:
    # The app loads its pipeline from the config in its lifespan, as `pgmr serve` deployments do.
    with running_server(create_app(parts.config())) as url:
        yield url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60.0) as c:
        yield c


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/json")
    body = response.json()
    assert body["error"]["code"] == code and body["error"]["message"]
    assert "Traceback" not in response.text
    return body["error"]["message"]


def test_health(client: httpx.Client) -> None:
    body = client.get("/health").json()
    assert body["status"] == "ok" and body["mode"] == "pgmr"
    assert body["memory"] == {"entities": 9, "relations": 6}
    assert body["store"].endswith("qald10_answer_derived.nt") and body["kg_check"] is True
    assert body["model"].endswith("model")
    # Its rows are held in RAM (JSONL): nothing is read ahead.
    assert body["warm_up"] is None


def test_ask_answers_with_candidates_and_labels(client: httpx.Client) -> None:
    response = client.post("/ask", json={"question": PARIS})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["status"] == "answered" and body["intermediate"] == TARGETS[PARIS]
    entity = body["placeholders"][0]
    assert entity["name"] == "entity0" and entity["candidates"][0]["id"] == "Q167646"
    assert entity["chosen"] == "Q90" and body["choice"] == "kg" and len(body["probes"]) >= 2
    assert [(a["id"], a["label"]) for a in body["answers"]] == [("Q142", "France")]
    assert "wd:Q90" in body["sparql"]


def test_ask_refusal_and_boolean(client: httpx.Client) -> None:
    refused = client.post("/ask", json={"question": ATLANTIS}).json()
    assert refused["status"] == "refused" and refused["unsupported"] == ["entity0"]
    assert "Atlantis" in refused["reason"] and refused["sparql"] is None
    yes = client.post("/ask", json={"question": BERLIN}).json()
    assert yes["status"] == "answered" and yes["boolean"] is True


def test_resolve_runs_an_intermediate_query(client: httpx.Client) -> None:
    # With the question, support also reads that "Hamburg" is a span of it; without one, label-only "Hamburg"
    # beside its homonym in this small memory (no prior to tell them apart) is under the shipped threshold.
    body = client.post("/resolve", json={"query": TARGETS[HAMBURG], "question": HAMBURG}).json()
    assert body["status"] == "answered" and body["question"] == HAMBURG, body.get("reason")
    assert body["mapping"] == {"entity0": "Q1055", "relation0": "P1082"}
    assert body["answers"][0]["value"] == "1841179"
    unrun = client.post("/resolve", json={"query": TARGETS[PARIS], "execute": False}).json()
    assert (
        unrun["status"] == "resolved" and unrun["probes"] == [] and unrun["mapping"]["entity0"] == "Q167646"
    )
    invalid = client.post("/resolve", json={"query": "SELECT ?x WHERE { wd:entity0 ?p ?x }"}).json()
    assert invalid["status"] == "invalid" and invalid["error"]["code"] == "missing_mapping"
    # With the question, a garbled label and number are grounded in it, and the response says so.
    garbled = "ASK { wd:entity0 wdt:relation0 ?n FILTER(?n > 3546) }\nentity0 = [ENT] Hamburgh [/ENT]\nrelation0 = [REL] population [/REL]"
    question = "Do more than 3,600 people live in Hamburg?"
    grounded = client.post("/resolve", json={"query": garbled, "question": question, "execute": False}).json()
    assert grounded["grounded"] == [
        {"placeholder": "entity0", "generated": "Hamburgh", "grounded": "Hamburg"},
        {"placeholder": "literal", "generated": "3546", "grounded": "3600"},
    ]
    assert grounded["mapping"]["entity0"] == "Q1055" and "FILTER(?n > 3600)" in grounded["sparql"]
    # The shipped training facts show Germany only as the object of "country" (P17): a query that asks for
    # Germany's country is turned round, the intermediate query stays as written, and a note says why.
    backwards = (
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
        "entity0 = [ENT] Germany [/ENT] country in Central Europe\nrelation0 = [REL] country [/REL]"
    )
    turned = client.post("/resolve", json={"query": backwards, "execute": False}).json()
    assert turned["status"] == "resolved", turned.get("reason")
    assert "?x wdt:P17 wd:Q183" in turned["sparql"] and turned["intermediate"] == backwards
    assert (
        len(turned["notes"]) == 1 and "Q183" in turned["notes"][0] and "object of P17" in turned["notes"][0]
    )
    assert grounded["notes"] == []


@pytest.mark.parametrize(
    "query",
    [
        "INSERT DATA { wd:Q64 wdt:P1376 wd:Q142 }",
        "DELETE WHERE { ?s ?p ?o }",
        "DROP ALL",
        "INSERT DATA { wd:entity0 wdt:relation0 wd:entity1 }\n"
        "entity0 = [ENT] Berlin [/ENT]\nrelation0 = [REL] capital of [/REL]\nentity1 = [ENT] France [/ENT]",
    ],
)
def test_updates_are_refused_with_400_and_never_run(client: httpx.Client, query: str) -> None:
    message = _error(client.post("/resolve", json={"query": query}), 400, "read_only")
    assert "SPARQL UPDATE is refused" in message
    count = client.post("/resolve", json={"query": "SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }"}).json()
    assert count["status"] == "answered" and count["answers"][0]["value"] == str(len(TRIPLES))


def test_memory_search(client: httpx.Client) -> None:
    body = client.get("/memory/search", params={"q": "Paris", "kind": "entity", "k": 3}).json()
    assert body["kind"] == "entity" and len(body["hits"]) == 3
    assert {h["id"] for h in body["hits"]} == {"Q90", "Q167646", "Q830149"}
    relations = client.get(
        "/memory/search", params={"q": "number of inhabitants", "kind": "relation", "k": 1}
    ).json()
    assert relations["hits"][0]["id"] == "P1082"
    _error(client.get("/memory/search", params={"q": "Paris", "kind": "lexeme"}), 422, "invalid_request")
    _error(client.get("/memory/search", params={"q": "Paris", "k": 0}), 422, "invalid_request")
    _error(client.get("/memory/search", params={"q": "Paris", "k": 51}), 422, "invalid_request")
    _error(client.get("/memory/search"), 422, "invalid_request")


def test_request_bounds(client: httpx.Client) -> None:
    message = _error(client.post("/ask", json={"question": "x" * 1001}), 422, "invalid_request")
    assert "question" in message and "1000" in message
    _error(client.post("/ask", json={"question": "   "}), 422, "invalid_request")
    _error(client.post("/ask", json={"q": PARIS}), 422, "invalid_request")
    _error(client.post("/ask", json={"question": PARIS, "extra": 1}), 422, "invalid_request")
    _error(
        client.post("/ask", content=b"{not json", headers={"content-type": "application/json"}),
        422,
        "invalid_request",
    )
    big = {"question": PARIS, "padding": "x" * MAX_BODY_BYTES}
    _error(client.post("/ask", json=big), 413, "too_large")
    # A chunked body declares no length: it is counted as it arrives.
    half = MAX_BODY_BYTES // 2
    chunks = iter([b'{"question": "', b"x" * half, b"y" * half, b'"}'])
    _error(
        client.post("/ask", content=chunks, headers={"content-type": "application/json"}), 413, "too_large"
    )
    small = iter([b'{"question": "', PARIS.encode(), b'"}'])
    chunked = client.post("/ask", content=small, headers={"content-type": "application/json"})
    assert chunked.status_code == 200 and chunked.json()["status"] == "answered"


def test_unknown_routes_and_methods_are_json_errors(client: httpx.Client) -> None:
    _error(client.get("/nope"), 404, "http_404")
    _error(client.get("/ask"), 405, "http_405")


def test_openapi_lists_the_endpoints_and_docs_are_served_locally(client: httpx.Client) -> None:
    schema = client.get("/openapi.json").json()
    assert {"/ask", "/resolve", "/memory/search", "/health"} <= set(schema["paths"])
    assert "post" in schema["paths"]["/ask"] and "get" in schema["paths"]["/memory/search"]
    assert "AskResponse" in schema["components"]["schemas"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "/openapi.json" in docs.text
    assert "/docs-assets/swagger-ui-bundle.js" in docs.text  # no CDN: the service may run offline
    assert client.get("/docs-assets/swagger-ui-bundle.js").status_code == 200


def test_web_page_and_assets(client: httpx.Client) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert (
        'id="question"' in page.text
        and "/static/app.js" in page.text
        and "http" not in page.text.split("<body>")[1]
    )
    for asset in ("/static/app.js", "/static/style.css"):
        assert client.get(asset).status_code == 200


def test_concurrent_asks_match_sequential_ones(client: httpx.Client, base_url: str) -> None:
    questions = [PARIS, ATLANTIS, BERLIN, HAMBURG] * 3
    expected = {q: client.post("/ask", json={"question": q}).json() for q in set(questions)}

    def ask(question: str) -> tuple[str, dict]:
        with httpx.Client(base_url=base_url, timeout=60.0) as own:
            response = own.post("/ask", json={"question": question})
            assert response.status_code == 200
            return question, response.json()

    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(ask, questions))
    for question, body in results:
        assert (body["status"], body["mapping"], body["intermediate"]) == (
            expected[question]["status"],
            expected[question]["mapping"],
            expected[question]["intermediate"],
        )


def wait_for_health(server: Any, port: int, limit: float = 120.0) -> dict:
    """/health of a `pgmr serve` process started on `port`, once it answers (the process must stay up)."""
    deadline = time.monotonic() + limit
    while True:
        assert server.poll() is None, server.stdout.read()
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=2.0).json()
        except httpx.TransportError:
            assert time.monotonic() < deadline, "pgmr serve did not come up"
            time.sleep(0.2)


def test_pgmr_serve_command_serves_and_stops_cleanly(parts: Parts) -> None:
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    pgmr = Path(sys.executable).with_name("pgmr")
    command = [
        str(pgmr),
        "--data-dir",
        str(parts.data_dir),
        "serve",
        "--port",
        str(port),
        "--log-level",
        "warning",
    ]
    command += ["--model", str(parts.model_dir), "--memory", str(parts.memory_dir), "--threshold", "0.1"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        health = wait_for_health(server, port)
        assert health["store"] == str(parts.kg_file)  # the data dir's KG is the default store
        body = httpx.post(f"http://127.0.0.1:{port}/ask", json={"question": PARIS}, timeout=60).json()
        assert body["status"] == "answered" and body["mapping"]["entity0"] == "Q90"
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=30)[0]
    assert server.returncode == 0, output
    assert f"http://127.0.0.1:{port}/" in output and "Traceback" not in output
    from typer.testing import CliRunner

    from pgmr.cli.main import app

    missing = CliRunner().invoke(
        app, ["serve", "--model", str(parts.model_dir), "--memory", os.devnull, "--store", "none"]
    )
    assert missing.exit_code == 2 and "pgmr memory build" in missing.output
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        busy = CliRunner().invoke(app, ["serve", "--port", str(taken.getsockname()[1]), "--store", "none"])
    assert busy.exit_code == 2 and "cannot listen on 127.0.0.1" in busy.output
