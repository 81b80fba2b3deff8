"""Service limits and backpressure, on a REAL uvicorn server on 127.0.0.1 over the real pipeline of
test_pipeline.py, whose store is made slow the way a busy endpoint is: a real Oxigraph SPARQL server behind a
proxy that delays its answers (tests/sparql_server.py). Nothing is mocked: requests really queue in the
limiter, really overflow it, and really outlive their deadline."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from pgmr.pipeline import Pipeline
from pgmr.service import MAX_BODY_BYTES, create_app
from pgmr.service.limits import DeadlineExceeded, Limiter, Overloaded, ServiceLimits
from pgmr.service.schemas import MAX_QUERY_CHARS, MAX_QUESTION_CHARS
from pgmr.stores.http_store import HttpSparqlStore
from sparql_server import FaultProxy, OxigraphServer
from test_pipeline import HAMBURG, PARIS, TARGETS, Parts
from test_service import running_server, wait_for_health

# One query, no KG-check probes (kg_check is off below): each /resolve costs exactly one delayed store call. With
# its question, so that support reads the label as a span of it and the query resolves (test_service.py).
QUERY = TARGETS[HAMBURG]
RESOLVE = {"query": QUERY, "question": HAMBURG}


@pytest.fixture(scope="module")
def proxy(parts: Parts) -> Iterator[FaultProxy]:
    with OxigraphServer(parts.kg_file) as server, FaultProxy(server.query_url) as front:
        yield front


@pytest.fixture(scope="module")
def slow_pipeline(parts: Parts, proxy: FaultProxy) -> Iterator[Pipeline]:
    """The test pipeline's generator and memory, querying the store through the delaying proxy."""
    loaded = Pipeline.load(parts.config(store=None))
    store = HttpSparqlStore(proxy.url, timeout=10.0, retries=0)
    pipeline = Pipeline(
        loaded.generator,
        loaded.memory,
        store=store,
        labels=loaded.labels,
        config=replace(loaded.config, kg_check=False, timeout=10.0),
    )
    yield pipeline
    store.close()
    loaded.close()


def _post_all(url: str, bodies: list[dict], path: str = "/resolve") -> list[tuple[httpx.Response, float]]:
    """POST every body at once (one connection each, released together by a barrier); (response, seconds)."""
    barrier = threading.Barrier(len(bodies))

    def one(body: dict) -> tuple[httpx.Response, float]:
        with httpx.Client(base_url=url, timeout=60.0) as client:
            client.get("/health")  # connect first, so that only the POSTs race
            barrier.wait()
            started = time.perf_counter()
            response = client.post(path, json=body)
            return response, time.perf_counter() - started

    with ThreadPoolExecutor(max_workers=len(bodies)) as pool:
        return list(pool.map(one, bodies))


def _post(url: str, body: dict, path: str = "/resolve") -> tuple[httpx.Response, float]:
    with httpx.Client(base_url=url, timeout=60.0) as client:
        started = time.perf_counter()
        response = client.post(path, json=body)
        return response, time.perf_counter() - started


def _wait_until_at_work(url: str, seconds: float = 10.0) -> None:
    with httpx.Client(base_url=url, timeout=5.0) as client:
        give_up = time.perf_counter() + seconds
        while client.get("/health").json()["load"]["in_progress"] < 1:
            assert time.perf_counter() < give_up, "the first request never reached a worker"
            time.sleep(0.01)


def _error_code(response: httpx.Response) -> str:
    assert response.headers["content-type"].startswith("application/json"), response.text
    return response.json()["error"]["code"]


def test_a_full_queue_answers_503_with_retry_after_at_once(
    slow_pipeline: Pipeline, proxy: FaultProxy
) -> None:
    limits = ServiceLimits(max_concurrency=1, max_queue=2, deadline=30.0)
    proxy.reset()
    proxy.delay(1.5, times=3)  # the three admitted requests (1 at work, 2 queued) each take 1.5 s
    with running_server(create_app(pipeline=slow_pipeline, limits=limits)) as url:
        health_during: list[httpx.Response] = []
        invalid_during: list[httpx.Response] = []

        def observe() -> None:
            # Poll until the burst is in (a slow machine may take a while to open twelve connections): the
            # first request then spends 1.5 s at the store, with two behind it, and /health must see that at
            # once rather than wait behind the busy worker.
            with httpx.Client(base_url=url, timeout=5.0) as client:
                give_up = time.perf_counter() + 20.0
                while time.perf_counter() < give_up:
                    started = time.perf_counter()
                    health = client.get("/health")
                    assert time.perf_counter() - started < 1.0, "/health waited behind the busy workers"
                    load = health.json()["load"]
                    if load["in_progress"] or load["queued"] or load["rejected"]:
                        health_during.append(health)
                    if load["in_progress"] == 1 and load["queued"] == 2:
                        break
                    time.sleep(0.02)
                invalid_during.append(client.post("/ask", json={"question": "x" * 1001}))
                invalid_during.append(client.post("/ask", json={"question": "x" * MAX_BODY_BYTES}))

        watcher = threading.Thread(target=observe)
        watcher.start()
        results = _post_all(url, [RESOLVE] * 12)
        watcher.join()

        ok = [(r, s) for r, s in results if r.status_code == 200]
        refused = [(r, s) for r, s in results if r.status_code == 503]
        assert len(ok) == 3 and len(refused) == 9, [r.status_code for r, _ in results]
        for response, seconds in refused:
            assert _error_code(response) == "overloaded"
            assert int(response.headers["retry-after"]) >= 1
            assert seconds < 1.0, f"a refusal took {seconds:.2f} s: it must come at once, not after a wait"
        # The admitted ones ran one after the other behind the single worker (3 x 1.5 s).
        assert max(s for _, s in ok) >= 4.0
        assert all(r.json()["status"] == "answered" for r, _ in ok)

        # While the first was at the store, /health answered and showed one at work and two queued.
        assert health_during, "/health never saw the burst"
        load = health_during[-1].json()["load"]
        assert health_during[-1].status_code == 200 and load["in_progress"] == 1 and load["queued"] == 2
        # Bad requests are answered as such even under overload: validation comes before admission.
        assert [r.status_code for r in invalid_during] == [422, 413]

        # Afterwards the service answers normally, with nothing left in flight.
        with httpx.Client(base_url=url, timeout=30.0) as client:
            after = client.post("/resolve", json=RESOLVE)
            assert after.status_code == 200 and after.json()["status"] == "answered"
            load = client.get("/health").json()["load"]
        assert load["in_progress"] == 0 and load["queued"] == 0
        assert load["rejected"] == 9 and load["completed"] == 4


def test_the_deadline_answers_504_on_time_and_the_work_finishes_in_the_background(
    slow_pipeline: Pipeline, proxy: FaultProxy
) -> None:
    limits = ServiceLimits(max_concurrency=1, max_queue=4, deadline=0.6)
    proxy.reset()
    proxy.delay(2.5, times=1)
    with running_server(create_app(pipeline=slow_pipeline, limits=limits)) as url:
        # A is at work (at the slow store) past its deadline; B, sent just after, waits for A's worker past
        # its own deadline (B alone would take milliseconds: it does not run on the store).
        with ThreadPoolExecutor(max_workers=2) as pool:
            first = pool.submit(_post, url, RESOLVE)
            _wait_until_at_work(url)  # A holds the worker before B is sent, however slow the machine
            second = pool.submit(_post, url, {"query": TARGETS[PARIS], "execute": False})
            results = [first.result(), second.result()]
        codes = sorted(r.status_code for r, _ in results)
        assert codes == [504, 504], [r.text for r, _ in results]
        messages = sorted(r.json()["error"]["message"] for r, _ in results)
        assert all(_error_code(r) == "deadline" for r, _ in results)
        assert "at work" in messages[0] and "waiting for a worker" in messages[1]
        for _, seconds in results:
            assert 0.5 <= seconds < 1.5, f"a 0.6 s deadline answered after {seconds:.2f} s"
        with httpx.Client(base_url=url, timeout=30.0) as client:
            # A's work still holds the only worker: abandoned work is not forgotten by the bound.
            load = client.get("/health").json()["load"]
            assert load["in_progress"] == 1 and load["deadline_exceeded"] == 2
            deadline = time.monotonic() + 10
            while client.get("/health").json()["load"]["in_progress"]:
                assert time.monotonic() < deadline, "the background work never finished"
                time.sleep(0.1)
            after = client.post("/resolve", json=RESOLVE)
            assert after.status_code == 200 and after.json()["status"] == "answered"
        assert len(proxy.requests) == 2  # A's query reached the store once, and the one after it


def test_the_largest_valid_body_is_not_refused_for_its_size(slow_pipeline: Pipeline) -> None:
    """Bodies are bounded, but above every body the schema allows: the longest query and question, in
    characters that JSON escapes as surrogate pairs (12 bytes each), are answered, not refused with 413."""
    body = {"query": "\U0001f600" * MAX_QUERY_CHARS, "question": "\U0001f600" * MAX_QUESTION_CHARS}
    raw = json.dumps(body).encode()  # ASCII-only JSON: the longest encoding of these characters
    assert len(raw) > 100_000 and len(raw) < MAX_BODY_BYTES
    with (
        running_server(create_app(pipeline=slow_pipeline)) as url,
        httpx.Client(base_url=url, timeout=30.0) as client,
    ):
        response = client.post("/resolve", content=raw, headers={"content-type": "application/json"})
        assert response.status_code == 200 and response.json()["status"] == "invalid", response.text[:300]
        over = client.post("/resolve", content=raw + b" " * (MAX_BODY_BYTES - len(raw) + 1))
        assert over.status_code == 413 and _error_code(over) == "too_large"
        body["query"] += "x"  # one character too many: the schema's bound, not the body's
        headers = {"content-type": "application/json"}
        assert client.post("/resolve", content=json.dumps(body), headers=headers).status_code == 422


def test_openapi_documents_503_with_retry_after_and_504(slow_pipeline: Pipeline) -> None:
    with running_server(create_app(pipeline=slow_pipeline)) as url:
        schema = httpx.get(f"{url}/openapi.json").json()
    for path, method in (("/ask", "post"), ("/resolve", "post"), ("/memory/search", "get")):
        responses = schema["paths"][path][method]["responses"]
        assert "Retry-After" in responses["503"]["headers"]
        assert responses["503"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorResponse")
        assert "504" in responses
    assert "503" not in schema["paths"]["/health"]["get"]["responses"]


def test_limiter_keeps_the_slot_until_the_thread_is_done_and_serves_in_order() -> None:
    """The limiter alone, with real threads: FIFO admission, refusal when full, and a slot kept by abandoned
    work until its thread really ends."""

    async def scenario() -> None:
        limiter = Limiter(ServiceLimits(max_concurrency=1, max_queue=2, deadline=0.3))
        limiter.start()
        order: list[int] = []

        def work(n: int, seconds: float) -> int:
            time.sleep(seconds)
            order.append(n)
            return n

        first = asyncio.create_task(limiter.run(work, 1, 0.5))  # outlives its deadline
        await asyncio.sleep(0.05)
        second = asyncio.create_task(limiter.run(work, 2, 0.0))
        third = asyncio.create_task(limiter.run(work, 3, 0.0))
        await asyncio.sleep(0.05)
        assert (limiter.in_progress, limiter.queued) == (1, 2)
        with pytest.raises(Overloaded) as full:
            await limiter.run(work, 4, 0.0)
        assert 1 <= full.value.retry_after <= 60
        for task in (first, second, third):
            with pytest.raises(DeadlineExceeded):
                await task  # 2 and 3 waited 0.3 s behind a worker that was busy for 0.5 s
        assert limiter.in_progress == 1  # 1's thread is still sleeping
        await asyncio.sleep(0.4)
        assert limiter.in_progress == 0 and order == [1]
        assert await limiter.run(work, 5, 0.0) == 5
        assert (limiter.rejected, limiter.deadline_exceeded, limiter.completed) == (1, 3, 2)
        limiter.close()

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--max-concurrency", "0"], "max_concurrency must be between 1 and 256"),
        (["--max-queue", "-1"], "max_queue must be between 0 and 100000"),
        (["--deadline", "0"], "deadline must be more than 0"),
    ],
)
def test_pgmr_serve_rejects_bad_limits_before_loading_anything(flags: list[str], message: str) -> None:
    from pgmr.cli.main import app

    result = CliRunner().invoke(app, ["serve", "--memory", "/nonexistent", *flags])
    assert result.exit_code == 2 and message in result.output, result.output


def test_pgmr_serve_applies_its_limit_options(parts: Parts) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [str(Path(sys.executable).with_name("pgmr")), "--data-dir", str(parts.data_dir), "serve"]
    command += ["--port", str(port), "--log-level", "warning", "--store", "none"]
    command += ["--model", str(parts.model_dir), "--memory", str(parts.memory_dir)]
    command += ["--max-concurrency", "3", "--max-queue", "7", "--deadline", "12.5"]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        load = wait_for_health(server, port)["load"]
    finally:
        server.terminate()
        server.communicate(timeout=30)
    assert (load["max_concurrency"], load["max_queue"], load["deadline_seconds"]) == (3, 7, 12.5)
