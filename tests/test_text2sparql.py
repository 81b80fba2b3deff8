"""GET /text2sparql, the TEXT2SPARQL challenge's interface, over REAL HTTP on loopback (uvicorn in a thread): a
dataset mapped to a memory of its own graph (the zoo graph of test_own_graph.py) and a generator (scripted:
the gold queries converted, as the oracle writes them)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from pgmr.conversion import convert_sparql
from pgmr.kg.rdf import read_rdf_files
from pgmr.memory import Memory
from pgmr.pipeline import Pipeline, PipelineConfig
from pgmr.service import create_app
from pgmr.testing import ScriptedGenerator
from test_own_graph import GOLD, QUESTION, ZOO_TTL
from test_service import running_server

DATASET = "https://example.org/zoo/"
UNKNOWN = "Which animals does Carl Gustav care for?"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory, encoder: object) -> Iterator[str]:
    root = tmp_path_factory.mktemp("t2s")
    (root / "zoo.ttl").write_text(ZOO_TTL, encoding="utf-8")
    catalog = read_rdf_files([root / "zoo.ttl"])
    memory = Memory.build(catalog, root / "memory", encoder)  # type: ignore[arg-type]
    script = {
        QUESTION: convert_sparql(GOLD, catalog)[0].to_text(),
        UNKNOWN: "SELECT ?a WHERE { ?a wdt:relation0 wd:entity0 }\n"
        "relation0 = [REL] cared for by [/REL]\nentity0 = [ENT] Carl Gustav [/ENT] Keeper",
    }
    pipeline = Pipeline(ScriptedGenerator(script, default="not a query"), memory, config=PipelineConfig())
    with running_server(create_app(pipeline=pipeline, datasets={DATASET: pipeline})) as url:
        yield url


@pytest.fixture()
def client(base_url: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base_url, timeout=60.0) as c:
        yield c


def test_a_question_gets_the_final_query(client: httpx.Client) -> None:
    response = client.get("/text2sparql", params={"dataset": DATASET, "question": QUESTION})
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["dataset"] == DATASET and body["question"] == QUESTION
    assert "?animal zoo:caredForBy z:ana . ?animal a zoo:Animal ." in body["query"]
    assert body["query"].startswith("PREFIX z: <http://example.org/zoo/id/>\nPREFIX zoo:")


def test_unknown_dataset_is_404_naming_the_known_ones(client: httpx.Client) -> None:
    response = client.get(
        "/text2sparql", params={"dataset": "https://example.org/other/", "question": QUESTION}
    )
    assert response.status_code == 404
    error = response.json()["error"]
    assert error["code"] == "unknown_dataset" and DATASET in error["message"]


def test_a_refused_question_is_422_with_the_reason(client: httpx.Client) -> None:
    response = client.get("/text2sparql", params={"dataset": DATASET, "question": UNKNOWN})
    assert response.status_code == 422
    error = response.json()["error"]
    assert error["code"] == "refused" and "no support in memory for entity0 'Carl Gustav'" in error["message"]


def test_no_query_and_bad_requests_are_422(client: httpx.Client) -> None:
    invalid = client.get("/text2sparql", params={"dataset": DATASET, "question": "Something else?"})
    assert invalid.status_code == 422 and invalid.json()["error"]["code"] == "invalid_sparql"
    missing = client.get("/text2sparql", params={"dataset": DATASET})
    assert missing.status_code == 422 and missing.json()["error"]["code"] == "invalid_request"
    blank = client.get("/text2sparql", params={"dataset": DATASET, "question": "   "})
    assert blank.status_code == 422


def test_the_endpoint_is_documented(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()["paths"]["/text2sparql"]["get"]
    assert {"200", "404", "422"} <= set(spec["responses"])
    assert [p["name"] for p in spec["parameters"]] == ["dataset", "question"]


def test_serve_checks_dataset_specs(tmp_path: Path) -> None:
    import typer

    from pgmr.cli.serve import parse_dataset

    with pytest.raises(typer.BadParameter, match="NAME=MEMORY"):
        parse_dataset("no-equals-sign")
    with pytest.raises(typer.BadParameter, match="no memory at"):
        parse_dataset(f"{DATASET}={tmp_path}")
