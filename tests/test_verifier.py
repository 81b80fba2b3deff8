"""The draft verifier (pgmr.generators.verifier): verbalization, a real (one-layer) cross-encoder trained here,
its directory format, resuming, the `pgmr train-verifier` command and the reranker's use of its score."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.experiments.verifier_fit import DraftRowsError, verifier_examples
from pgmr.generators.ensemble import RERANKER_FILE, EnsembleGenerator, generate_drafts
from pgmr.generators.trained import load_trained
from pgmr.generators.verifier import (
    CHECKPOINT,
    VERIFIER_DIR,
    Verifier,
    VerifierConfig,
    VerifierError,
    VerifierExample,
    memory_describer,
    train_verifier,
    verbalize,
)
from pgmr.pipeline.rerank import FEATURES, Reranker, RerankerError, prepare_drafts, reranker_of
from pgmr.resolver import Resolver
from pgmr.resolver.grounding import GroundingConfig
from pgmr.testing import ScriptedGenerator
from test_pipeline import PARIS, TARGETS, Parts

runner = CliRunner()
NAMES = {
    "Q90": ("Paris", "capital city of France"),
    "Q142": ("France", "country in Western Europe"),
    "P1376": ("capital of", "country, state or other division of which the place is the seat of government"),
    "P585": ("point in time", None),
}
# The tiny model's right query for PARIS, and a draft with another relation the memory also knows well.
WRONG = "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\nentity0 = [ENT] Paris [/ENT]\nrelation0 = [REL] capital [/REL]"


def test_verbalize_writes_labels_and_reads_the_same_for_equal_queries() -> None:
    gold = (
        "PREFIX wd: <http://www.wikidata.org/entity/>\n"
        "SELECT DISTINCT ?Answer WHERE { wd:Q90 p:P1376 ?s . ?s ps:P1376 ?Answer . ?s pq:P585 ?t . }"
    )
    draft = "select distinct ?x where { wd:Q90 p:P1376 ?st . ?st ps:P1376 ?x . ?st pq:P585 ?y }"
    text = verbalize(gold, NAMES.get, description_words=2)
    assert text == (
        "select distinct ?v0 where { [Paris (capital city)] <capital of> ?v1 . ?v1 <capital of> ?v0 . "
        "?v1 <point in time> ?v2 }"
    )
    assert verbalize(draft, NAMES.get, description_words=2) == text
    # An ID the lookup does not know is written as it is; a description-less entity has no parentheses.
    assert (
        verbalize("ASK { wd:Q1 wdt:P9 wd:Q142 }", NAMES.get, description_words=0)
        == "ask { [Q1] <P9> [France] }"
    )
    assert verbalize('SELECT ?x WHERE { "unterminated }', NAMES.get) is None


def _rows() -> list[dict[str, Any]]:
    right = "SELECT ?x WHERE { wd:Q90 wdt:P1376 ?x }"
    return [
        {  # one right and one wrong draft, and a draft that did not resolve
            "question": PARIS,
            "gold": right,
            "drafts": [
                {"sparql": "select ?answer where { wd:Q90 wdt:P1376 ?answer }"},
                {"sparql": "SELECT ?x WHERE { ?x wdt:P1376 wd:Q90 }"},
                {"sparql": None},
            ],
        },
        {  # no draft right: the gold query is the right example
            "question": "Which country is Paris the capital of?",
            "gold": right,
            "drafts": [{"sparql": "SELECT ?x WHERE { wd:Q142 wdt:P1376 ?x }"}],
        },
    ]


def test_examples_are_the_distinct_drafts_labelled_by_query_match_and_gold_when_none_is_right() -> None:
    examples, counts = verifier_examples(_rows(), NAMES.get, description_words=0)
    assert [(e.question == PARIS, e.right) for e in examples] == [
        (True, True),
        (True, False),
        (False, False),
        (False, True),
    ]
    assert examples[0].text == "select ?v0 where { [Paris] <capital of> ?v0 }"
    assert counts == {
        "questions": 2,
        "examples": 4,
        "right": 2,
        "with_wrong_draft": 2,
        "gold_added": 1,
        "gold_negatives": 0,
    }
    with pytest.raises(DraftRowsError, match="row 1: expected 'question', 'gold' and 'drafts'"):
        verifier_examples([{"question": PARIS, "prediction": "x"}], NAMES.get)


def test_gold_negatives_are_one_edit_from_the_gold_query_over_a_real_memory(parts: Parts) -> None:
    from pgmr.experiments.gold_negatives import GoldNegatives
    from pgmr.memory import Memory

    memory = Memory.load(parts.memory_dir)
    golds = [
        "SELECT ?x WHERE { wd:Q90 wdt:P1376 ?x }",
        "ASK { wd:Q183 wdt:P36 wd:Q64 }",
        'SELECT ?x WHERE { wd:Q1055 p:P1082 ?s . ?s ps:P1082 ?x . ?s pq:P585 "2020" }',
    ]
    negatives = GoldNegatives(memory, golds, neighbours=1)
    # Neighbours by the memory's embeddings, among the properties the gold queries use.
    assert negatives.relation_neighbours["P1376"] == ("P36",)
    # P585 is not in this memory: it neither gets nor gives a swap.
    assert set(negatives.relation_neighbours) == {"P1376", "P36", "P1082"}
    # Homonyms first (the memory's other "Paris" and "Hamburg"), the nearest neighbour otherwise.
    assert negatives.entity_swaps["Q90"] in {("Q167646",), ("Q830149",)}
    assert negatives.entity_swaps["Q1055"] == ("Q2103412",)
    assert negatives.entity_swaps["Q183"] and negatives.entity_swaps["Q183"][0] != "Q183"
    import random

    made = negatives.candidates(golds[0], random.Random(0))
    assert made["relation"] == "SELECT ?x WHERE { wd:Q90 wdt:P36 ?x }"
    assert made["reversed"] == "SELECT ?x WHERE { ?x wdt:P1376 wd:Q90 }"
    assert made["entity"] == f"SELECT ?x WHERE {{ wd:{negatives.entity_swaps['Q90'][0]} wdt:P1376 ?x }}"
    assert negatives.candidates(golds[1], random.Random(0))["reversed"] == "ASK { wd:Q64 wdt:P36 wd:Q183 }"
    # A statement's property is swapped everywhere it occurs; p:/ps: triples and literals are not turned round.
    made = negatives.candidates(golds[2], random.Random(1))
    assert "reversed" not in made
    swapped = made["relation"]
    assert swapped.count("P1082") in (0, 2) and swapped != golds[2]
    # The same question index draws the same negatives; count caps them.
    assert negatives(5, golds[0], 3) == negatives(5, golds[0], 3) and len(negatives(5, golds[0], 3)) == 3
    assert len(negatives(5, golds[0], 1)) == 1
    assert negatives(0, 'SELECT ?x WHERE { "open }', 3) == []
    # As examples: wrong, and never one that reads like a draft already there.
    examples, counts = verifier_examples(
        _rows(), NAMES.get, description_words=0, negatives=negatives, negatives_per_question=3
    )
    assert counts["gold_negatives"] == sum(not e.right for e in examples) - 2
    assert counts["with_wrong_draft"] == 2 and counts["gold_negatives"] >= 4
    texts = [(e.question, e.text) for e in examples]
    assert len(texts) == len(set(texts))


def _examples(describe: Any) -> list[VerifierExample]:
    from pgmr.conversion import fill
    from pgmr.query import parse

    right = fill(parse(TARGETS[PARIS]), {"entity0": "Q90", "relation0": "P1376"})
    wrong = fill(parse(WRONG), {"entity0": "Q90", "relation0": "P36"})
    pairs = [(right, True), (wrong, False)]
    return [VerifierExample(PARIS, verbalize(q, describe) or "", ok) for q, ok in pairs] * 8


@pytest.fixture(scope="module")
def tiny_verifier(parts: Parts, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A one-layer verifier trained to prefer the right query for PARIS over one with the wrong relation."""
    from pgmr.memory import Memory

    out = tmp_path_factory.mktemp("verifier")
    describe = memory_describer(Memory.load(parts.memory_dir))
    config = VerifierConfig(max_steps=30, batch_size=8, learning_rate=1e-3, bf16=False, checkpoint_every=10)
    train_verifier(_examples(describe), out, config, layers=1)
    return out / "model"


def test_a_trained_verifier_scores_the_right_query_higher_and_round_trips_packed(
    tiny_verifier: Path, parts: Parts, tmp_path: Path
) -> None:
    from pgmr.memory import Memory

    verifier = Verifier.load(tiny_verifier, bf16=False)
    assert verifier.card["training"]["steps"] == 30 and verifier.card["packed"] is True
    assert not (tiny_verifier.parent / CHECKPOINT).exists()  # removed once the model is written
    describe = memory_describer(Memory.load(parts.memory_dir))
    right, wrong = _examples(describe)[:2]
    scores = verifier.score([PARIS, PARIS], [right.text, wrong.text])
    assert scores[0] > scores[1] + 1.0
    # Saved again unpacked (float32) and loaded: the same scores, up to the int8 rounding already in it.
    verifier.save(tmp_path / "float", packed=False)
    again = Verifier.load(tmp_path / "float", bf16=False)
    assert again.score([PARIS], [right.text]) == pytest.approx(scores[:1], abs=1e-4)


def test_bad_verifier_directories_fail_with_the_reason(tiny_verifier: Path, tmp_path: Path) -> None:
    import shutil

    with pytest.raises(VerifierError, match="not a verifier"):
        Verifier.load(tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(tiny_verifier, broken)
    (broken / "weights.int8.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(VerifierError, match="unreadable weights"):
        Verifier.load(broken)
    mismatched = tmp_path / "mismatched"
    shutil.copytree(tiny_verifier, mismatched)
    config = json.loads((mismatched / "config.json").read_text())
    (mismatched / "config.json").write_text(json.dumps({**config, "num_hidden_layers": 2}))
    with pytest.raises(VerifierError, match="weights do not match"):
        Verifier.load(mismatched)


def test_training_resumes_from_its_checkpoint_and_refuses_another_runs(tmp_path: Path) -> None:
    examples = [VerifierExample("q", "a", True), VerifierExample("q", "b", False)] * 4
    config = VerifierConfig(max_steps=6, batch_size=4, bf16=False, checkpoint_every=3)
    seen: list[int] = []

    def stop_at_5(step: int, total: int, loss: float) -> None:
        seen.append(step)
        if step == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        train_verifier(examples, tmp_path, config, layers=1, progress=stop_at_5)
    assert (tmp_path / CHECKPOINT).is_file() and not (tmp_path / "model").exists()
    with pytest.raises(VerifierError, match="from another run"):
        train_verifier(examples[:4], tmp_path, config, layers=1)
    seen.clear()
    train_verifier(examples, tmp_path, config, layers=1, progress=lambda s, t, loss: seen.append(s))
    assert seen == [4, 5, 6]  # from the step-3 checkpoint on
    assert Verifier.load(tmp_path / "model").card["training"]["steps"] == 6


def test_training_continues_from_a_packed_verifier(tiny_verifier: Path, parts: Parts, tmp_path: Path) -> None:
    from pgmr.memory import Memory

    describe = memory_describer(Memory.load(parts.memory_dir))
    start = Verifier.load(tiny_verifier)
    texts = [e.text for e in _examples(describe)[:2]]
    before = start.score([PARIS] * 2, texts)
    config = VerifierConfig(max_steps=3, batch_size=4, learning_rate=1e-3, bf16=False)
    # The examples say the opposite of what the tiny verifier learned: continuing moves its scores that way.
    flipped = [VerifierExample(e.question, e.text, not e.right) for e in _examples(describe)]
    continued = train_verifier(flipped, tmp_path / "run", config, init_from=tiny_verifier)
    after = continued.score([PARIS] * 2, texts)
    assert before[0] > before[1] and after[0] - after[1] < before[0] - before[1]
    assert continued.model.config.num_hidden_layers == 1
    assert continued.card["training"]["init_from"] == str(tiny_verifier)
    with pytest.raises(ValueError, match="give layers or init_from"):
        train_verifier(flipped, tmp_path / "other", config, layers=1, init_from=tiny_verifier)
    with pytest.raises(VerifierError, match="not a verifier"):
        train_verifier(flipped, tmp_path / "other", config, init_from=tmp_path)


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"epochs": 0.0}, "epochs"),
        ({"batch_size": 0}, "batch_size"),
        ({"learning_rate": 2.0}, "learning_rate"),
    ],
)
def test_bad_settings_are_refused(changes: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        VerifierConfig(**changes)


def test_the_reranker_follows_the_verifier_when_it_weighs_it(tiny_verifier: Path, parts: Parts) -> None:
    from pgmr.memory import Memory

    weights = {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0), "verifier": 1.0}
    verifier = Verifier.load(tiny_verifier)
    ensemble = EnsembleGenerator(
        [("wrong", ScriptedGenerator(lambda q: WRONG)), ("model", load_trained(parts.model_dir))],
        {"weights": {"wrong": weights, "model": weights}},
        verifier=verifier,
    )
    reranker = reranker_of(ensemble)
    assert reranker is not None and reranker.verifier is verifier
    resolver = Resolver(Memory.load(parts.memory_dir))
    [chosen] = prepare_drafts(
        [PARIS], generate_drafts(ensemble, [PARIS]), "pgmr", resolver, GroundingConfig(), reranker
    )
    scores = {d.source: d for d in chosen.drafts}
    assert chosen.text == TARGETS[PARIS] and scores["model"].chosen
    assert scores["model"].signals["verifier"] > scores["wrong"].signals["verifier"]
    # The verifier's call is timed as its own stage, once per question, after the drafts are resolved.
    # Two distinct drafts were parsed and resolved, yet each stage is listed once (ask's timing line).
    stages = [stage for stage, _ in chosen.timer.stages]
    assert stages == ["parse", "resolve", "verify"]
    # The same weights without the verifier cannot tell the drafts apart: the first member's wins the tie.
    ensemble.verifier = None
    with pytest.raises(RerankerError, match="weighs a draft verifier, but none was loaded"):
        reranker_of(ensemble)


def test_a_reranker_fitted_before_the_verifier_weighs_it_zero() -> None:
    old = {"bias": 0.5, **dict.fromkeys(FEATURES[:-1], 1.0)}
    reranker = Reranker.from_json({"features": list(FEATURES[:-1]), "weights": {"m": old}})
    assert reranker.weights["m"]["verifier"] == 0.0 and not reranker.uses_verifier


def test_train_verifier_command_and_an_ensemble_directory_with_its_verifier(
    tiny_verifier: Path, parts: Parts, tmp_path: Path
) -> None:
    import shutil

    drafts = tmp_path / "drafts.jsonl"
    drafts.write_text("".join(json.dumps(r) + "\n" for r in _rows()), encoding="utf-8")
    result = runner.invoke(
        app,
        ["train-verifier", str(drafts), "-o", str(tmp_path / "run"), "--memory", str(parts.memory_dir)]
        + ["--max-steps", "2", "--batch-size", "2", "--layers", "1", "--no-bf16"],
    )
    assert result.exit_code == 0, result.output
    assert "2 questions, 4 examples (2 right)" in result.output
    assert Verifier.load(tmp_path / "run" / "model").card["data"]["gold_added"] == 1
    result = runner.invoke(
        app,
        ["train-verifier", str(drafts), "-o", str(tmp_path / "run-neg"), "--memory", str(parts.memory_dir)]
        + ["--max-steps", "2", "--batch-size", "2", "--layers", "1", "--no-bf16", "--gold-negatives", "2"],
    )
    assert result.exit_code == 0, result.output
    data = Verifier.load(tmp_path / "run-neg" / "model").card["data"]
    assert data["gold_negatives"] >= 3 and data["examples"] == 4 + data["gold_negatives"]
    assert f"{data['gold_negatives']} wrong queries made from gold ones" in result.output
    result = runner.invoke(
        app,
        ["train-verifier", str(drafts), "-o", str(tmp_path / "run-on"), "--memory", str(parts.memory_dir)]
        + ["--max-steps", "1", "--batch-size", "2", "--no-bf16", "--init-from", str(tiny_verifier)],
    )
    assert result.exit_code == 0, result.output
    assert Verifier.load(tmp_path / "run-on" / "model").card["training"]["init_from"] == str(tiny_verifier)
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "q"}\n', encoding="utf-8")
    result = runner.invoke(
        app, ["train-verifier", str(bad), "-o", str(tmp_path / "x"), "--memory", str(parts.memory_dir)]
    )
    assert result.exit_code == 2 and "expected 'question', 'gold' and 'drafts'" in result.output
    # An ensemble directory with a verifier loads it; a broken one is refused with the reason.
    directory = tmp_path / "ensemble"
    directory.mkdir()
    members = [
        {"name": "first", "path": str(parts.model_dir)},
        {"name": "second", "path": str(parts.model_dir)},
    ]
    (directory / "model_card.json").write_text(
        json.dumps({"backend": "ensemble", "mode": "pgmr", "members": members})
    )
    weights = {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0), "verifier": 1.0}
    (directory / RERANKER_FILE).write_text(json.dumps({"weights": {"first": weights, "second": weights}}))
    shutil.copytree(tiny_verifier, directory / VERIFIER_DIR)
    loaded = load_trained(directory)
    assert isinstance(loaded, EnsembleGenerator) and isinstance(loaded.verifier, Verifier)
    # Drafts read from a file (the experiments' --predictions) are chosen among with the verifier too.
    from pgmr.experiments.outputs import _reranker_at
    from pgmr.experiments.settings import ExperimentError

    assert isinstance(_reranker_at(directory, ["first", "second"]).verifier, Verifier)
    shutil.move(directory / VERIFIER_DIR, tmp_path / "aside")
    with pytest.raises(ExperimentError, match="weighs a draft verifier, but none was loaded"):
        _reranker_at(directory, ["first", "second"])
    shutil.move(tmp_path / "aside", directory / VERIFIER_DIR)
    (directory / VERIFIER_DIR / "model_card.json").write_text("{}")
    from pgmr.generators.seq2seq.card import ModelCardError

    with pytest.raises(ModelCardError, match="not a verifier's"):
        load_trained(directory)
