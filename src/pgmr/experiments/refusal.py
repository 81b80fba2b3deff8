"""refusal: does PGMR refuse the questions its memory cannot answer, and only those? A sweep of the refusal
threshold over the pgmr model's outputs for answerable and unanswerable questions, and the risk-coverage curve.

The refusal threshold gates each placeholder's confidence: the estimated probability that the memory holds what
the placeholder names (its best candidate is right) (pgmr.resolver.support, a small model fitted on LC-QuAD 2.0
validation by scripts/fit_refusal.py, which also chose the shipped threshold from this experiment run on
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

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.experiments.common import (
    ExperimentError,
    Workspace,
    md_table,
    metrics_document,
    pct,
    pgmr_drafts,
    prediction_rows,
    report_header,
    score,
    write_experiment,
    write_system,
)
from pgmr.experiments.predict import answer_drafts, chosen_texts
from pgmr.generators.ensemble import Draft
from pgmr.pipeline import AskResult
from pgmr.pipeline.rerank import Reranker

if TYPE_CHECKING:
    from pgmr.experiments.unanswerable import DraftOutcome

NAME = "refusal"
TITLE = "Refusal: confidence-threshold sweep over answerable and unanswerable questions"
DATASET = "lcquad2-test"
THRESHOLDS: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(101))
# The operating point asked of a threshold: most refusals right, most unanswerable questions refused, few
# answerable ones lost.
TARGET = {"refusal_precision": 0.9, "refusal_recall": 0.8, "answerable_refused": 0.1}


def meets_target(point: Mapping[str, Any]) -> bool:
    p, r, lost = point["refusal_precision"], point["refusal_recall"], point["answerable_refused"]
    return (
        p is not None
        and r is not None
        and p >= TARGET["refusal_precision"]
        and r >= TARGET["refusal_recall"]
        and (lost or 0.0) <= TARGET["answerable_refused"]
    )


def _answer(
    ws: Workspace,
    memory: Any,
    records: Sequence[Any],
    drafts: Sequence[Sequence[Draft]],
    reranker: Reranker | None,
    min_confidence: float,
    label: str,
) -> list[AskResult]:
    """The drafts through the stages against `memory`, chosen among as `pgmr ask` chooses, refusing below
    `min_confidence` only (no entity similarity gate: the sweep is about the refusal threshold)."""
    # Grounded against this memory: removed IDs' labels must not steer the grounding either.
    return answer_drafts(
        ws.resolver(memory, entity_threshold=0.0, min_confidence=min_confidence),
        ws.stages(entity_threshold=0.0, min_confidence=min_confidence),
        [r.question for r in records],
        drafts,
        reranker,
        label=label,
        reporter=ws.reporter,
    )


def _open_pass(
    ws: Workspace,
    memory: Any,
    records: Sequence[Any],
    drafts: Sequence[Sequence[Draft]],
    reranker: Reranker | None,
    label: str,
) -> list[tuple[DraftOutcome, ...]]:
    """Every draft of every question resolved against `memory` without refusal, judged against gold."""
    from pgmr.experiments.unanswerable import draft_outcomes

    results = _answer(ws, memory, records, drafts, reranker, 0.0, f"resolving ({label}, no refusal)")
    return draft_outcomes(results, records)


def run(
    ws: Workspace,
    *,
    threshold: float | None = None,
    seed: int = 0,
    predictions: Path | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
    dataset: str = DATASET,
) -> dict[str, Any]:
    """The sweep on `dataset` (test by default; validation is where scripts/fit_refusal.py chooses the shipped
    threshold from this experiment's metrics)."""
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
    questions = _open_pass(ws, ws.memory, records, drafts, reranker, "full memory")
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
        questions = _open_pass(ws, subset.memory, subset.records, sub_drafts, reranker, variant)
        curve = sweep(questions, subset.answerable, grid)
        meeting = [p for p in curve if meets_target(p)]
        rc, area = risk_coverage(questions)
        point = dict(next(p for p in curve if p["threshold"] == threshold))
        if variant == VARIANTS[0]:
            point.update(_for_real(ws, subset, sub_drafts, reranker, threshold, questions, dataset))
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
        calibration=_calibration_info(),
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


def _for_real(
    ws: Workspace,
    subset: Any,
    drafts: Sequence[Sequence[Draft]],
    reranker: Reranker | None,
    threshold: float,
    questions: Sequence[Sequence[DraftOutcome]],
    dataset: str,
) -> dict[str, Any]:
    """The chosen threshold resolved for real: its refusals, and the final query of every answered question,
    must be the sweep's."""
    from pgmr.experiments.unanswerable import chosen_at, question_confidence

    results = _answer(
        ws, subset.memory, subset.records, drafts, reranker, threshold, f"resolving (threshold {threshold:g})"
    )
    rows = prediction_rows(subset.records, chosen_texts(results, drafts), results)
    for row, ok in zip(rows, subset.answerable, strict=True):
        row["answerable"] = ok
    evaluation = score(
        rows,
        subset.records,
        catalog=None,
        label=f"scoring (threshold {threshold:g})",
        reporter=ws.reporter,
    )
    write_system(
        ws.out_dir / f"threshold-{threshold:g}",
        rows,
        evaluation,
        command=ws.settings.command,
        inputs={"experiment": NAME, "min_confidence": threshold, "gold": dataset},
        title=f"{NAME}: threshold {threshold:g} (entity-removed)",
    )
    predicted = [chosen_at(q, threshold) for q in questions]
    refused = [r.status == "refused" for r in results]
    # The sweep predicts each question's fate from the open pass: refused where it says so (a parsed question
    # with no draft at the threshold), else the final query of the draft it says is chosen.
    agrees = all(
        ref == (k is None and question_confidence(q) is not None) and (k is None or r.sparql == q[k].sparql)
        for q, k, ref, r in zip(questions, predicted, refused, results, strict=True)
    )
    return {"refused_by_resolver": sum(refused), "sweep_agrees": agrees}


def _calibration_info() -> dict[str, Any]:
    from pgmr.resolver.support import shipped_calibration

    calibration = shipped_calibration()
    chosen_on = calibration.provenance.get("threshold_chosen_on") or {}
    return {
        "shipped_threshold": calibration.threshold,
        "fitted_on": calibration.provenance.get("fitted_on"),
        "fitted_at": calibration.provenance.get("fitted_at"),
        "threshold_chosen_on": {
            k: chosen_on.get(k) for k in ("dataset", "questions", "generator", "chosen_at")
        }
        if chosen_on
        else None,
    }


def _rates(p: Mapping[str, Any]) -> list[str]:
    """Precision, recall, answerable refused, coverage and Query EM of answered, as table cells."""
    keys = ("refusal_precision", "refusal_recall", "answerable_refused", "coverage", "answered_accuracy")
    return [pct(p[key], 1) for key in keys]


def _point_row(p: Mapping[str, Any]) -> list[str]:
    return [f"{p['threshold']:.2f}", *_rates(p), pct(p["answered_uri_em"], 1)]


HEADER = [
    "threshold",
    "refusal precision",
    "refusal recall",
    "answerable refused",
    "coverage",
    "Query EM of answered",
    "URI EM of answered",
]


def _legacy_tables(doc: Mapping[str, Any]) -> str:
    """A run published before the confidence threshold (an entity-similarity sweep, one unanswerable set)."""
    shown = [p for p in doc.get("curve", []) if round(p["threshold"] * 100) % 5 == 0]
    sample = doc.get("sample", {})
    return "\n".join(
        [
            md_table(HEADER, [_point_row(p) for p in shown]),
            "",
            f"Entity-similarity thresholds. {sample.get('questions')} questions: {sample.get('answerable')} "
            f"answerable, {sample.get('unanswerable')} unanswerable. Percent.",
        ]
    )


def tables(doc: Mapping[str, Any]) -> str:
    if "variants" not in doc:
        return _legacy_tables(doc)
    threshold = doc.get("threshold")
    variants: Mapping[str, Any] = doc["variants"]
    answerable = doc.get("answerable", {})
    summary = []
    for name, v in variants.items():
        p, sample = v["chosen"], v["sample"]
        summary.append(
            [
                name,
                str(sample["questions"]),
                f"{sample['answerable']} / {sample['unanswerable']}",
                *_rates(p),
                "-" if v.get("area") is None else f"{v['area']:.3f}",
                "yes" if v.get("meets_target") else "no",
            ]
        )
    summary.append(
        [
            "none removed (all answerable)",
            str(answerable.get("questions")),
            f"{answerable.get('questions')} / 0",
            "-",
            "-",
            pct(answerable.get("refused"), 1),
            pct(1 - (answerable.get("refused") or 0.0), 1),
            "-",
            "-" if answerable.get("area") is None else f"{answerable['area']:.3f}",
            "",
        ]
    )
    lines = [
        f"At the threshold {threshold:.2f} (a placeholder's support: the estimated probability that the memory holds what it names):",
        "",
        md_table(
            [
                "unanswerable by",
                "questions",
                "answerable / unanswerable",
                "refusal precision",
                "refusal recall",
                "answerable refused",
                "coverage",
                "Query EM of answered",
                "risk-coverage area",
                "meets target",
            ],
            summary,
        ),
        "",
        f"Query EM on {doc.get('settings', {}).get('dataset', DATASET)} with the full memory: "
        f"{pct(answerable.get('query_em_off'))} with refusal "
        f"off, {pct(answerable.get('query_em_on'))} at threshold {threshold:.2f} (cost "
        f"{pct(answerable.get('cost'))} points). Risk-coverage area: mean Query EM of the answered questions over "
        "the coverage steps, questions answered most-confident first (1 is perfect). Target: refusal precision "
        ">= 90%, recall >= 80%, answerable refused <= 10%. Percent.",
    ]
    if (answerable.get("drafts_per_question") or 1) > 1:
        lines += [
            "",
            f"Up to {answerable['drafts_per_question']} drafts per question (an ensemble's members), each resolved "
            "against each memory: as in `pgmr ask`, a question is refused only when none of its drafts reaches "
            "the threshold, and otherwise gets the reranker's best draft among those that do.",
        ]
    for name, v in variants.items():
        shown = [
            p for p in v["curve"] if round(p["threshold"] * 100) % 10 == 0 or p["threshold"] == threshold
        ]
        meeting = v.get("thresholds_meeting_target", [])
        lines += [
            "",
            f"Sweep, {name}:",
            "",
            md_table(HEADER, [_point_row(p) for p in shown]),
            "",
            "Thresholds meeting the target: "
            + (
                f"{meeting[0]:.2f}-{meeting[-1]:.2f} ({len(meeting)} of {len(v['curve'])})"
                if meeting
                else "none"
            )
            + ".",
        ]
    return "\n".join(lines)


def report(doc: Mapping[str, Any]) -> str:
    parts = report_header(doc)
    parts += [tables(doc), ""]
    chosen = doc.get("variants", {}).get("entity-removed", {}).get("chosen", {})
    if "refused_by_resolver" in chosen:
        parts += [
            f"Resolved for real at threshold {doc.get('threshold'):g} (entity-removed): the resolver refused "
            f"{chosen['refused_by_resolver']} questions; the sweep agrees: "
            f"{'yes' if chosen.get('sweep_agrees') else 'NO'}. Scored rows (with `answerable`): "
            f"`threshold-{doc.get('threshold'):g}/predictions.jsonl`.",
            "",
        ]
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    return "\n".join(parts)
