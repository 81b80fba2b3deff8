"""`pgmr mcp` as a real subprocess, driven by the MCP SDK's own client over stdio and over streamable HTTP on
loopback: every tool with good and bad input, refusals as `pgmr ask` gives them, and no network access from a
tool call that names a URL."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from sparql_server import FaultProxy, OxigraphServer, free_port
from test_pipeline import ATLANTIS, PARIS, Parts

TOOLS = {
    "question_to_sparql",
    "search_entities",
    "search_properties",
    "resolve",
    "validate_sparql",
    "run_sparql",
}
PGMR = str(Path(sys.executable).with_name("pgmr"))
PARIS_QUERY = "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] Paris [/ENT]\nrelation0 = [REL] capital of [/REL]"


def _args(parts: Parts, *extra: str) -> list[str]:
    return [
        "--data-dir", str(parts.data_dir), "mcp", "--model", str(parts.model_dir), "--memory",
        str(parts.memory_dir), "--threshold", "0.5", "--timeout", "1", *extra,
    ]  # fmt: skip


async def _call(client: Client, tool: str, arguments: dict[str, Any]) -> tuple[bool, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        return True, result.content[0].text  # type: ignore[union-attr]
    return False, result.structured_content


@pytest.fixture(scope="module")
def slow_store(parts: Parts) -> Iterator[FaultProxy]:
    """A real SPARQL endpoint behind a proxy that can delay answers (for run_sparql's timeout)."""
    with OxigraphServer(parts.kg_file) as server, FaultProxy(server.query_url) as proxy:
        yield proxy


async def _exercise(client: Client, proxy: FaultProxy) -> None:
    proxy.reset()
    tools = (await client.list_tools()).tools
    assert {t.name for t in tools} == TOOLS
    for tool in tools:
        assert tool.input_schema["type"] == "object" and tool.output_schema is not None
        assert tool.annotations is not None and tool.annotations.read_only_hint
    question = next(t for t in tools if t.name == "question_to_sparql").input_schema
    assert question["required"] == ["question"] and "store" in question["properties"]

    failed, answer = await _call(client, "question_to_sparql", {"question": PARIS, "details": True})
    assert not failed and answer["status"] == "answered" and answer["mapping"]["entity0"] == "Q90"
    assert "wd:Q90" in answer["sparql"] and answer["answers"] and "entity0" in answer["intermediate"]
    assert answer["timings_ms"]

    failed, several = await _call(client, "question_to_sparql", {"question": PARIS, "candidates": 3})
    assert (
        not failed
        and several["candidates"][0]["answer"]
        and several["candidates"][0]["sparql"] == answer["sparql"]
    )
    assert 1 < len(several["candidates"]) <= 3

    failed, refused = await _call(client, "question_to_sparql", {"question": ATLANTIS})
    assert not failed and refused["status"] == "refused" and refused["sparql"] is None
    [placeholder] = [p for p in refused["refusal"]["placeholders"] if p["name"] == "entity0"]
    assert placeholder["label"] == "Atlantis" and placeholder["why"] and placeholder["best_candidates"]

    failed, hits = await _call(client, "search_entities", {"text": "Paris", "k": 3})
    assert not failed and hits["candidates"][0]["id"] == "Q90" and len(hits["candidates"]) == 3
    assert 0 <= hits["candidates"][0]["prior"] <= 1 and hits["candidates"][0]["label"] == "Paris"
    failed, props = await _call(client, "search_properties", {"text": "capital of"})
    assert not failed and props["candidates"][0]["id"] == "P1376"

    failed, resolved = await _call(client, "resolve", {"intermediate_query": PARIS_QUERY, "execute": True})
    assert (
        not failed
        and resolved["status"] == "answered"
        and resolved["mapping"]
        == {
            "entity0": "Q90",
            "relation0": "P1376",
        }
    )
    failed, broken = await _call(
        client, "resolve", {"intermediate_query": "SELECT ?x WHERE { wd:entity0 ?p ?x }"}
    )
    assert not failed and broken["status"] == "invalid" and "mapping line" in broken["hint"]

    failed, valid = await _call(
        client, "validate_sparql", {"query": "SELECT ?x WHERE { wd:Q90 wdt:P1376 ?x }"}
    )
    assert not failed and valid["valid"] and valid["form"] == "select" and "PREFIX wd:" in valid["query"]
    failed, update = await _call(client, "validate_sparql", {"query": "DELETE WHERE { ?s ?p ?o }"})
    assert not failed and not update["valid"] and update["code"] == "read_only"
    failed, syntax = await _call(client, "validate_sparql", {"query": "SELECT ?x WHERE { ?x ?p }"})
    assert (
        not failed and not syntax["valid"] and syntax["line"] == 1 and "invalid SPARQL" in syntax["message"]
    )
    service = f"SELECT * WHERE {{ SERVICE <{proxy.url}> {{ ?s ?p ?o }} }}"
    failed, federated = await _call(client, "validate_sparql", {"query": service})
    assert not failed and not federated["valid"] and federated["code"] == "service_refused"

    failed, rows = await _call(client, "run_sparql", {"query": "SELECT ?x WHERE { wd:Q90 wdt:P1376 ?x }"})
    assert not failed and rows["status"] == "answered" and rows["store"] == "default" and rows["rows"] >= 1
    assert rows["result"]["results"]["bindings"][0]["x"]["value"].startswith(
        "http://www.wikidata.org/entity/"
    )
    failed, none = await _call(client, "run_sparql", {"query": "SELECT ?x WHERE { wd:Q90 wdt:P31 ?x }"})
    assert not failed and none["status"] == "empty" and none["rows"] == 0
    failed, bad = await _call(client, "run_sparql", {"query": "INSERT DATA { <a:b> <a:c> <a:d> }"})
    assert not failed and bad["status"] == "error" and bad["code"] == "read_only"
    failed, limited = await _call(client, "run_sparql", {"query": "SELECT * WHERE { ?s ?p ?o }", "limit": 1})
    assert not failed and limited["truncated"] and len(limited["result"]["results"]["bindings"]) == 1

    # The second store, by name: answers, then (delayed past the server's 1 s timeout) a timeout.
    query = "ASK { wd:Q90 wdt:P1376 ?x }"
    failed, remote = await _call(client, "run_sparql", {"query": query, "store": "remote"})
    assert not failed and remote["status"] == "answered" and remote["result"]["boolean"] is True
    proxy.delay(5.0)
    failed, slow = await _call(client, "run_sparql", {"query": query, "store": "remote"})
    assert not failed and slow["status"] == "timeout" and "LIMIT" in slow["message"]

    # Names only: a URL or an unknown name is a tool error, and nothing reaches the network.
    seen = len(proxy.requests)
    for store in (proxy.url, "http://127.0.0.1:9/sparql", "wdqs-mirror"):
        failed, text = await _call(client, "run_sparql", {"query": query, "store": store})
        assert failed and "default, remote" in text, text
        failed, text = await _call(client, "question_to_sparql", {"question": PARIS, "store": store})
        assert failed and "default, remote" in text
    assert "no tool call reaches a network address" in text or "unknown store" in text
    assert len(proxy.requests) == seen

    for tool, arguments, expected in (
        ("search_entities", {"text": "Paris", "k": 0}, "k"),
        ("search_entities", {"text": "   "}, "text is empty"),
        ("run_sparql", {"query": "ASK {}", "limit": 5000}, "limit"),
        ("question_to_sparql", {}, "question"),
        ("question_to_sparql", {"question": PARIS, "candidates": 11}, "candidates"),
        ("validate_sparql", {"query": 42}, "query"),
    ):
        failed, text = await _call(client, tool, arguments)
        assert failed and expected in text, (tool, text)
    # After every bad call the server still answers.
    failed, again = await _call(client, "validate_sparql", {"query": "ASK {}"})
    assert not failed and again["valid"]


def test_stdio(parts: Parts, slow_store: FaultProxy) -> None:
    params = StdioServerParameters(
        command=PGMR, args=_args(parts, "--store", str(parts.kg_file), "--store", f"remote={slow_store.url}")
    )

    async def run() -> None:
        async with Client(params, read_timeout_seconds=120) as client:
            await _exercise(client, slow_store)

    anyio.run(run)


def test_a_refusal_carries_the_reason_pgmr_ask_gives(parts: Parts) -> None:
    asked = subprocess.run(
        [PGMR, "--data-dir", str(parts.data_dir), "ask", ATLANTIS, "--json", "--model", str(parts.model_dir),
         "--memory", str(parts.memory_dir), "--threshold", "0.5"],
        capture_output=True, text=True, timeout=300, check=True,
    )  # fmt: skip
    reason = json.loads(asked.stdout)["reason"]
    params = StdioServerParameters(command=PGMR, args=_args(parts))

    async def run() -> dict[str, Any]:
        async with Client(params, read_timeout_seconds=120) as client:
            failed, result = await _call(client, "question_to_sparql", {"question": ATLANTIS})
            assert not failed
            return result  # type: ignore[no-any-return]

    refused = anyio.run(run)
    assert reason and refused["refusal"]["reason"] == reason


def test_streamable_http_on_loopback(parts: Parts, slow_store: FaultProxy) -> None:
    port = free_port()
    command = [PGMR, *_args(parts, "--transport", "http", "--port", str(port), "--store", str(parts.kg_file),
                            "--store", f"remote={slow_store.url}")]  # fmt: skip
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, server.communicate()[0]
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "pgmr mcp did not come up"
                time.sleep(0.3)
        # DNS rebinding: a page elsewhere that resolves to 127.0.0.1 sends another Host header.
        foreign = httpx.post(
            f"http://127.0.0.1:{port}/mcp", headers={"Host": "evil.example"}, json={}, timeout=5
        )
        assert foreign.status_code == 421

        async def run() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp", read_timeout_seconds=120) as client:
                await _exercise(client, slow_store)

        anyio.run(run)
    finally:
        server.send_signal(signal.SIGINT)
        output = server.communicate(timeout=30)[0]
    assert f"http://127.0.0.1:{port}/mcp" in output and "Traceback" not in output
