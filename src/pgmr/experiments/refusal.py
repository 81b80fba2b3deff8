"""refusal: does PGMR refuse the questions its memory cannot answer, and only those? A sweep of the refusal
threshold over the pgmr model's outputs for answerable and unanswerable questions, and the risk-coverage curve.

The refusal threshold gates each placeholder's confidence: the estimated probability that the memory holds what
the placeholder names (its best candidate is right, or the ID it names is in the memory) (pgmr.resolver.support, a small model fitted on LC-QuAD 2.0 validation by scripts/fit_refusal.py,
which also chose the shipped threshold; test only reports). A question is refused when any placeholder's
confidence is below the threshold.

Unanswerable questions are made two ways (pgmr.experiments.unanswerable): gold entities removed from the memory
(the questions that mention an entity are shuffled and halved; the first half's gold entities go) and gold
relations removed (half the distinct gold relations go). The model's outputs are generated once and resolved
once per memory without refusal: a threshold only decides whether the resolved query is returned, so the
sweep needs no further resolution. At the chosen threshold the entity-removed outputs are also resolved for
real, and that resolution's refusals must be the ones the sweep predicts (recorded as `sweep_agrees`).

Refusal precision: refused questions that are unanswerable / refused; recall: refused unanswerable /
unanswerable; coverage: questions answered (resolved, not refused; unparsable outputs never are) / all;
accuracy: Query EM (and URI EM) of the answered ones. The risk-coverage curve orders the questions by their
weakest placeholder's confidence and gives the Query EM of the answered ones at each coverage; its area is the
mean of that over the coverage steps (times the largest coverage). On the full memory (every question
answerable) the cost of refusal is the Query EM lost against refusal off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.common import (
    ExperimentError,
    Workspace,
    answer_outputs,
    md_table,
    metrics_document,
    pct,
    pgmr_outputs,
    prediction_rows,
    report_header,
    score,
    verdicts,
    write_experiment,
    write_system,
)
from pgmr.pipeline import AskResult

NAME = "refusal"
TITLE = "Refusal: confidence-threshold sweep over answerable and unanswerable questions"
DATASET = "lcquad2-test"
THRESHOLDS: tuple[float, ...] = tuple(round(0.01 * i, 2) for i in range(101))
# The operating point asked of a threshold: most refusals right, most unanswerable questions refused, few
# answerable ones lost.
TARGET = {"refusal_precision": 0.9, "refusal_recall": 0.8, "answerable_refused": 0.1}


def sweep(
    similarities: Sequence[float | None],
    answerable: Sequence[bool],
    query_em: Sequence[bool],
    uri_em: Sequence[bool],
    thresholds: Sequence[float] = THRESHOLDS,
) -> list[dict[str, Any]]:
    """One point per threshold. `similarities[i]` is None for an output that does not parse (never
    answered, never a refusal)."""
    n = len(similarities)
    n_unanswerable = sum(not a for a in answerable)
    n_answerable = n - n_unanswerable
    curve = []
    for t in thresholds:
        refused = [s is not None and s < t for s in similarities]
        answered = [i for i, s in enumerate(similarities) if s is not None and s >= t]
        hits = sum(r and not a for r, a in zip(refused, answerable, strict=True))
        n_refused = sum(refused)
        curve.append(
            {
                "threshold": t,
                "refused": n_refused,
                "refusal_precision": hits / n_refused if n_refused else None,
                "refusal_recall": hits / n_unanswerable if n_unanswerable else None,
                "answerable_refused": (
                    sum(r and a for r, a in zip(refused, answerable, strict=True)) / n_answerable
                    if n_answerable
                    else None
                ),
                "coverage": len(answered) / n if n else 0.0,
                "answered_accuracy": sum(query_em[i] for i in answered) / len(answered) if answered else None,
                "answered_uri_em": sum(uri_em[i] for i in answered) / len(answered) if answered else None,
            }
        )
    return curve


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
    outputs: Sequence[str],
    min_confidence: float,
    label: str,
) -> list[AskResult]:
    """The outputs through the stages against `memory`, refusing below `min_confidence` only (no entity
    similarity gate: the sweep is about the refusal threshold)."""
    # Grounded against this memory: removed IDs' labels must not steer the grounding either.
    return answer_outputs(
        ws.resolver(memory, entity_threshold=0.0, min_confidence=min_confidence),
        ws.stages(entity_threshold=0.0, min_confidence=min_confidence),
        [r.question for r in records],
        outputs,
        label=label,
        reporter=ws.reporter,
    )


def _open_pass(
    ws: Workspace, memory: Any, records: Sequence[Any], outputs: Sequence[str], label: str
) -> tuple[list[AskResult], list[dict[str, Any]], Any]:
    """The outputs' results without refusal, scored rows and the evaluation, against `memory`."""
    results = _answer(ws, memory, records, outputs, 0.0, f"resolving ({label}, no refusal)")
    rows = prediction_rows(records, outputs, results)
    return results, rows, score(rows, records, catalog=None, label=f"scoring ({label})", reporter=ws.reporter)


def run(
    ws: Workspace,
    *,
    threshold: float | None = None,
    seed: int = 0,
    predictions: Path | None = None,
    thresholds: Sequence[float] = THRESHOLDS,
) -> dict[str, Any]:
    from pgmr.experiments.unanswerable import VARIANTS, build_set, min_confidence, risk_coverage, thin

    threshold = ws.settings.min_confidence if threshold is None else threshold
    records = ws.load_test(DATASET)
    if len(records) < 2:
        raise ExperimentError("the refusal sweep needs at least two questions")
    outputs, source = pgmr_outputs(ws, records, predictions)
    by_id = {r.id: o for r, o in zip(records, outputs, strict=True)}
    grid = sorted({*thresholds, threshold})

    # Every question answerable (the full memory): what refusal costs.
    resolved, _, evaluation = _open_pass(ws, ws.memory, records, outputs, "full memory")
    em = [r.query_em for r in evaluation.records]
    conf = [min_confidence(r) for r in verdicts(resolved)]
    kept = [c is not None and c >= threshold for c in conf]
    rc, area = risk_coverage(conf, em)
    answerable_doc = {
        "questions": len(records),
        "query_em_off": sum(em) / len(em),
        "query_em_on": sum(e and k for e, k in zip(em, kept, strict=True)) / len(em),
        "refused": sum(c is not None and c < threshold for c in conf) / len(em),
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
        sub_outputs = [by_id[r.id] for r in subset.records]
        resolved, _, evaluation = _open_pass(ws, subset.memory, subset.records, sub_outputs, variant)
        query_em = [r.query_em for r in evaluation.records]
        uri_em = [r.uri_em for r in evaluation.records]
        conf = [min_confidence(r) for r in verdicts(resolved)]
        curve = sweep(conf, subset.answerable, query_em, uri_em, grid)
        meeting = [p for p in curve if meets_target(p)]
        rc, area = risk_coverage(conf, query_em)
        point = dict(next(p for p in curve if p["threshold"] == threshold))
        if variant == VARIANTS[0]:
            point.update(_for_real(ws, subset, sub_outputs, threshold))
            point["sweep_agrees"] = point["refused_by_resolver"] == point["refused"]
        variants[variant] = {
            "sample": {**subset.summary(), "unparsable_outputs": sum(c is None for c in conf)},
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
        settings={"dataset": DATASET, "questions": len(records), "seed": seed, "threshold": threshold},
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


def _for_real(ws: Workspace, subset: Any, outputs: Sequence[str], threshold: float) -> dict[str, Any]:
    """The chosen threshold resolved for real; its refusals must be the sweep's."""
    results = _answer(
        ws, subset.memory, subset.records, outputs, threshold, f"resolving (threshold {threshold:g})"
    )
    rows = prediction_rows(subset.records, outputs, results)
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
        inputs={"experiment": NAME, "min_confidence": threshold, "gold": DATASET},
        title=f"{NAME}: threshold {threshold:g} (entity-removed)",
    )
    return {"refused_by_resolver": sum(1 for row in rows if row["status"] == "refused")}


def _calibration_info() -> dict[str, Any]:
    from pgmr.resolver.support import shipped_calibration

    calibration = shipped_calibration()
    return {
        "shipped_threshold": calibration.threshold,
        "fitted_on": calibration.provenance.get("fitted_on"),
        "fitted_at": calibration.provenance.get("fitted_at"),
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
        f"Query EM on LC-QuAD 2.0 test with the full memory: {pct(answerable.get('query_em_off'))} with refusal "
        f"off, {pct(answerable.get('query_em_on'))} at threshold {threshold:.2f} (cost "
        f"{pct(answerable.get('cost'))} points). Risk-coverage area: mean Query EM of the answered questions over "
        "the coverage steps, questions answered most-confident first (1 is perfect). Target: refusal precision "
        ">= 90%, recall >= 80%, answerable refused <= 10%. Percent.",
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
