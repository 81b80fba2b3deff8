"""Unanswerable question sets and what refusal is judged on: used by the refusal experiment (test) and by
`pgmr experiment fit-refusal` (validation; the support model and the shipped threshold are chosen there only).

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
    from pgmr.pipeline import AskResult
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


def removal(variant: str, records: Sequence[QARecord], seed: int = 0) -> tuple[list[QARecord], set[str]]:
    """The questions of `variant` in their seeded order, and the gold IDs it removes (no memory needed)."""
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
    return chosen, removed


def build_set(variant: str, records: Sequence[QARecord], full: Memory, seed: int = 0) -> UnanswerableSet:
    from pgmr.experiments.common import sub_memory

    chosen, removed = removal(variant, records, seed)
    kind = "entity" if variant == "entity-removed" else "relation"
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
                    # As the resolver computed them (with the question, where it had one).
                    "features": dict(ev.support.features)
                    if ev.support is not None
                    else features(ev.placeholder, ev.candidates),
                }
            )
    return rows


@dataclass(frozen=True)
class DraftOutcome:
    """One draft of a question resolved without refusal: what the refusal threshold gates, how the reranker
    ranks it, and what it is worth if returned."""

    confidence: float | None  # its weakest placeholder's (min_confidence); None: it did not parse
    score: float = 0.0  # the reranker's score (0 for a lone draft)
    query_em: bool = False
    uri_em: bool = False
    sparql: str | None = None


Question = Sequence[DraftOutcome]


def draft_outcomes(
    results: Sequence[AskResult], records: Sequence[QARecord]
) -> list[tuple[DraftOutcome, ...]]:
    """Every question's drafts as resolved without refusal (results of pgmr.experiments.predict.answer_drafts at
    threshold 0), judged against the gold query as the scorer judges a final query."""
    from pgmr.evaluation.metrics import query_ids, sparql_tokens

    def outcome(
        gold: tuple[Any, Any], confidence: float | None, score: float, sparql: str | None
    ) -> DraftOutcome:
        return DraftOutcome(
            confidence,
            score,
            sparql is not None and sparql_tokens(sparql) == gold[0],
            sparql is not None and query_ids(sparql) == gold[1],
            sparql,
        )

    out: list[tuple[DraftOutcome, ...]] = []
    for result, record in zip(results, records, strict=True):
        gold = (sparql_tokens(record.sparql), query_ids(record.sparql))
        if not result.drafts:
            out.append((outcome(gold, min_confidence(result.verdict), 0.0, result.sparql),))
            continue
        drafts = []
        for d in result.drafts:
            confidence: float | None
            if d.status == "invalid":
                confidence = None
            elif d.status == "refused":  # without a threshold only a similarity gate refuses
                confidence = -math.inf
            else:
                confidence = d.signals["min_confidence"] if d.signals.get("placeholders") else 1.0
            drafts.append(outcome(gold, confidence, d.score, d.sparql))
        out.append(tuple(drafts))
    return out


def _eligible(o: DraftOutcome, threshold: float) -> bool:
    return o.confidence is not None and o.confidence > -math.inf and o.confidence >= threshold


def chosen_at(question: Question, threshold: float) -> int | None:
    """The draft the pipeline returns at `threshold` (None: the question is refused or did not parse). A
    draft whose weakest placeholder reaches the threshold resolves, and a resolved draft beats a refused one
    whatever the scores; among those the reranker's best, the earlier on a tie (pgmr.pipeline.rerank). Exact for
    two drafts; with more, a refused draft's agreement with the others is kept in their scores."""
    eligible = [k for k, o in enumerate(question) if _eligible(o, threshold)]
    return max(eligible, key=lambda k: (question[k].score, -k)) if eligible else None


def question_confidence(question: Question) -> float | None:
    """The threshold up to which the question is answered: its best-supported draft's weakest placeholder
    (None when no draft parsed)."""
    values = [o.confidence for o in question if o.confidence is not None]
    return max(values) if values else None


def sweep(
    questions: Sequence[Question],
    answerable: Sequence[bool],
    thresholds: Sequence[float],
) -> list[dict[str, Any]]:
    """One point per threshold: refusal precision, recall, answerable refused, coverage and the Query EM and
    URI EM of the answered questions (a question with no parsed draft is neither answered nor refused)."""
    n = len(questions)
    n_unanswerable = sum(not a for a in answerable)
    n_answerable = n - n_unanswerable
    parsed = [question_confidence(q) is not None for q in questions]
    curve = []
    for t in thresholds:
        chosen = [chosen_at(q, t) for q in questions]
        refused = [p and c is None for p, c in zip(parsed, chosen, strict=True)]
        answered = [(q[c]) for q, c in zip(questions, chosen, strict=True) if c is not None]
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
                "answered_accuracy": sum(o.query_em for o in answered) / len(answered) if answered else None,
                "answered_uri_em": sum(o.uri_em for o in answered) / len(answered) if answered else None,
                "query_em": sum(o.query_em for o in answered) / n if n else 0.0,
            }
        )
    return curve


def risk_coverage(questions: Sequence[Question]) -> tuple[list[dict[str, float]], float | None]:
    """The threshold lowered step by step: Query EM of the answered questions against coverage (answered /
    all; a question without a parsed draft is never answered), one point per question as it is first answered
    (most confident first), and the area under that curve (mean accuracy over the coverage steps, times the
    largest coverage): 1 is a perfect ordering of perfect answers. As the threshold falls past another draft of
    an answered question, that question's answer becomes the draft the pipeline would then choose."""
    n = len(questions)
    events = sorted(
        (
            (-float(c), i, c)
            for i, q in enumerate(questions)
            for c in {o.confidence for o in q if o.confidence is not None and o.confidence > -math.inf}
        ),
        key=lambda e: (e[0], e[1]),
    )
    if not events:
        return [], None
    current: dict[int, bool] = {}
    right = 0
    area = 0.0
    curve = []
    for _, i, c in events:
        k = chosen_at(questions[i], c)
        em = bool(k is not None and questions[i][k].query_em)
        if i in current:
            right += em - current[i]
            current[i] = em
            continue
        current[i] = em
        right += em
        area += right / len(current)
        curve.append({"coverage": len(current) / n, "accuracy": right / len(current), "confidence": float(c)})
    return curve, area / n


def thin(curve: Sequence[dict[str, float]], points: int = 101) -> list[dict[str, float]]:
    """At most `points` points of a long curve, evenly spaced, the last kept (for metrics.json and plots)."""
    if len(curve) <= points:
        return list(curve)
    step = (len(curve) - 1) / (points - 1)
    return [curve[round(i * step)] for i in range(points)]


__all__ = [
    "VARIANTS",
    "DraftOutcome",
    "UnanswerableSet",
    "build_set",
    "removal",
    "chosen_at",
    "draft_outcomes",
    "gold_ids",
    "min_confidence",
    "placeholder_rows",
    "question_confidence",
    "risk_coverage",
    "sweep",
    "thin",
]
