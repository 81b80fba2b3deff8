"""The refusal experiment's report: the tables of a metrics document (the threshold's summary per unanswerable
set, the cost on the full memory, each set's sweep; or a run published before the confidence threshold) and
report.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pgmr.experiments.common import md_table, pct, report_header
from pgmr.experiments.refusal_sweep import DATASET, NAME


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


__all__ = ["HEADER", "report", "tables"]
