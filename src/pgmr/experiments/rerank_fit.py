"""Fitting an ensemble's reranker (pgmr.pipeline.rerank) on questions with gold queries: what `pgmr ensemble
fit-rerank` (pgmr.experiments.ensemble_rerank) does for the shipped default on LC-QuAD 2.0 validation, and what
`pgmr experiment lcquad2-unknown-uri --structured DIR` does on that split's own validation part.

Every draft is resolved without refusal (as `pgmr generate --resolve` with the experiment's resolver) and
scored with Query EM against the gold query. The weights are a pairwise ranking: on questions where exactly one
draft is right, logistic regression on the difference of the two drafts' signals (per member, a bias and a
weight per signal).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pgmr.datasets import QARecord
from pgmr.generators.ensemble import Draft
from pgmr.pipeline import StageConfig
from pgmr.pipeline.rerank import FEATURES, Reranker, best_draft, draft_signals, verifier_scores
from pgmr.resolver import Resolver

SEED = 0

Question = Mapping[str, Any]  # {"id", "drafts": [{"source", "signals", "right"}]}


def draft_outcomes(
    ids: Sequence[str],
    questions: Sequence[str],
    drafts: Sequence[Sequence[Draft]],
    gold: Mapping[str, QARecord],
    resolver: Resolver,
    stages: StageConfig,
    verifier: Any = None,
) -> list[dict[str, Any]]:
    """Per question: each draft's source, reranker signals and whether it is right (Query EM against `gold`).
    `stages` sets the grounding; resolution uses `resolver` (pass one without refusal: the reranker is fitted
    on what every draft would answer); `verifier`: the ensemble's (pgmr.generators.verifier), for its signal."""
    from pgmr.evaluation.metrics import evaluate_record
    from pgmr.pipeline.stages import finish_all, prepare

    if not len(ids) == len(questions) == len(drafts):
        raise ValueError(f"{len(ids)} ids, {len(questions)} questions and {len(drafts)} draft lists")
    unknown = [i for i in ids if i not in gold]
    if unknown:
        raise ValueError(f"{len(unknown)} questions have no gold query (first: {unknown[0]})")
    flat_questions = [q for q, ds in zip(questions, drafts, strict=True) for _ in ds]
    texts = [d.text for ds in drafts for d in ds]
    prepared = prepare(flat_questions, texts, "pgmr", resolver, stages.grounding)
    verified = verifier_scores(prepared, verifier, resolver)
    results = finish_all(prepared, stages)
    out, k = [], 0
    for uid, ds in zip(ids, drafts, strict=True):
        n = len(ds)
        found = draft_signals(prepared[k : k + n], [d.confidence for d in ds], verified[k : k + n])
        rows = []
        for d, signals, result in zip(ds, found, results[k : k + n], strict=True):
            right = evaluate_record({"id": uid, **result.to_row()}, gold[uid]).query_em
            rows.append({"source": d.source, "signals": signals, "right": bool(right)})
        out.append({"id": uid, "drafts": rows})
        k += n
    return out


def _phi(source: str, signals: Mapping[str, float], sources: Sequence[str]) -> list[float]:
    vector = []
    for s in sources:
        on = 1.0 if s == source else 0.0
        vector.extend([on, *(on * signals[f] for f in FEATURES)])
    return vector


class NothingToFit(ValueError):
    """No question has one right and one wrong draft."""


def fit(questions: Sequence[Question], sources: Sequence[str], l2: float = 1.0) -> Reranker:
    """The pairwise logistic reranker over `questions` (NothingToFit when no pair disagrees)."""
    from pgmr.resolver.fitting import logistic_coefficients

    names = [f"{s}:{f}" for s in sources for f in ("bias", *FEATURES)]
    rows, labels = [], []
    for q in questions:
        for a in q["drafts"]:
            for b in q["drafts"]:
                if a is not b and a["right"] != b["right"]:
                    pa, pb = (
                        _phi(a["source"], a["signals"], sources),
                        _phi(b["source"], b["signals"], sources),
                    )
                    rows.append(dict(zip(names, (x - y for x, y in zip(pb, pa, strict=True)), strict=True)))
                    labels.append(b["right"])
    if not rows:
        raise NothingToFit("no question where one draft is right and another wrong: nothing to fit")
    coef, _, _, scale = logistic_coefficients(rows, labels, names, l2=l2)
    # The pairs come in both orders, so the standardized model is linear in the difference with no offset:
    # a draft's score is its own signals times coefficient / scale.
    weights: dict[str, dict[str, float]] = {s: {} for s in sources}
    for name, c, s in zip(names, coef, scale, strict=True):
        source, signal = name.split(":", 1)
        weights[source][signal] = round(c / s, 6)
    return Reranker(weights)


def accuracy(questions: Sequence[Question], choose: Callable[[Question], Mapping[str, Any]]) -> float:
    return sum(1 for q in questions if choose(q)["right"]) / len(questions) if questions else 0.0


def chooser(reranker: Reranker) -> Callable[[Question], Mapping[str, Any]]:
    def choose(q: Question) -> Mapping[str, Any]:
        # the pipeline's rule; no refusals here, so a draft's rank is whether it resolved
        drafts = q["drafts"]
        scores = [reranker.score(d["source"], d["signals"]) for d in drafts]
        return drafts[best_draft([int(d["signals"]["resolved"]) for d in drafts], scores)]

    return choose


def _member(source: str) -> Callable[[Question], Mapping[str, Any]]:
    return lambda q: next(d for d in q["drafts"] if d["source"] == source)


def _oracle(q: Question) -> Mapping[str, Any]:
    return max(q["drafts"], key=lambda d: d["right"])


def member_figures(questions: Sequence[Question], sources: Sequence[str]) -> dict[str, float]:
    """Query EM of each member alone and of the oracle (any draft right): what a choice is measured against."""
    return {
        **{f"{s} alone": accuracy(questions, _member(s)) for s in sources},
        "oracle": accuracy(questions, _oracle),
    }


def report(
    questions: Sequence[Question], sources: Sequence[str], l2: float = 1.0, *, held_out: int = 0
) -> dict[str, Any]:
    """Fit on the questions after the first `held_out` and report Query EM of each member alone, the oracle
    (any draft right) and the reranker's choice: on the first `held_out` (fitted on the rest; left out when 0)
    and on the rest by two-fold cross-validation (fitted on one half, scored on the other). `reranker`: the
    weights fitted on all of the rest."""
    first, rest = list(questions[:held_out]), list(questions[held_out:])
    shuffled = list(rest)
    random.Random(SEED).shuffle(shuffled)
    half = len(shuffled) // 2
    h1, h2 = shuffled[:half], shuffled[half:]
    try:
        cross: float | None = (
            accuracy(h2, chooser(fit(h1, sources, l2))) * len(h2)
            + accuracy(h1, chooser(fit(h2, sources, l2))) * len(h1)
        ) / max(1, len(rest))
    except NothingToFit:  # too few disagreements in a half (tiny sets): no cross-validated figure
        cross = None
    final = fit(rest, sources, l2)
    figures: dict[str, Any] = {"questions": {"first": len(first), "rest": len(rest)}, "l2": l2}
    parts = (("first", first), ("rest", rest)) if first else (("rest", rest),)
    for name, part in parts:
        figures[name] = member_figures(part, sources)
    if first:
        figures["first"]["reranked (fitted on the rest)"] = accuracy(first, chooser(final))
    figures["rest"]["reranked (two-fold)"] = cross
    figures["reranker"] = final.to_json()["weights"]
    return figures


__all__ = ["NothingToFit", "accuracy", "chooser", "draft_outcomes", "fit", "member_figures", "report"]
