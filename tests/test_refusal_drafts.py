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


def _point(t: float, recall: float, lost: float, loss: float, precision: float = 0.95) -> dict[str, object]:
    part = {"precision": precision, "recall": recall, "answerable_refused": lost}
    return {
        "threshold": t,
        "entity-removed": part,
        "relation-removed": part,
        "full": {"query_em_off": 0.5, "query_em_on": 0.5 - loss, "loss": loss},
    }


def test_the_shipped_threshold_is_the_most_recall_within_the_targets() -> None:
    from pgmr.experiments import refusal_fit as fit

    curve = [
        _point(0.2, 0.5, 0.01, 0.0),
        _point(0.4, 0.85, 0.05, 0.01),
        _point(0.5, 0.9, 0.08, 0.02),
        _point(0.6, 0.95, 0.12, 0.02),  # refuses too many answerable questions
    ]
    ok, best = fit.choose(curve)
    assert [p["threshold"] for p in ok] == [0.4, 0.5] and best["threshold"] == 0.5
    # None meets the recall target: the most recall that still protects answerable questions, marked so.
    curve = [_point(0.2, 0.3, 0.01, 0.0), _point(0.4, 0.6, 0.09, 0.02), _point(0.6, 0.7, 0.2, 0.02)]
    ok, best = fit.choose(curve)
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


def _sweep(dataset: str = "lcquad2-validation") -> dict[str, object]:
    """The parts of a `pgmr experiment refusal` metrics.json that `fit-refusal --from-sweep` reads."""

    def variant(recalls: list[float]) -> dict[str, object]:
        return {
            "curve": [
                {"threshold": t, "refusal_precision": 0.95, "refusal_recall": r, "answerable_refused": t / 5}
                for t, r in zip((0.2, 0.4, 0.6), recalls, strict=True)
            ]
        }

    return {
        "settings": {"dataset": dataset, "questions": 3},
        "source": {"predictions": "v.drafts.jsonl", "reranker": "ens/reranker.json"},
        "answerable": {
            "query_em_off": 0.5,
            "curve": [{"threshold": t, "query_em": q} for t, q in ((0.2, 0.5), (0.4, 0.49), (0.6, 0.4))],
        },
        "variants": {
            "entity-removed": variant([0.5, 0.85, 0.9]),
            "relation-removed": variant([0.6, 0.9, 0.95]),
        },
    }


def test_a_threshold_is_chosen_from_a_validation_sweep_only() -> None:
    from pgmr.experiments.refusal_fit import RefusalFitError, from_sweep, threshold_from_sweep
    from pgmr.resolver.support import shipped_calibration

    curve = from_sweep(_sweep())
    assert [p["threshold"] for p in curve] == [0.2, 0.4, 0.6]
    assert curve[1]["full"]["loss"] == pytest.approx(0.01)
    shipped = shipped_calibration()
    calibration, _, ok, best = threshold_from_sweep(_sweep(), "run/metrics.json", shipped, command="pgmr x")
    # 0.6 costs 10 points of Query EM and refuses 12% of answerable questions: 0.4 is the one.
    assert [p["threshold"] for p in ok] == [0.4] and best["threshold"] == calibration.threshold == 0.4
    assert calibration.models == shipped.models and calibration.names == shipped.names
    chosen = calibration.provenance["threshold_chosen_on"]
    assert (
        chosen["run"] == "run/metrics.json" and chosen["command"] == "pgmr x" and chosen["meeting"] == [0.4]
    )
    with pytest.raises(RefusalFitError, match="validation only"):
        from_sweep(_sweep("lcquad2-test"))
    with pytest.raises(RefusalFitError, match="no threshold keeps"):
        from pgmr.experiments.refusal_fit import choose

        choose([_point(0.2, 0.5, 0.5, 0.0)])


def test_fit_refusal_from_a_sweep_writes_the_calibration_where_asked(tmp_path: Path) -> None:
    """The shipped package's calibration.json is written only when --write names it."""
    import json

    from typer.testing import CliRunner

    from pgmr.cli.main import app
    from pgmr.resolver.support import Calibration, names_from_json, shipped_calibration

    sweep = tmp_path / "metrics.json"
    sweep.write_text(json.dumps(_sweep()), encoding="utf-8")
    target = tmp_path / "out" / "calibration.json"
    result = CliRunner().invoke(
        app, ["experiment", "fit-refusal", "--from-sweep", str(sweep), "--write", str(target)]
    )
    assert result.exit_code == 0, result.output
    assert "chosen" in result.output and "threshold 0.4" in " ".join(result.output.split())
    data = json.loads(target.read_text(encoding="utf-8"))
    names = json.loads(target.with_name(data["names"]).read_text(encoding="utf-8"))
    read = Calibration.from_json(data, names)
    assert read.threshold == 0.4 and read.names == shipped_calibration().names
    assert names_from_json(names) == read.names
    test_run = tmp_path / "test.json"
    test_run.write_text(json.dumps(_sweep("lcquad2-test")), encoding="utf-8")
    result = CliRunner().invoke(app, ["experiment", "fit-refusal", "--from-sweep", str(test_run)])
    assert result.exit_code == 2 and "validation only" in " ".join(result.output.split())
    result = CliRunner().invoke(app, ["experiment", "fit-refusal"])
    assert result.exit_code == 2 and "give one of" in result.output


def _placeholder_rows() -> list[dict[str, object]]:
    """Rows as `fit-refusal --predictions` collects them: every signal high for a right best candidate."""
    from pgmr.resolver.support import FEATURES

    rng = random.Random(0)
    rows: list[dict[str, object]] = []
    for i in range(60):
        for name in ("full", "entity-removed", "relation-removed"):
            answerable = name == "full" or i % 2 == 0
            placeholders = []
            for kind in ("entity", "relation"):
                correct = answerable and rng.random() < 0.9
                signal = (0.8 if correct else 0.2) + rng.uniform(-0.15, 0.15)
                placeholders.append(
                    {"kind": kind, "correct": correct, "features": dict.fromkeys(FEATURES, signal)}
                )
            rows.append(
                {
                    "set": name,
                    "source": "a",
                    "parsed": True,
                    "answerable": answerable,
                    "query_em": answerable and i % 3 == 0,
                    "placeholders": placeholders,
                }
            )
    return rows


def test_support_models_are_fitted_on_the_unanswerable_sets_placeholders() -> None:
    from pgmr.experiments.refusal_fit import fit_support_models, support_labels
    from pgmr.resolver.support import FEATURES

    rows = _placeholder_rows()
    labels = support_labels(rows, "supported")  # type: ignore[arg-type]
    assert (
        len(labels) == 2 * 2 * 60
    )  # both unanswerable sets, two placeholders each; the full set is not fitted on
    models, report = fit_support_models(rows, list(FEATURES), label="correct")  # type: ignore[arg-type]
    assert set(models) == {"entity", "relation"}
    assert all(report["models"][k]["auc"] > 0.9 for k in models)
    assert report["chosen"]["threshold"] in [p["threshold"] for p in report["curve"]]


def test_fit_refusal_refits_from_collected_rows(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from pgmr.cli.main import app
    from pgmr.jsonl import write_jsonl
    from pgmr.resolver.support import Calibration

    rows = tmp_path / "placeholders.jsonl"
    write_jsonl(rows, _placeholder_rows())
    target = tmp_path / "calibration.json"
    args = [
        "experiment",
        "fit-refusal",
        "--rows",
        str(rows),
        "-o",
        str(tmp_path / "fit"),
        "--write",
        str(target),
    ]
    result = CliRunner().invoke(app, [*args, "--label", "supported", "--features", "prior,in_question"])
    assert result.exit_code == 0, result.output
    data = json.loads(target.read_text(encoding="utf-8"))
    calibration = Calibration.from_json(
        data, json.loads(target.with_name(data["names"]).read_text(encoding="utf-8"))
    )
    assert set(calibration.models) == {"entity", "relation"}
    assert calibration.provenance["label"] == "supported" and calibration.provenance["sources"] == ["a"]
    assert json.loads((tmp_path / "fit" / "fit.json").read_text(encoding="utf-8"))["chosen"]["threshold"] == (
        calibration.threshold
    )
    result = CliRunner().invoke(app, [*args, "--features", "nope"])
    assert result.exit_code == 2 and "unknown signals ['nope']" in result.output
