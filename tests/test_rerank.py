"""Ensembles and the reranker: several drafts per question, each resolved against the real memory, the best
supported one kept, on every way in (`Pipeline.ask`, `pgmr ask`, `pgmr generate --resolve`, experiments).

The real parts of test_pipeline.py (MiniLM memory, tiny trained T5); the second member of the in-code
ensembles is a `ScriptedGenerator` that writes a draft the memory does not support, so which draft wins is
known. Ensembles on disk use the tiny trained model twice, under two names, through `load_trained`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.generators.ensemble import RERANKER_FILE, Draft, EnsembleGenerator, generate_drafts
from pgmr.generators.seq2seq.card import ModelCardError
from pgmr.generators.trained import load_trained
from pgmr.jsonl import read_jsonl
from pgmr.pipeline import Pipeline, PipelineError
from pgmr.pipeline.rerank import FEATURES, Reranker, RerankerError, prepare_drafts, reranker_of
from pgmr.resolver import Resolver
from pgmr.resolver.grounding import GroundingConfig
from pgmr.testing import ScriptedGenerator
from test_pipeline import HAMBURG, PARIS, TARGETS, Parts

runner = CliRunner()
# Labels that are neither in the memory nor near any question span (grounding leaves them as they are): the
# resolver's support for them is low.
GARBLED = (
    "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] Zyxwq Vvkj [/ENT]\n"
    "relation0 = [REL] qqzx vwy [/REL]"
)


def _weights(**overrides: float) -> dict[str, float]:
    return {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0), **overrides}


# Trust the least supported placeholder: a draft whose labels the memory knows wins.
SUPPORT = Reranker({"model": _weights(min_confidence=5.0), "garbled": _weights(min_confidence=5.0)})


def _ensemble(
    parts: Parts, reranker: Reranker | None = SUPPORT, *, garbled_first: bool = True
) -> EnsembleGenerator:
    trained = load_trained(parts.model_dir)
    scripted = ScriptedGenerator(lambda q: GARBLED)
    members = [("garbled", scripted), ("model", trained)]
    if not garbled_first:
        members.reverse()
    return EnsembleGenerator(members, reranker.to_json() if reranker else None)


# -- the reranker's file --------------------------------------------------------------------------------------


def test_a_reranker_round_trips_and_scores_linearly() -> None:
    reranker = Reranker.from_json(json.loads(json.dumps(SUPPORT.to_json())))
    assert reranker == SUPPORT
    signals = dict.fromkeys(FEATURES, 0.5)
    assert reranker.score("model", signals) == pytest.approx(2.5)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({}, "'weights'"),
        ({"weights": {}}, "at least one source"),
        ({"weights": {"a": {"bias": 0.0}}}, "missing"),
        ({"weights": {"a": _weights(nonsense=1.0)}}, "unknown ['nonsense']"),
        ({"weights": {"a": _weights(agreement=math.nan)}}, "not a finite number"),
        ({"features": ["resolved", "made_up"], "weights": {"a": _weights()}}, "not among this version's"),
    ],
)
def test_bad_reranker_files_are_refused_with_the_reason(data: dict[str, Any], message: str) -> None:
    with pytest.raises(RerankerError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Reranker.from_json(data)


def test_a_reranker_must_know_every_member(parts: Parts) -> None:
    only_model = Reranker({"model": _weights()})
    with pytest.raises(RerankerError, match="no weights for \\['garbled'\\]"):
        reranker_of(_ensemble(parts, only_model))
    with pytest.raises(RerankerError, match="no reranker.json"):
        reranker_of(_ensemble(parts, None))
    assert reranker_of(ScriptedGenerator({})) is None


# -- choosing ---------------------------------------------------------------------------------------------------


def test_the_supported_draft_wins_whichever_member_wrote_it(parts: Parts) -> None:
    from pgmr.memory import Memory

    resolver = Resolver(Memory.load(parts.memory_dir))
    for garbled_first in (True, False):
        ensemble = _ensemble(parts, garbled_first=garbled_first)
        drafts = generate_drafts(ensemble, [PARIS, HAMBURG])
        assert [[d.source for d in ds] for ds in drafts] == [[n for n, _ in ensemble.members]] * 2
        chosen = prepare_drafts([PARIS, HAMBURG], drafts, "pgmr", resolver, GroundingConfig(), SUPPORT)
        for item, question in zip(chosen, [PARIS, HAMBURG], strict=True):
            assert item.text == TARGETS[question]
            scores = {d.source: d for d in item.drafts}
            assert scores["model"].chosen and not scores["garbled"].chosen
            assert scores["model"].score > scores["garbled"].score
            assert scores["model"].signals["entities_in_question"] == 1.0
            assert scores["garbled"].signals["entities_in_question"] == 0.0


def test_agreement_is_counted_and_a_parse_error_never_wins(parts: Parts) -> None:
    from pgmr.memory import Memory

    resolver = Resolver(Memory.load(parts.memory_dir))
    # A reranker that would prefer the broken draft if scores alone decided.
    reranker = Reranker({"a": _weights(), "b": _weights(), "broken": _weights(bias=100.0)})
    drafts = [(Draft("a", TARGETS[PARIS]), Draft("b", TARGETS[PARIS]), Draft("broken", "SELECT ?x WHERE {"))]
    (item,) = prepare_drafts([PARIS], drafts, "pgmr", resolver, GroundingConfig(), reranker)
    by_source = {d.source: d for d in item.drafts}
    assert by_source["a"].chosen and by_source["broken"].status == "invalid"
    assert by_source["a"].signals["agreement"] == 0.5  # one of the two others wrote the same query
    assert by_source["broken"].signals["resolved"] == 0.0


class CountingResolver(Resolver):
    """The real resolver, counting the queries it is given."""

    resolved = 0

    def resolve_many(self, queries: Any, questions: Any = None) -> Any:
        self.resolved += len(queries)
        return super().resolve_many(queries, questions)


def test_a_text_several_members_wrote_is_resolved_once_per_question(parts: Parts) -> None:
    from pgmr.memory import Memory

    resolver = CountingResolver(Memory.load(parts.memory_dir))
    reranker = Reranker({n: _weights(min_confidence=1.0) for n in ("a", "b", "c")})
    drafts = [
        (Draft("a", GARBLED), Draft("b", TARGETS[PARIS]), Draft("c", TARGETS[PARIS])),
        # the same text for another question is that question's own draft: resolved again, with its question
        (Draft("a", TARGETS[PARIS]), Draft("b", TARGETS[PARIS]), Draft("c", GARBLED)),
    ]
    first, second = prepare_drafts([PARIS, HAMBURG], drafts, "pgmr", resolver, GroundingConfig(), reranker)
    assert resolver.resolved == 4
    assert first.text == TARGETS[PARIS] and [d.chosen for d in first.drafts] == [False, True, False]
    assert (
        first.drafts[1].score == first.drafts[2].score and first.drafts[1].signals == first.drafts[2].signals
    )
    assert first.drafts[1].signals["agreement"] == 0.5
    # The copy is its own object: the chosen draft is not among its own alternatives.
    assert [source for source, _ in first.alternatives] == ["c", "a"]
    assert all(alt is not first for _, alt in first.alternatives)
    assert not any(alt.drafts for _, alt in first.alternatives)
    assert second.text == TARGETS[PARIS] and second.question == HAMBURG


def test_one_draft_per_question_needs_no_reranker(parts: Parts) -> None:
    from pgmr.memory import Memory

    resolver = Resolver(Memory.load(parts.memory_dir))
    (item,) = prepare_drafts(
        [PARIS], [(Draft("model", TARGETS[PARIS]),)], "pgmr", resolver, GroundingConfig(), None
    )
    assert item.resolution is not None and item.drafts == ()
    with pytest.raises(ValueError, match="need a reranker"):
        prepare_drafts(
            [PARIS], [(Draft("a", "x"), Draft("b", "y"))], "pgmr", resolver, GroundingConfig(), None
        )


def test_pipeline_ask_reports_every_draft(parts: Parts) -> None:
    pipeline = Pipeline(_ensemble(parts), _memory(parts))
    result = pipeline.ask(PARIS)
    assert result.status == "resolved" and result.intermediate == TARGETS[PARIS]
    payload = result.to_json()
    assert [d["source"] for d in payload["drafts"]] == ["garbled", "model"]
    assert [d["chosen"] for d in payload["drafts"]] == [False, True]
    assert result.to_row()["drafts"] == payload["drafts"]
    # A single model's answers carry no drafts.
    plain = Pipeline(load_trained(parts.model_dir), pipeline.memory).ask(PARIS)
    assert plain.drafts == () and "drafts" not in plain.to_row()


def _memory(parts: Parts) -> Any:
    from pgmr.memory import Memory

    return Memory.load(parts.memory_dir)


# -- ensembles on disk -------------------------------------------------------------------------------------------


def _ensemble_dir(tmp_path: Path, parts: Parts, *, reranker: bool = True) -> Path:
    directory = tmp_path / "ensemble"
    directory.mkdir()
    members = [
        {"name": "first", "path": str(parts.model_dir)},
        {"name": "second", "path": str(parts.model_dir)},
    ]
    card = {"backend": "ensemble", "mode": "pgmr", "members": members}
    (directory / "model_card.json").write_text(json.dumps(card), encoding="utf-8")
    if reranker:
        weights = Reranker({"first": _weights(min_confidence=1.0), "second": _weights(min_confidence=1.0)})
        (directory / RERANKER_FILE).write_text(json.dumps(weights.to_json()), encoding="utf-8")
    return directory


def test_an_ensemble_directory_loads_and_answers_through_the_cli(tmp_path: Path, parts: Parts) -> None:
    directory = _ensemble_dir(tmp_path, parts)
    generator = load_trained(directory)
    assert isinstance(generator, EnsembleGenerator) and [n for n, _ in generator.members] == [
        "first",
        "second",
    ]
    args = ["--data-dir", str(parts.data_dir)]
    result = runner.invoke(
        app,
        [
            *args,
            "ask",
            "--model",
            str(directory),
            "--memory",
            str(parts.memory_dir),
            "--store",
            "none",
            PARIS,
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    # without a store the bare "Paris" resolves by the prior alone (test_pipeline.py): the query is what counts
    assert payload["status"] == "resolved" and "wdt:P1376 ?x" in payload["sparql"]
    assert [d["chosen"] for d in payload["drafts"]] == [True, False]  # a tie goes to the first member

    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": PARIS}) + "\n", encoding="utf-8")
    out = tmp_path / "p.jsonl"
    result = runner.invoke(
        app,
        [
            *args,
            "generate",
            str(directory),
            str(questions),
            "--memory",
            str(parts.memory_dir),
            "--resolve",
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = read_jsonl(out)
    assert row["prediction"] == TARGETS[PARIS] and row["status"] == "resolved"
    assert [(d["source"], d["text"]) for d in row["drafts"]] == [
        ("first", TARGETS[PARIS]),
        ("second", TARGETS[PARIS]),
    ]


def test_an_ensemble_without_a_reranker_writes_drafts_but_does_not_resolve(
    tmp_path: Path, parts: Parts
) -> None:
    directory = _ensemble_dir(tmp_path, parts, reranker=False)
    questions = tmp_path / "q.jsonl"
    questions.write_text(json.dumps({"id": "1", "question": PARIS}) + "\n", encoding="utf-8")
    args = [
        "--data-dir",
        str(parts.data_dir),
        "generate",
        str(directory),
        str(questions),
        "-o",
        str(tmp_path / "p.jsonl"),
    ]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (row,) = read_jsonl(tmp_path / "p.jsonl")
    assert [d["source"] for d in row["drafts"]] == ["first", "second"]
    result = runner.invoke(app, [*args, "--memory", str(parts.memory_dir), "--resolve"])
    assert result.exit_code == 2 and "fit one with pgmr ensemble fit-rerank" in " ".join(
        result.output.split()
    )
    with pytest.raises(PipelineError, match="no reranker.json"):
        Pipeline.load(parts.config(model_dir=directory, store=None))


@pytest.mark.parametrize(
    ("members", "message"),
    [
        ([], "non-empty 'members'"),
        ([{"name": "a"}], "a 'name' and a 'path'"),
        ([{"name": "a", "path": "nowhere"}], "model_card.json"),
    ],
)
def test_bad_ensemble_cards_fail_with_the_reason(tmp_path: Path, members: list[Any], message: str) -> None:
    (tmp_path / "model_card.json").write_text(
        json.dumps({"backend": "ensemble", "mode": "pgmr", "members": members}), encoding="utf-8"
    )
    with pytest.raises(ModelCardError, match=message):
        load_trained(tmp_path)


def _workspace(tmp_path: Path, parts: Parts, directory: Path) -> Any:
    from pgmr.experiments.common import ExperimentSettings, Workspace

    settings = ExperimentSettings(
        data_dir=parts.data_dir,
        out_dir=tmp_path / "out",
        models={"pgmr": directory},
        memory_dir=parts.memory_dir,
        progress=False,
    )
    return Workspace(settings)


def test_experiment_rows_record_the_choice(tmp_path: Path, parts: Parts) -> None:
    from pgmr.datasets import QARecord
    from pgmr.experiments.common import run_system, system_spec

    directory = _ensemble_dir(tmp_path, parts)
    ws = _workspace(tmp_path, parts, directory)
    records = [QARecord("1", PARIS, "SELECT ?x WHERE { wd:Q167646 wdt:P1376 ?x }", "test")]
    entry = run_system(
        ws, system_spec("pgmr", directory), records, experiment="t", dataset="test", catalog=None
    )
    assert entry["status"] == "ok", entry
    (row,) = read_jsonl(tmp_path / "out" / "pgmr" / "predictions.jsonl")
    assert row["prediction"] == TARGETS[PARIS] and [d["chosen"] for d in row["drafts"]] == [True, False]
    assert entry["overall"]["query_em"] == 1.0


# -- fitting -----------------------------------------------------------------------------------------------------


def test_fitting_learns_to_trust_the_member_whose_support_tells() -> None:
    """Synthetic questions: member "a" is right when its support is high, "b" is right otherwise."""
    from pgmr.experiments import rerank_fit

    questions = []
    for i in range(200):
        conf = (i % 20) / 20
        signals = {**dict.fromkeys(FEATURES, 0.0), "resolved": 1.0}
        a = {"source": "a", "signals": {**signals, "min_confidence": conf}, "right": conf >= 0.5}
        b = {"source": "b", "signals": {**signals, "min_confidence": 0.5}, "right": conf < 0.5}
        questions.append({"id": str(i), "drafts": [a, b]})
    reranker = rerank_fit.fit(questions, ["a", "b"], 1.0)
    assert rerank_fit.accuracy(questions, rerank_fit.chooser(reranker)) >= 0.95
    assert reranker.weights["a"]["min_confidence"] > 0
    figures = rerank_fit.report(questions, ["a", "b"], held_out=50)
    assert figures["questions"] == {"first": 50, "rest": 150}
    right_a = sum(q["drafts"][0]["right"] for q in questions[:50]) / 50
    assert figures["first"]["a alone"] == pytest.approx(right_a) and figures["first"]["oracle"] == 1.0
    assert figures["first"]["reranked (fitted on the rest)"] >= 0.95
    assert figures["rest"]["reranked (two-fold)"] >= 0.9
    assert "first" not in rerank_fit.report(questions, ["a", "b"])  # nothing held out

    same = [{"id": q["id"], "drafts": [{**d, "right": True} for d in q["drafts"]]} for q in questions]
    with pytest.raises(rerank_fit.NothingToFit):
        rerank_fit.fit(same, ["a", "b"])


def test_draft_outcomes_resolve_every_draft_and_score_it_against_gold(parts: Parts) -> None:
    from pgmr.datasets import QARecord
    from pgmr.experiments.rerank_fit import draft_outcomes
    from pgmr.pipeline import StageConfig
    from pgmr.resolver import ResolverConfig

    gold = {"1": QARecord("1", PARIS, "SELECT ?x WHERE { wd:Q167646 wdt:P1376 ?x }", "test")}
    drafts = [(Draft("garbled", GARBLED), Draft("model", TARGETS[PARIS]))]
    stages = StageConfig(resolver=ResolverConfig())
    resolver = Resolver(_memory(parts), stages.resolver)
    (question,) = draft_outcomes(["1"], [PARIS], drafts, gold, resolver, stages)
    assert [(d["source"], d["right"]) for d in question["drafts"]] == [("garbled", False), ("model", True)]
    garbled, model = (d["signals"] for d in question["drafts"])
    assert set(model) == set(FEATURES) and model["resolved"] == garbled["resolved"] == 1.0
    assert model["min_confidence"] > garbled["min_confidence"]
    with pytest.raises(ValueError, match="no gold query"):
        draft_outcomes(["2"], [PARIS], drafts, gold, resolver, stages)


# -- the KG check across drafts -----------------------------------------------------------------------------------

# Resolves as well as the Paris target, but its filter leaves nothing on the store, whatever the candidates.
FILTERED = (
    "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x FILTER(?x = wd:entity0) }\n"
    "entity0 = [ENT] Paris [/ENT]\nrelation0 = [REL] capital of [/REL]"
)


@pytest.mark.parametrize("kg_check", [True, False])
def test_a_draft_without_answers_gives_way_to_one_with_answers(parts: Parts, kg_check: bool) -> None:
    from pgmr.pipeline import PipelineConfig
    from pgmr.stores import open_store

    members = [
        ("filtered", ScriptedGenerator({PARIS: FILTERED})),
        ("model", ScriptedGenerator({PARIS: TARGETS[PARIS]})),
    ]
    favour_filtered = Reranker({"filtered": _weights(bias=10.0), "model": _weights()})
    store = open_store(str(parts.kg_file))
    try:
        pipeline = Pipeline(
            EnsembleGenerator(members, favour_filtered.to_json()),
            _memory(parts),
            store=store,
            config=PipelineConfig(kg_check=kg_check),
        )
        result = pipeline.ask(PARIS)
    finally:
        store.close()
    chosen = [d.source for d in result.drafts if d.chosen]
    if kg_check:
        assert result.status == "answered" and result.intermediate == TARGETS[PARIS], result.to_json()
        assert chosen == ["model"] and "Q142" in {a.id for a in result.answers}
    else:  # without the KG check the reranker's choice stands, answers or not
        assert result.status == "empty" and result.intermediate == FILTERED and chosen == ["filtered"]


def test_experiments_that_reuse_outputs_get_the_chosen_draft(tmp_path: Path, parts: Parts) -> None:
    """The refusal and distractor experiments generate once and resolve against other memories: an ensemble's
    choice is made once, with the full memory."""
    from pgmr.datasets import QARecord
    from pgmr.experiments.outputs import pgmr_outputs

    directory = _ensemble_dir(tmp_path, parts)
    ws = _workspace(tmp_path, parts, directory)
    records = [QARecord("1", PARIS, "SELECT ?x WHERE { wd:Q90 wdt:P1376 ?x }", "test")]
    outputs, source = pgmr_outputs(ws, records, None)
    assert outputs == [TARGETS[PARIS]] and source["model"] == str(directory)
    (row,) = read_jsonl(tmp_path / "out" / "generated.jsonl")
    assert row["prediction"] == TARGETS[PARIS]


def test_post_ask_of_an_ensemble_directory_shows_the_drafts(tmp_path: Path, parts: Parts) -> None:
    """`pgmr serve --model ENSEMBLE`: the app loads the ensemble by its card; the response model validates the
    drafts (OpenAPI schema `DraftOut`)."""
    from starlette.testclient import TestClient

    from pgmr.service import create_app

    config = parts.config(model_dir=_ensemble_dir(tmp_path, parts))
    with TestClient(create_app(config)) as client:
        body = client.post("/ask", json={"question": PARIS}).json()
        schema = client.get("/openapi.json").json()["components"]["schemas"]
    assert body["status"] == "answered" and body["intermediate"] == TARGETS[PARIS]
    assert [(d["source"], d["chosen"]) for d in body["drafts"]] == [("first", True), ("second", False)]
    assert set(body["drafts"][0]["signals"]) == set(FEATURES)
    assert "DraftOut" in schema


def test_an_experiment_with_an_ensemble_that_cannot_choose_fails_before_generating(
    tmp_path: Path, parts: Parts
) -> None:
    from pgmr.experiments.common import ExperimentError, load_generator, system_spec

    directory = _ensemble_dir(tmp_path, parts, reranker=False)
    ws = _workspace(tmp_path, parts, directory)
    with pytest.raises(ExperimentError, match="no reranker.json"):
        load_generator(system_spec("pgmr", directory), ws.settings)
