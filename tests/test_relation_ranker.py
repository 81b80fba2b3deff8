"""The relation ranker: candidates from a real (tiny) structured model, listwise training on a 1-layer MiniLM
that learns its slots, resume, int8 packing, the combination rule, and the structured generator using it
through its card."""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from pgmr.generators.structured.ranker import RankerConfig, RelationRanker, RelationRankerError
from pgmr.generators.structured.ranker_train import RankerTrainConfig


def test_settings_out_of_range_are_refused() -> None:
    with pytest.raises(RelationRankerError, match="top_k"):
        RankerConfig(top_k=1)
    with pytest.raises(RelationRankerError, match="weight"):
        RankerConfig(weight=-1.0)
    with pytest.raises(RelationRankerError, match="weight"):
        RankerConfig(weight=math.nan)
    with pytest.raises(ValueError, match="candidates"):
        RankerTrainConfig(candidates=4, negatives=4)
    with pytest.raises(ValueError, match="positive"):
        RankerTrainConfig(max_steps=0)


@pytest.fixture(scope="module")
def ranker_run(tiny_structured, tmp_path_factory: pytest.TempPathFactory):
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.generators.structured.ranker_train import ranker_examples, train_ranker

    out, _, targets, vocab, _ = tiny_structured
    generator = StructuredGenerator.load(out / "model", precision="fp32")
    examples = ranker_examples(generator, targets, candidates=6)
    config = RankerTrainConfig(
        max_steps=60,
        batch_size=6,
        negatives=3,
        candidates=6,
        learning_rate=1e-3,
        head_learning_rate=1e-2,
        warmup_steps=5,
        checkpoint_steps=30,
        encoder_layers=1,
    )
    run = tmp_path_factory.mktemp("ranker") / "run"
    card = train_ranker(examples, vocab, run, config)
    return run, card, examples, vocab, config, generator, out / "model"


def _first_place(ranker: RelationRanker, examples, vocab) -> float:
    from pgmr.generators.structured.ranker import choice_text

    right = 0
    for ex in examples:
        texts = [choice_text(vocab.relations[c].label, vocab.relations[c].description) for c in ex.candidates]
        scores = ranker.scores([(ex.question, t) for t in texts])
        right += ex.candidates[max(range(len(scores)), key=scores.__getitem__)] == ex.gold
    return right / len(examples)


def test_examples_hold_the_gold_property_among_the_structured_models_best(ranker_run: Any) -> None:
    _, _, examples, vocab, *_ = ranker_run
    assert len(examples) >= 40  # every gold relation slot of 40 records
    golds: dict[str, set[int]] = {}
    for ex in examples:
        golds.setdefault(ex.question, set()).add(ex.gold)
    for ex in examples:
        assert ex.gold in ex.candidates and len(ex.candidates) == 6 and len(set(ex.candidates)) == 6
        assert all(0 <= c < len(vocab.relations) for c in ex.candidates)
        # A question's other gold properties are right for it, so never its negatives.
        assert not (golds[ex.question] - {ex.gold}) & set(ex.candidates)
    assert any(len(g) > 1 for g in golds.values())


def test_tiny_training_learns_to_rank_the_gold_property_first(ranker_run: Any) -> None:
    run, card, examples, vocab, *_ = ranker_run
    assert card["trained"]["steps"] == 60 and (run / "ranker" / "model_card.json").is_file()
    import torch

    losses = torch.load(run / "checkpoint.pt", weights_only=False)["state"]["losses"]
    # Chance among 4 is ln 4 = 1.39, where a head that learns nothing stays.
    assert sum(losses[-15:]) / 15 < 0.8 * sum(losses[:15]) / 15, losses
    ranker = RelationRanker.load(run / "ranker")
    assert _first_place(ranker, examples, vocab) >= 0.5  # chance: 1 in 6


def test_rerun_resumes_and_another_runs_checkpoint_is_refused(ranker_run: Any, tmp_path: Path) -> None:
    from pgmr.generators.structured.ranker_train import train_ranker

    run, _, examples, vocab, config, *_ = ranker_run
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    card = train_ranker(examples, vocab, copy, replace(config, max_steps=70))
    assert card["trained"]["steps"] == 70
    with pytest.raises(ValueError, match="another run"):
        train_ranker(examples, vocab, copy, replace(config, max_steps=80, seed=3))


def test_packed_ranker_scores_as_the_full_one_and_bad_directories_are_refused(
    ranker_run: Any, tmp_path: Path
) -> None:
    run, _, examples, vocab, *_ = ranker_run
    full = RelationRanker.load(run / "ranker")
    full.save(tmp_path / "packed", packed=True)
    packed = RelationRanker.load(tmp_path / "packed")
    assert (tmp_path / "packed" / "weights.int8.safetensors").is_file()
    pairs = [(ex.question, vocab.relations[c].label) for ex in examples[:5] for c in ex.candidates]
    a, b = full.scores(pairs), packed.scores(pairs)
    spread = max(a) - min(a)
    assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 0.1 * spread
    broken = tmp_path / "broken"
    shutil.copytree(tmp_path / "packed", broken)
    (broken / "weights.int8.safetensors").unlink()
    with pytest.raises(RelationRankerError, match="no weights"):
        RelationRanker.load(broken)
    card = json.loads((broken / "model_card.json").read_text())
    (broken / "model_card.json").write_text(json.dumps({**card, "backend": "structured"}))
    with pytest.raises(RelationRankerError, match="backend"):
        RelationRanker.load(broken)
    (broken / "model_card.json").write_text(json.dumps({**card, "top_k": 0}))
    with pytest.raises(RelationRankerError, match="top_k"):
        RelationRanker.load(broken)


def test_combination_adds_the_weighted_log_softmax_of_the_rankers_scores(ranker_run: Any) -> None:
    run, *_ = ranker_run
    ranker = RelationRanker.load(run / "ranker")
    ranker.config = RankerConfig(weight=0.0)
    assert ranker.combine([-0.1, -2.0, -3.0], [5.0, 9.0, 1.0]) == [-0.1, -2.0, -3.0]
    ranker.config = RankerConfig(weight=2.0)
    combined = ranker.combine([-0.1, -2.0], [0.0, math.log(3.0)])  # softmax 1/4, 3/4
    assert combined == pytest.approx([-0.1 + 2 * math.log(0.25), -2.0 + 2 * math.log(0.75)])
    with pytest.raises(ValueError):
        ranker.combine([-0.1], [0.0, 1.0])


def test_the_generator_uses_the_ranker_its_card_names(ranker_run: Any, tmp_path: Path) -> None:
    from pgmr.generators.structured.generator import StructuredGenerator
    from pgmr.generators.structured.ranker import choice_text
    from pgmr.query import parse

    run, _, examples, vocab, _, plain, trained = ranker_run
    model_dir = tmp_path / "structured"
    shutil.copytree(trained, model_dir)
    RelationRanker.load(run / "ranker").save(tmp_path / "ranker", card={})
    card = json.loads((model_dir / "model_card.json").read_text())
    questions = sorted({ex.question for ex in examples})[:12]
    # Weight 0: the ranker only reorders ties, so the texts are the plain model's.
    _set_ranker(tmp_path / "ranker", top_k=10, weight=0.0)
    (model_dir / "model_card.json").write_text(json.dumps({**card, "relation_ranker": "../ranker"}))
    ranked = StructuredGenerator.load(model_dir, precision="fp32")
    assert ranked.ranker is not None
    assert ranked.generate(questions) == plain.generate(questions)
    # Every property a candidate and the ranker's weight overwhelming: each relation slot of a one-relation
    # query takes the property the ranker scores best for the question.
    _set_ranker(tmp_path / "ranker", top_k=len(vocab.relations), weight=1e4)
    ranked = StructuredGenerator.load(model_dir, precision="fp32")
    texts = [choice_text(c.label, c.description) for c in vocab.relations]
    checked = 0
    for question, text in zip(questions, ranked.generate(questions), strict=True):
        query = parse(text)
        relations = [p for p in query.placeholders if p.kind == "relation"]
        if len(relations) != 1:
            continue
        scores = ranked.ranker.scores([(question, t) for t in texts])  # type: ignore[union-attr]
        best = vocab.relations[max(range(len(scores)), key=scores.__getitem__)]
        assert (relations[0].label, relations[0].description) == (best.label, best.description)
        checked += 1
    assert checked >= 3
    # A card naming a ranker that is not there fails at load, not at the first question.
    (model_dir / "model_card.json").write_text(json.dumps({**card, "relation_ranker": "../missing"}))
    with pytest.raises(RelationRankerError):
        StructuredGenerator.load(model_dir)


def _set_ranker(directory: Path, *, top_k: int, weight: float) -> None:
    card = json.loads((directory / "model_card.json").read_text())
    (directory / "model_card.json").write_text(json.dumps({**card, "top_k": top_k, "weight": weight}))
