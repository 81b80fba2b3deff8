"""`pgmr serve` over an HTTP SPARQL store that misbehaves: the real Oxigraph server behind the fault proxy.

Each fault reaches the client as a JSON answer with a named error code (never a traceback, never a 5xx of the
service), and the service keeps answering other requests, during the fault and after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from pgmr.service import create_app
from sparql_server import Fault, FaultProxy, OxigraphServer
from test_pipeline import BERLIN, PARIS, Parts
from test_service import running_server


@dataclass(frozen=True)
class Served:
    url: str
    proxy: FaultProxy


@pytest.fixture(scope="module")
def served(parts: Parts) -> Iterator[Served]:
    with OxigraphServer(parts.kg_file) as server, FaultProxy(server.query_url) as proxy:
        # timeout bounds each store query; the pipeline's own retries (3, from 0.5 s) stay as shipped
        config = parts.config(store=proxy.url, timeout=1.0, kg_check=False)
        with running_server(create_app(config)) as url:
            yield Served(url, proxy)


def _ask(url: str, question: str) -> dict:
    response = httpx.post(f"{url}/ask", json={"question": question}, timeout=60.0)
    assert response.status_code == 200, response.text
    assert "Traceback" not in response.text
    return response.json()


def test_the_service_answers_through_the_real_server(served: Served) -> None:
    served.proxy.reset()
    body = _ask(served.url, BERLIN)
    assert body["status"] == "answered" and body["boolean"] is True
    assert len(served.proxy.requests) == 1


@pytest.mark.parametrize(
    ("fault", "times", "code"),
    [
        (Fault("delay", seconds=3.0), 1, "timeout"),
        (Fault("status", 503, body="maintenance"), 4, "unavailable"),
        (Fault("reset"), 4, "unavailable"),
        (Fault("truncate"), 4, "bad_response"),
        (Fault("not_json"), 1, "bad_response"),
        (Fault("wrong_type"), 1, "bad_response"),
        (Fault("status", 400, body="Parse error"), 1, "store_syntax"),
    ],
)
def test_a_store_fault_is_a_named_error_and_other_requests_are_answered(
    served: Served, fault: Fault, times: int, code: str
) -> None:
    served.proxy.reset()
    served.proxy.inject(fault, times=times)
    faulty: dict = {}
    worker = threading.Thread(target=lambda: faulty.update(_ask(served.url, BERLIN)))
    worker.start()
    # While that request waits on the store, the service still answers the others.
    health = httpx.get(f"{served.url}/health", timeout=30.0)
    assert health.status_code == 200 and health.json()["status"] == "ok"
    worker.join(timeout=60)
    assert faulty["status"] == "error" and faulty["error"]["code"] == code, faulty
    assert faulty["error"]["message"] and faulty["sparql"]
    after = _ask(served.url, PARIS)  # the fault was that request's alone
    assert after["status"] in ("answered", "empty") and after["error"] is None
