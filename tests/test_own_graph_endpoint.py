"""`pgmr memory build --from-endpoint`: a graph read page by page from a REAL SPARQL server (the Oxigraph server
of tests/sparql_server.py) on loopback, through a proxy that fails, recovers or stalls."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.kg.graph import GraphCatalog
from pgmr.kg.rdf import read_rdf_files
from pgmr.stores import HttpSparqlStore, StoreUnavailable
from pgmr.stores.graph_pages import PageSettings, read_endpoint
from sparql_server import FaultProxy, OxigraphServer
from test_own_graph import ZOO, ZOO_TTL

runner = CliRunner()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OxigraphServer]:
    path = tmp_path_factory.mktemp("endpoint") / "zoo.ttl"
    path.write_text(ZOO_TTL, encoding="utf-8")
    with OxigraphServer(path) as running:
        yield running


@pytest.fixture()
def proxy(server: OxigraphServer) -> Iterator[FaultProxy]:
    with FaultProxy(server.query_url) as running:
        yield running


def _entries(catalog: GraphCatalog) -> dict[str, object]:
    return {e.id: e for e in catalog}


def test_pages_give_the_catalog_the_file_gives(server: OxigraphServer) -> None:
    from_file = read_rdf_files([server.data])
    with HttpSparqlStore(server.query_url) as store:
        # Pages of 2 rows: every query is read over several pages.
        from_endpoint = read_endpoint(store, server.query_url, paging=PageSettings(page_size=2))
    assert _entries(from_endpoint) == _entries(from_file)
    assert from_endpoint.sources == (server.query_url,)
    # An endpoint declares no prefixes: the entries' namespaces get generated ones.
    assert from_endpoint.prefixes["zoo"] == ZOO


def test_a_failing_server_is_retried_until_it_recovers(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.fail(503, times=2)
    memory = tmp_path / "mem"
    result = runner.invoke(
        app, ["memory", "build", "--from-endpoint", proxy.url, "-o", str(memory), "--page-size", "5"]
    )
    assert result.exit_code == 0, result.output
    graph = json.loads((memory / "graph.json").read_text())
    assert graph["sources"] == [proxy.url] and graph["counts"]["instance"] == 7
    assert len(proxy.requests) > 2  # the two refused pages, asked again, then the rest
    assert all(r.headers.get("User-Agent", "").startswith("pgmr/") for r in proxy.requests)


def test_a_server_that_keeps_failing_gives_up_with_the_reason(proxy: FaultProxy) -> None:
    proxy.fail(503, times=10)
    with (
        HttpSparqlStore(proxy.url, retries=2, backoff=0.05) as store,
        pytest.raises(StoreUnavailable, match="503"),
    ):
        read_endpoint(store, proxy.url)
    assert len(proxy.requests) == 3


def test_a_server_that_times_out_writes_no_memory(proxy: FaultProxy, tmp_path: Path) -> None:
    proxy.delay(5.0, times=10)
    memory = tmp_path / "mem"
    result = runner.invoke(
        app, ["memory", "build", "--from-endpoint", proxy.url, "-o", str(memory), "--endpoint-timeout", "0.5"]
    )
    said = " ".join(result.output.split())
    assert result.exit_code == 2
    assert "did not answer within 0.5 s; no memory was written" in said
    assert not memory.exists()
