"""The refusal experiment's sweep machinery: the operating point asked of a threshold, the drafts resolved
against a memory at a threshold (or without refusal, judged against gold), the chosen threshold resolved for real
and checked against the sweep, and the shipped calibration the run reports beside it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pgmr.experiments.common import Workspace, prediction_rows, score, write_system
from pgmr.experiments.predict import answer_drafts, chosen_texts
from pgmr.generators.ensemble import Draft
from pgmr.pipeline import AskResult
from pgmr.pipeline.rerank import Reranker

if TYPE_CHECKING:
    from pgmr.experiments.unanswerable import DraftOutcome

NAME = "refusal"
DATASET = "lcquad2-test"
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


def open_pass(
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


def resolve_for_real(
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


def calibration_info() -> dict[str, Any]:
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


__all__ = ["DATASET", "NAME", "TARGET", "calibration_info", "meets_target", "open_pass", "resolve_for_real"]
