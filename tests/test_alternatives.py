"""Several final queries for one question (`Pipeline.ask(..., candidates=N)`, `pgmr ask --candidates N`, the
`candidates` field of POST /ask and /resolve): the answer first and unchanged, then the best supported
alternatives, each ID from the memory.

The real parts of test_pipeline.py: the tiny trained T5, the MiniLM memory of 9 entities and 6 properties
(where a prior ranks "Paris, son of Priam" above the capital), the oxigraph store of 4 triples; the ensembles
pair the trained model with a `ScriptedGenerator` whose draft is known.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pgmr.generators.ensemble import EnsembleGenerator
from pgmr.generators.trained import load_trained
from pgmr.pipeline import MAX_CANDIDATES, AskResult, Pipeline, QueryCandidate
from pgmr.pipeline.rerank import FEATURES, Reranker
from pgmr.query import parse
from pgmr.resolver import resolved_ids
from pgmr.resolver.pick_support import pick_confidences, similarity_slope
from pgmr.resolver.support import shipped_calibration
from pgmr.service import create_app
from pgmr.testing import ScriptedGenerator
from test_pipeline import ATLANTIS, BERLIN, HAMBURG, PARIS, TARGETS, Parts, _ask_args, _variant
from test_service import running_server

runner = CliRunner()


@pytest.fixture(scope="module")
def pipeline(parts: Parts) -> Iterator[Pipeline]:
    loaded = Pipeline.load(parts.config())
    yield loaded
    loaded.close()


def _decided(result: AskResult) -> dict[str, Any]:
    """What a result says, without the times it took (which differ from one run to the next)."""
    data = result.to_json()
    data.pop("timings")
    data["probes"] = [{**p, "seconds": None} for p in data["probes"]]
    return data


def _check_candidates(pipeline: Pipeline, candidates: tuple[QueryCandidate, ...], n: int) -> None:
    """What holds for every list: at most n, distinct queries, each ID a memory ID and the one its query uses."""
    assert 0 < len(candidates) <= n
    assert len({c.sparql for c in candidates}) == len(candidates)
    for c in candidates:
        ids = set(dict(c.mapping).values())
        assert ids and all(wid in pipeline.memory for wid in ids)
        assert resolved_ids(c.sparql) == ids
        assert dict(c.mapping) == {p.name: p.id for p in c.picks}
        assert c.support == pytest.approx(math.prod(p.confidence for p in c.picks), abs=1e-5)
        assert c.supported == all(p.supported for p in c.picks)
    rest = [c.support for c in candidates if not c.answer]
    assert all(a >= b for a, b in itertools.pairwise(rest)), rest  # type: ignore[operator]


# -- the pipeline ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("question", [PARIS, BERLIN, HAMBURG])
def test_the_first_candidate_is_the_answer_and_the_answer_does_not_move(
    pipeline: Pipeline, question: str
) -> None:
    plain = pipeline.ask(question)
    result = pipeline.ask(question, candidates=3)
    assert len(result.candidates) == 3
    _check_candidates(pipeline, result.candidates, 3)
    first = result.candidates[0]
    assert first.answer and not any(c.answer for c in result.candidates[1:])
    assert first.sparql == plain.sparql and first.mapping == plain.mapping
    # Everything else is today's result, to the byte (times aside).
    assert _decided(replace(result, candidates=())) == _decided(plain)
    assert plain.candidates == () and "candidates" not in plain.to_json()
    assert _decided(pipeline.ask(question, candidates=1)) == _decided(plain)


def test_the_kg_choice_stays_first_and_says_why_a_better_supported_query_is_not(pipeline: Pipeline) -> None:
    result = pipeline.ask(PARIS, candidates=3)
    answer, runner_up, _ = result.candidates
    # The memory alone prefers the son of Priam (the prior); the KG check kept the capital, which has facts.
    assert dict(answer.mapping)["entity0"] == "Q90" and answer.results == 1
    assert dict(runner_up.mapping)["entity0"] == "Q167646" and runner_up.results == 0
    assert runner_up.support > answer.support  # type: ignore[operator]
    # The resolver's own pick keeps its confidence; the capital, which the KG check chose, shares the rest.
    paris = next(p for p in result.placeholders if p.name == "entity0")
    assert runner_up.picks[0].confidence == pytest.approx(paris.confidence, abs=1e-6)
    assert answer.picks[0].confidence < 1 - paris.confidence  # type: ignore[operator]
    assert not answer.picks[0].supported and not answer.supported


def test_without_a_store_the_list_ranks_by_support_and_a_homonym_comes_next(pipeline: Pipeline) -> None:
    result = _variant(pipeline, store=None).ask(HAMBURG, candidates=3)
    assert result.status == "resolved"
    _check_candidates(pipeline, result.candidates, 3)
    supports = [c.support for c in result.candidates]
    assert supports == sorted(supports, reverse=True)  # type: ignore[type-var]
    answer, homonym, _ = result.candidates
    assert answer.supported and answer.results is None
    assert dict(answer.mapping) == dict(result.mapping) == {"entity0": "Q1055", "relation0": "P1082"}
    # Hamburg, New York: an exact label, so it takes most of what the pick leaves; the alternatives to a
    # supported pick are all below the refusal threshold.
    assert dict(homonym.mapping) == {"entity0": "Q2103412", "relation0": "P1082"}
    assert not homonym.supported and homonym.picks[1].supported


def test_a_refusal_stays_the_answer_and_lists_what_the_memory_has(pipeline: Pipeline) -> None:
    result = pipeline.ask(ATLANTIS, candidates=4)
    assert result.status == "refused" and result.sparql is None and result.unsupported == ("entity0",)
    _check_candidates(pipeline, result.candidates, 4)
    assert len(result.candidates) == 4
    assert not any(c.answer or c.supported for c in result.candidates)
    supports = [c.support for c in result.candidates]
    assert supports == sorted(supports, reverse=True)  # type: ignore[type-var]
    # The best of them is what the same query becomes with refusal off (and no KG check to pick another).
    lenient = _variant(pipeline, entity_threshold=0.0, min_confidence=0.0, kg_check=False).ask(ATLANTIS)
    assert result.candidates[0].sparql == lenient.sparql


def test_a_hand_written_query_gets_candidates_too(pipeline: Pipeline) -> None:
    result = pipeline.resolve_text(TARGETS[BERLIN], question=BERLIN, execute=False, candidates=2)
    assert result.status == "resolved" and len(result.candidates) == 2
    assert result.candidates[0].sparql == result.sparql
    assert result.to_json()["candidates"][1]["picks"][0].keys() == {
        "name",
        "kind",
        "id",
        "label",
        "description",
        "score",
        "similarity",
        "prior",
        "confidence",
        "supported",
    }


@pytest.mark.parametrize("bad", [0, MAX_CANDIDATES + 1, -1, True, 2.0])
def test_a_bad_number_of_candidates_is_refused(pipeline: Pipeline, bad: Any) -> None:
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CANDIDATES}"):
        pipeline.ask(PARIS, candidates=bad)
    with pytest.raises(ValueError, match=f"from 1 to {MAX_CANDIDATES}"):
        pipeline.resolve_text(TARGETS[PARIS], candidates=bad)


def test_pick_confidences_keep_the_confidence_and_the_resolver_order(pipeline: Pipeline) -> None:
    calibration = shipped_calibration()
    assert similarity_slope(calibration, "entity") > similarity_slope(calibration, "relation") > 0
    assert similarity_slope(calibration, "no such kind") == 0.0
    sums = {}
    for question in (HAMBURG, ATLANTIS):
        verdict = pipeline.resolver.resolve(parse(TARGETS[question]), question)
        for evidence in verdict.evidence:
            found = pick_confidences(evidence, similarity_slope(calibration, evidence.placeholder.kind))
            assert len(found) == len(evidence.candidates) and found[0] == evidence.confidence
            assert all(a >= b - 1e-12 for a, b in itertools.pairwise(found))  # the resolver's order
            sums[question, evidence.placeholder.name] = math.fsum(found)
    # A confident pick leaves the rest to the others; an unsure one ("Atlantis", which the memory lacks)
    # leaves most of it to no candidate at all.
    assert sums[HAMBURG, "entity0"] == pytest.approx(1.0) and sums[ATLANTIS, "entity0"] < 0.5
    evidence = pipeline.resolver.resolve(parse(TARGETS[HAMBURG]), HAMBURG).evidence[0]
    without = replace(evidence, support=None)
    assert pick_confidences(without, 5.0) == pytest.approx(
        [1 / len(without.candidates)] * len(without.candidates)
    )


# -- ensembles: every draft that parsed contributes ------------------------------------------------------------


def _ensemble_pipeline(pipeline: Pipeline, parts: Parts, other: str) -> Pipeline:
    weights = {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0), "min_confidence": 5.0}
    members = [("model", load_trained(parts.model_dir)), ("other", ScriptedGenerator(lambda q: other))]
    ensemble = EnsembleGenerator(members, Reranker({"model": weights, "other": weights}).to_json())
    return Pipeline(ensemble, pipeline.memory, store=None, labels=pipeline.labels, config=pipeline.config)


def test_an_ensemble_lists_queries_of_each_draft(pipeline: Pipeline, parts: Parts) -> None:
    other = (
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
        "entity0 = [ENT] France [/ENT]\nrelation0 = [REL] capital [/REL]"
    )
    ensemble = _ensemble_pipeline(pipeline, parts, other)
    try:
        result = ensemble.ask(PARIS, candidates=MAX_CANDIDATES)
    finally:
        ensemble.close()
    _check_candidates(pipeline, result.candidates, MAX_CANDIDATES)
    chosen = next(d.source for d in result.drafts if d.chosen)
    assert result.candidates[0].answer and result.candidates[0].source == chosen
    assert {c.source for c in result.candidates} == {"model", "other"}
    assert any(dict(c.mapping) == {"entity0": "Q142", "relation0": "P36"} for c in result.candidates)


def test_an_ensemble_refusal_lists_queries_of_every_refused_draft(pipeline: Pipeline, parts: Parts) -> None:
    other = (
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
        "entity0 = [ENT] Atlantis [/ENT]\nrelation0 = [REL] capital [/REL]"
    )
    ensemble = _ensemble_pipeline(pipeline, parts, other)
    try:
        result = ensemble.ask(ATLANTIS, candidates=MAX_CANDIDATES)
    finally:
        ensemble.close()
    assert result.status == "refused" and {d.status for d in result.drafts} == {"refused"}
    _check_candidates(pipeline, result.candidates, MAX_CANDIDATES)
    assert len(result.candidates) == MAX_CANDIDATES
    assert {c.source for c in result.candidates} == {"model", "other"}
    # "head of state" from the model's draft, "capital" from the other: each draft's own relation.
    first = {}
    for c in result.candidates:
        first.setdefault(c.source, dict(c.mapping)["relation0"])
    assert first == {"model": "P35", "other": "P36"}


# -- `pgmr ask --candidates N` --------------------------------------------------------------------------------


def _cli(parts: Parts, *extra: str) -> Any:
    from pgmr.cli.main import app

    result = runner.invoke(app, _ask_args(parts, *extra), terminal_width=80)
    assert result.exit_code == 0, result.output
    return result


def _without_timings(text: str) -> list[str]:
    """The printed answer up to its timings, which come last: under load a stage's time grows by a digit and the
    line wraps at 80 columns in another place, so the lines after it differ too."""
    lines = text.splitlines()
    return lines[: next((i for i, line in enumerate(lines) if " ms · " in line), len(lines))]


def test_cli_one_candidate_prints_what_it_always_printed(parts: Parts) -> None:
    plain, one = _cli(parts, PARIS), _cli(parts, PARIS, "--candidates", "1")
    assert _without_timings(one.stdout) == _without_timings(plain.stdout)
    assert "candidates (" not in one.stdout
    as_json = [json.loads(_cli(parts, PARIS, "--json", *flag).stdout) for flag in ((), ("--candidates", "1"))]
    for payload in as_json:
        payload.pop("timings")
        payload["probes"] = [{**p, "seconds": None} for p in payload["probes"]]
        assert "candidates" not in payload
    assert as_json[0] == as_json[1]


def test_cli_candidates_table_fits_80_columns_and_json_lists_them(parts: Parts) -> None:
    text = _cli(parts, PARIS, "--candidates", "3").stdout
    table = text[text.index("candidates (3): the answer first, then by support") :]
    assert max(len(line) for line in table.splitlines()) <= 80
    for expected in ("Q90", "Q167646", "answer", "KG: 1 result", "KG: 0 results", "below the threshold"):
        assert expected in table, expected
    assert table.index("Q90") < table.index("Q167646")
    payload = json.loads(_cli(parts, PARIS, "--json", "--candidates", "3").stdout)
    assert [c["answer"] for c in payload["candidates"]] == [True, False, False]
    assert payload["candidates"][0]["sparql"] == payload["sparql"]
    refused = _cli(parts, ATLANTIS, "--candidates", "2").stdout
    assert "status: refused" in refused and "candidates (2): ranked by support" in refused


def test_cli_out_of_range_is_a_usage_error(parts: Parts) -> None:
    from pgmr.cli.main import app

    for bad in ("0", str(MAX_CANDIDATES + 1), "two"):
        result = runner.invoke(app, _ask_args(parts, PARIS, "--candidates", bad))
        assert result.exit_code == 2 and "--candidates" in result.output, result.output


# -- the service ----------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def client(pipeline: Pipeline) -> Iterator[httpx.Client]:
    with running_server(create_app(pipeline=pipeline)) as url, httpx.Client(base_url=url, timeout=60.0) as c:
        yield c


def test_service_returns_candidates_and_none_by_default(client: httpx.Client, pipeline: Pipeline) -> None:
    body = client.post("/ask", json={"question": PARIS, "candidates": 3}).json()
    assert body["status"] == "answered" and len(body["candidates"]) == 3
    first = body["candidates"][0]
    assert first["answer"] and first["sparql"] == body["sparql"] and first["mapping"] == body["mapping"]
    assert all(wid in pipeline.memory for c in body["candidates"] for wid in c["mapping"].values())
    assert client.post("/ask", json={"question": PARIS}).json()["candidates"] == []
    # 2.0 is an integer to JSON Schema, which the OpenAPI document speaks.
    assert len(client.post("/ask", json={"question": PARIS, "candidates": 2.0}).json()["candidates"]) == 2
    refused = client.post("/ask", json={"question": ATLANTIS, "candidates": 2}).json()
    assert refused["status"] == "refused" and len(refused["candidates"]) == 2
    assert not any(c["supported"] or c["answer"] for c in refused["candidates"])
    resolved = client.post(
        "/resolve", json={"query": TARGETS[HAMBURG], "question": HAMBURG, "candidates": 2, "execute": False}
    )
    assert [c["answer"] for c in resolved.json()["candidates"]] == [True, False]


@pytest.mark.parametrize("bad", [0, MAX_CANDIDATES + 1, "3", 2.5, True, None])
def test_service_refuses_a_bad_number_of_candidates(client: httpx.Client, bad: Any) -> None:
    for path, body in (("/ask", {"question": PARIS}), ("/resolve", {"query": TARGETS[PARIS]})):
        response = client.post(path, json={**body, "candidates": bad})
        assert response.status_code == 422, response.text
        error = response.json()["error"]
        assert error["code"] == "invalid_request" and error["message"].startswith("candidates:")


def test_openapi_documents_the_candidates_field(client: httpx.Client) -> None:
    schemas = client.get("/openapi.json").json()["components"]["schemas"]
    for request in ("AskRequest", "ResolveRequest"):
        field = schemas[request]["properties"]["candidates"]
        assert (field["type"], field["default"], field["minimum"], field["maximum"]) == (
            "integer",
            1,
            1,
            MAX_CANDIDATES,
        )
        assert "candidates" not in schemas[request].get("required", [])
    listed = schemas["AskResponse"]["properties"]["candidates"]
    assert listed["items"]["$ref"].endswith("/QueryCandidateOut")
    assert {"sparql", "support", "supported", "answer", "picks"} <= set(
        schemas["QueryCandidateOut"]["required"]
    )
    assert set(schemas["PickOut"]["properties"]) >= {"id", "label", "score", "prior", "confidence"}
