"""refusal: does PGMR refuse the questions its memory cannot answer, and only those? A sweep of the refusal
threshold over the pgmr model's outputs for answerable and unanswerable questions, and the risk-coverage curve.

The refusal threshold gates each placeholder's confidence: the estimated probability that the memory holds what
the placeholder names (its best candidate is right) (pgmr.resolver.support, a small model fitted on LC-QuAD 2.0
validation by `pgmr experiment fit-refusal`, which also chose the shipped threshold from this experiment run on
validation; test only reports). A question is refused when any placeholder's
confidence is below the threshold.

Unanswerable questions are made two ways (pgmr.experiments.unanswerable): gold entities removed from the memory
(the questions that mention an entity are shuffled and halved; the first half's gold entities go) and gold
relations removed (half the distinct gold relations go). The model's drafts (one per question, or each member's
of an ensemble) are generated once and each is resolved once per memory without refusal: a threshold only
decides which drafts resolve, and the pipeline returns the reranker's best of those (a question is refused when
none does), so the sweep needs no further resolution. At the chosen threshold the entity-removed drafts are
also resolved for real, and every refusal and every final query must be the one the sweep predicts
(`sweep_agrees`).

Refusal precision: refused questions that are unanswerable / refused; recall: refused unanswerable /
unanswerable; coverage: questions answered (resolved, not refused; unparsable outputs never are) / all;
accuracy: Query EM (and URI EM) of the answered ones. The risk-coverage curve lowers the threshold step by step
(questions in the order of their best draft's weakest placeholder's confidence) and gives the Query EM of the
answered ones at each coverage; its area is the mean of that over the coverage steps (times the largest
coverage). On the full memory (every question
answerable) the cost of refusal is the Query EM lost against refusal off.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.common import (
    ExperimentError,
    Workspace,
    metrics_document,
    pgmr_drafts,
    write_experiment,
)
from pgmr.experiments.refusal_report import report, tables
from pgmr.experiments.refusal_sweep import (
    DATASET,
    NAME,
    TARGET,
    calibration_info,
    meets_target,
    open_pass,
    resolve_for_real,
)

TITLE = "Refusal: confidence-threshold sweep over answerable and unanswerable questions"
THRESHOLDS: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(101))


def run(
    ws: Workspace,
    *,
    threshold: float | None = None,
    seed: int = 0,
    predictions: Path | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
    dataset: str = DATASET,
) -> dict[str, Any]:
    """The sweep on `dataset` (test by default; validation is where `pgmr experiment fit-refusal` chooses the
    shipped threshold from this experiment's metrics)."""
    from pgmr.experiments.unanswerable import (
        VARIANTS,
        build_set,
        question_confidence,
        risk_coverage,
        sweep,
        thin,
    )

    threshold = ws.settings.min_confidence if threshold is None else threshold
    records = ws.load_test(dataset)
    if len(records) < 2:
        raise ExperimentError("the refusal sweep needs at least two questions")
    drafts, reranker, source = pgmr_drafts(ws, records, predictions)
    by_id = {r.id: d for r, d in zip(records, drafts, strict=True)}
    grid = sorted({0.0, *thresholds, threshold})

    # Every question answerable (the full memory): what refusal costs.
    questions = open_pass(ws, ws.memory, records, drafts, reranker, "full memory")
    full_curve = sweep(questions, [True] * len(questions), grid)
    at = {p["threshold"]: p for p in full_curve}
    rc, area = risk_coverage(questions)
    answerable_doc = {
        "questions": len(records),
        "drafts_per_question": max(len(d) for d in drafts),
        "query_em_off": at[0.0]["query_em"],
        "query_em_on": at[threshold]["query_em"],
        "refused": at[threshold]["refused"] / len(records),
        "curve": [{k: p[k] for k in ("threshold", "query_em", "refused", "coverage")} for p in full_curve],
        "risk_coverage": thin(rc),
        "area": area,
    }
    answerable_doc["cost"] = answerable_doc["query_em_off"] - answerable_doc["query_em_on"]

    variants: dict[str, Any] = {}
    for variant in VARIANTS:
        try:
            subset = build_set(variant, records, ws.memory, seed)
        except ValueError as exc:
            raise ExperimentError(str(exc)) from None
        sub_drafts = [by_id[r.id] for r in subset.records]
        questions = open_pass(ws, subset.memory, subset.records, sub_drafts, reranker, variant)
        curve = sweep(questions, subset.answerable, grid)
        meeting = [p for p in curve if meets_target(p)]
        rc, area = risk_coverage(questions)
        point = dict(next(p for p in curve if p["threshold"] == threshold))
        if variant == VARIANTS[0]:
            point.update(resolve_for_real(ws, subset, sub_drafts, reranker, threshold, questions, dataset))
        variants[variant] = {
            "sample": {
                **subset.summary(),
                "unparsable_outputs": sum(question_confidence(q) is None for q in questions),
            },
            "curve": curve,
            "chosen": point,
            "meets_target": meets_target(point),
            "thresholds_meeting_target": [p["threshold"] for p in meeting],
            "risk_coverage": thin(rc),
            "area": area,
        }
    doc = metrics_document(
        ws,
        NAME,
        TITLE,
        settings={
            "dataset": dataset,
            "questions": len(records),
            "seed": seed,
            "threshold": threshold,
        },
        source=source,
        calibration=calibration_info(),
        threshold=threshold,
        target=TARGET,
        answerable=answerable_doc,
        variants=variants,
    )
    from pgmr.experiments.plots import refusal_plot

    path = refusal_plot(doc, ws.out_dir / f"{NAME}.png", title=TITLE, reporter=ws.reporter)
    doc["plots"] = [path.name] if path else []
    write_experiment(ws, doc, report(doc))
    return doc


# report and tables live in refusal_report; here because every experiment module has them (experiment_module).
__all__ = ["NAME", "THRESHOLDS", "TITLE", "report", "run", "tables"]
