"""The refusal sweep over several drafts per question (an ensemble generator): the pipeline resolves every
draft, a draft resolves when its weakest placeholder reaches the threshold, and the reranker's best resolved
draft is returned; a question is refused only when no draft resolves. The sweep and the risk-coverage curve
must predict exactly that from one resolution without refusal."""

from __future__ import annotations

import math
import random
from pathlib import Path

import pytest

from pgmr.experiments.unanswerable import (
    DraftOutcome,
    chosen_at,
    question_confidence,
    risk_coverage,
    sweep,
)

D = DraftOutcome
# q0 (answerable): the reranker prefers the wrong draft B, which only the lower thresholds let through.
# q1 (unanswerable): both drafts weakly supported. q2 (answerable): A did not parse. q3: nothing parsed.
QUESTIONS = [
    (D(0.9, 1.0, True, True), D(0.3, 2.0, False, False)),
    (D(0.2, 0.0, False, False), D(0.4, 1.0, False, True)),
    (D(None, 5.0), D(0.6, 0.0, True, True)),
    (D(None), D(None)),
]
ANSWERABLE = [True, False, True, False]


def test_the_best_scored_draft_that_reaches_the_threshold_is_returned() -> None:
    q0 = QUESTIONS[0]
    assert chosen_at(q0, 0.0) == 1 and chosen_at(q0, 0.3) == 1  # both resolve: the reranker's choice
    assert chosen_at(q0, 0.31) == 0 and chosen_at(q0, 0.9) == 0  # B refused: A, though scored lower
    assert chosen_at(q0, 0.91) is None
    assert chosen_at(QUESTIONS[2], 0.0) == 1  # a draft that did not parse never wins, whatever its score
    assert chosen_at(QUESTIONS[3], 0.0) is None
    tie = (D(0.5, 1.0), D(0.5, 1.0))
    assert chosen_at(tie, 0.0) == 0  # the earlier member on a tie
    gated = (D(-math.inf, 9.0), D(0.1, 0.0))
    assert chosen_at(gated, 0.0) == 1 and chosen_at(gated[:1], 0.0) is None  # a similarity gate's refusal
    assert [question_confidence(q) for q in QUESTIONS] == [0.9, 0.4, 0.6, None]


def test_the_sweep_counts_what_the_pipeline_would_return() -> None:
    at = {p["threshold"]: p for p in sweep(QUESTIONS, ANSWERABLE, [0.0, 0.5, 0.95])}
    # Nothing refused; q0 gets the wrong draft B, q1 a wrong answer, q2 the right one; q3 is never answered.
    assert at[0.0]["refused"] == 0 and at[0.0]["coverage"] == 0.75
    assert at[0.0]["answered_accuracy"] == pytest.approx(1 / 3) and at[0.0]["query_em"] == 0.25
    # At 0.5 q1 is refused (right: it is unanswerable), and q0 now gets draft A, which is right.
    p = at[0.5]
    assert p["refused"] == 1 and p["refusal_precision"] == 1.0 and p["refusal_recall"] == 0.5
    assert p["answerable_refused"] == 0.0 and p["coverage"] == 0.5
    assert p["answered_accuracy"] == 1.0 and p["answered_uri_em"] == 1.0 and p["query_em"] == 0.5
    # At 0.95 every parsed question is refused, the two answerable ones included.
    p = at[0.95]
    assert p["refused"] == 3 and p["answerable_refused"] == 1.0 and p["coverage"] == 0.0
    assert p["answered_accuracy"] is None


def _brute_force(questions: list[tuple[DraftOutcome, ...]]) -> list[tuple[float, float]]:
    """Risk-coverage by resolving anew at each question's confidence (what the event sweep must equal)."""
    n = len(questions)
    confidences = sorted(
        (c for q in questions if (c := question_confidence(q)) is not None and c > -math.inf), reverse=True
    )
    curve = []
    for c in confidences:
        chosen = [(q, chosen_at(q, c)) for q in questions]
        answered = [q[k] for q, k in chosen if k is not None]
        curve.append((len(answered) / n, sum(o.query_em for o in answered) / len(answered)))
    return curve


@pytest.mark.parametrize("seed", range(20))
def test_risk_coverage_equals_resolving_at_every_step(seed: int) -> None:
    rng = random.Random(seed)
    values = rng.sample(range(1, 10_000), 200)  # distinct confidences: one curve point per question
    questions = []
    for _ in range(40):
        drafts = []
        for _ in range(rng.randint(1, 3)):
            roll = rng.random()
            confidence = None if roll < 0.1 else -math.inf if roll < 0.15 else values.pop() / 10_000
            drafts.append(D(confidence, rng.uniform(-1, 1), rng.random() < 0.5))
        questions.append(tuple(drafts))
    curve, area = risk_coverage(questions)
    expected = _brute_force(questions)
    assert [p["coverage"] for p in curve] == pytest.approx([c for c, _ in expected])
    assert [p["accuracy"] for p in curve] == pytest.approx([a for _, a in expected])
    n = len(questions)
    assert area == pytest.approx(sum(a for _, a in expected) / n)


def test_with_one_draft_per_question_risk_coverage_is_the_plain_ranking() -> None:
    confidences = [0.9, 0.2, None, 0.7, 0.5]
    correct = [True, False, True, False, True]
    curve, area = risk_coverage([(D(c, 0.0, e),) for c, e in zip(confidences, correct, strict=True)])
    # Most confident first: 0.9 right, 0.7 wrong, 0.5 right, 0.2 wrong; the unparsable one never answered.
    assert [p["accuracy"] for p in curve] == pytest.approx([1.0, 0.5, 2 / 3, 0.5])
    assert [p["coverage"] for p in curve] == pytest.approx([0.2, 0.4, 0.6, 0.8])
    assert area == pytest.approx((1.0 + 0.5 + 2 / 3 + 0.5) / 5)
    assert risk_coverage([(D(None),)]) == ([], None)


def _fit_refusal() -> object:
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "fit_refusal.py"
    spec = importlib.util.spec_from_file_location("fit_refusal", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _point(t: float, recall: float, lost: float, loss: float, precision: float = 0.95) -> dict[str, object]:
    part = {"precision": precision, "recall": recall, "answerable_refused": lost}
    return {
        "threshold": t,
        "entity-removed": part,
        "relation-removed": part,
        "full": {"query_em_off": 0.5, "query_em_on": 0.5 - loss, "loss": loss},
    }


def test_the_shipped_threshold_is_the_most_recall_within_the_targets() -> None:
    fit = _fit_refusal()
    curve = [
        _point(0.2, 0.5, 0.01, 0.0),
        _point(0.4, 0.85, 0.05, 0.01),
        _point(0.5, 0.9, 0.08, 0.02),
        _point(0.6, 0.95, 0.12, 0.02),  # refuses too many answerable questions
    ]
    ok, best = fit.choose(curve)  # type: ignore[attr-defined]
    assert [p["threshold"] for p in ok] == [0.4, 0.5] and best["threshold"] == 0.5
    # None meets the recall target: the most recall that still protects answerable questions, marked so.
    curve = [_point(0.2, 0.3, 0.01, 0.0), _point(0.4, 0.6, 0.09, 0.02), _point(0.6, 0.7, 0.2, 0.02)]
    ok, best = fit.choose(curve)  # type: ignore[attr-defined]
    assert ok == [] and best["threshold"] == 0.4 and best["fallback"] is True


def test_a_validation_run_is_never_published(tmp_path: Path) -> None:
    """`pgmr experiment refusal --split validation` chooses the threshold; results-doc reports test only."""
    import json

    from pgmr.experiments.results_doc import ResultsDocError, publish

    run = tmp_path / "experiments" / "refusal"
    run.mkdir(parents=True)
    doc = {"experiment": "refusal", "started_at": "2026-12-03", "settings": {"dataset": "lcquad2-validation"}}
    (run / "metrics.json").write_text(json.dumps(doc), encoding="utf-8")
    (run / "report.md").write_text("#", encoding="utf-8")
    with pytest.raises(ResultsDocError, match="validation runs choose settings"):
        publish(tmp_path / "experiments", tmp_path / "published")
    assert not (tmp_path / "published" / "refusal").exists()
