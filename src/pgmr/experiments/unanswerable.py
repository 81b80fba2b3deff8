"""Unanswerable question sets and what refusal is judged on: used by the refusal experiment (test) and by
scripts/fit_refusal.py (validation; the support model and the shipped threshold are chosen there only).

Two ways of making questions unanswerable, both seeded:
- entity-removed: the questions that mention an entity are shuffled and halved; the gold entities of the first
  half are removed from the memory. A question is answerable when every gold entity of it is still there.
- relation-removed: the distinct gold relations of the questions are shuffled and half of them removed (half
  the *questions'* relations would take nearly all frequent ones); a question is answerable when every gold
  relation of it is still there.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pgmr.datasets import QARecord
from pgmr.kg.ids import id_kind
from pgmr.query import IntermediateQueryError

if TYPE_CHECKING:
    from pgmr.memory import Memory
    from pgmr.resolver import Refusal, Resolution

VARIANTS: tuple[str, ...] = ("entity-removed", "relation-removed")


@dataclass(frozen=True)
class UnanswerableSet:
    """Questions (in a seeded order), which of them stay answerable, and the memory with IDs removed."""

    variant: str
    records: tuple[QARecord, ...]
    answerable: tuple[bool, ...]
    removed: frozenset[str]
    memory: Memory

    def summary(self) -> dict[str, Any]:
        return {
            "questions": len(self.records),
            "answerable": sum(self.answerable),
            "unanswerable": len(self.records) - sum(self.answerable),
            "removed_ids": len(self.removed),
        }


def gold_ids(record: QARecord, kind: str) -> set[str]:
    from pgmr.evaluation.metrics import query_ids

    return {wid for wid in query_ids(record.sparql) if id_kind(wid) == kind}


def build_set(variant: str, records: Sequence[QARecord], full: Memory, seed: int = 0) -> UnanswerableSet:
    from pgmr.experiments.common import sub_memory

    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; expected one of {', '.join(VARIANTS)}")
    kind = "entity" if variant == "entity-removed" else "relation"
    chosen = [r for r in records if gold_ids(r, kind)]
    if len(chosen) < 2:
        raise ValueError(f"{variant}: need at least two questions with a gold {kind}")
    rng = random.Random(seed)
    order = list(range(len(chosen)))
    rng.shuffle(order)
    chosen = [chosen[i] for i in order]
    if kind == "entity":
        removed = {wid for r in chosen[: len(chosen) // 2] for wid in gold_ids(r, kind)}
    else:
        relations = sorted({wid for r in chosen for wid in gold_ids(r, kind)}, key=lambda w: (len(w), w))
        rng.shuffle(relations)
        removed = set(relations[: len(relations) // 2])
    answerable = tuple(not (gold_ids(r, kind) & removed) for r in chosen)
    dictionary = full.dictionary(kind)  # type: ignore[arg-type]
    keep = dictionary.ids() - removed
    memory = sub_memory(full, keep) if kind == "entity" else sub_memory(full, None, keep_relations=keep)
    return UnanswerableSet(variant, tuple(chosen), answerable, frozenset(removed), memory)


def min_confidence(result: Resolution | Refusal | IntermediateQueryError | None) -> float | None:
    """The weakest placeholder's confidence (what the refusal threshold gates): 1.0 for a query without
    placeholders or without a support model, None for an unparsable output (an error, or no verdict), -inf
    for a query a similarity threshold already refused."""
    if result is None or isinstance(result, IntermediateQueryError):
        return None
    if result.status == "refused" and any(not ev.similar_enough for ev in result.evidence):
        return -math.inf
    values = [ev.confidence for ev in result.evidence if ev.confidence is not None]
    return min(values, default=1.0)


def placeholder_rows(
    results: Sequence[Resolution | Refusal | IntermediateQueryError],
    records: Sequence[QARecord],
    answerable: Sequence[bool] | None = None,
) -> list[dict[str, Any]]:
    """One row per placeholder of every parsed output: kind, the support signals and whether the best
    candidate is among the gold query's IDs (what the support model estimates)."""
    from pgmr.resolver.support import features

    rows = []
    for i, (result, record) in enumerate(zip(results, records, strict=True)):
        if isinstance(result, IntermediateQueryError):
            continue
        gold = {*gold_ids(record, "entity"), *gold_ids(record, "relation")}
        for ev in result.evidence:
            best = ev.best
            rows.append(
                {
                    "question": i,
                    "kind": ev.placeholder.kind,
                    "answerable": None if answerable is None else answerable[i],
                    "correct": best is not None and best.id in gold,
                    "features": features(ev.placeholder, ev.candidates),
                }
            )
    return rows


def risk_coverage(
    confidences: Sequence[float | None], correct: Sequence[bool]
) -> tuple[list[dict[str, float]], float | None]:
    """Questions answered most-confident first: Query EM of the answered ones against coverage (answered / all;
    unparsable outputs are never answered), and the area under that curve (mean accuracy over the coverage
    steps, times the largest coverage): 1 is a perfect ordering of perfect answers."""
    n = len(confidences)
    ranked = sorted(
        (i for i, c in enumerate(confidences) if c is not None and c > -math.inf),
        key=lambda i: (-float(confidences[i]), i),  # type: ignore[arg-type]
    )
    if not ranked:
        return [], None
    curve = []
    right = 0
    area = 0.0
    for k, i in enumerate(ranked, 1):
        right += bool(correct[i])
        area += right / k
        curve.append(
            {"coverage": k / n, "accuracy": right / k, "confidence": float(confidences[i])}  # type: ignore[arg-type]
        )
    return curve, area / n


def thin(curve: Sequence[dict[str, float]], points: int = 101) -> list[dict[str, float]]:
    """At most `points` points of a long curve, evenly spaced, the last kept (for metrics.json and plots)."""
    if len(curve) <= points:
        return list(curve)
    step = (len(curve) - 1) / (points - 1)
    return [curve[round(i * step)] for i in range(points)]


__all__ = [
    "VARIANTS",
    "UnanswerableSet",
    "build_set",
    "gold_ids",
    "min_confidence",
    "placeholder_rows",
    "risk_coverage",
    "thin",
]
