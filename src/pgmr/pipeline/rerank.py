"""Choosing among drafts: when a generator writes several intermediate queries per question (an ensemble of
members, pgmr.generators.ensemble), each is checked, parsed, grounded and resolved like any output, and the
one the reranker scores highest goes on to the store.

The score is linear in a few signals of how well the memory supports the draft (the resolver's support
confidence per placeholder, pgmr.resolver.support), whether its entity labels are spans of the question,
whether other members wrote the same final query, and what the member reports of its own output (the
structured model's shape and slot probabilities), with one set of weights per member (members differ in how
far their confidences can be trusted). With a store, `stages.finish` also lets a draft whose query finds
nothing give way to the next one (the KG check across drafts). The weights are fitted on LC-QuAD 2.0 validation
(`pgmr ensemble fit-rerank`) as a pairwise ranking: on questions where exactly one draft is right, the
difference of the two drafts' signals predicts which; they ship as the ensemble's `reranker.json`.
"""

from __future__ import annotations

import copy
import math
import re
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pgmr.generators.ensemble import RERANKER_FILE, Draft
from pgmr.generators.verifier import MAX_LOGIT, VERIFIER_DIR, memory_describer
from pgmr.pipeline.asked import unasked_parts
from pgmr.pipeline.results import DraftScore
from pgmr.pipeline.stages import Advance, Prepared, Timer, prepare

if TYPE_CHECKING:
    from pgmr.resolver import PlaceholderEvidence, Resolver
    from pgmr.resolver.grounding import GroundingConfig

FEATURES: tuple[str, ...] = (
    "resolved",  # 1 when the draft resolved to a final query
    "min_confidence",  # the least supported placeholder's support confidence
    "min_entity_confidence",  # the same over entity placeholders (1 without any)
    "min_relation_confidence",  # the same over relation placeholders (1 without any)
    "mean_log_confidence",  # mean log support confidence (floored at 1e-4)
    "placeholders",  # how many placeholders the draft has
    "entities_in_question",  # share of entity labels that are word spans of the question (1 without any)
    "agreement",  # share of the other drafts with the same final query
    # What the member reports of its own output (pgmr.generators.ensemble.Draft.confidence), as logs floored at
    # 1e-4; 0 for members that report nothing (their weight for it is then moot).
    "generator_template",  # log probability of the draft's query shape (the structured model)
    "generator_slots",  # log probability of its least probable slot value, given the shape
    # Type triples and qualifiers the question does not ask for (pgmr.pipeline.asked; since 2026-12-07).
    "unasked",
    # The ensemble's verifier (pgmr.generators.verifier): its logit that the resolved query answers the
    # question, clipped to +-10; -10 for a draft that did not resolve; 0 for every draft without a verifier.
    "verifier",
)
_FLOOR = 1e-4
_WORD = re.compile(r"\w+")
# Among drafts, one that resolved beats one the resolver refused, which beats one that did not parse,
# whatever their scores (the weights were fitted without refusals).
_STATUS_RANK = {"resolved": 2, "refused": 1}


class RerankerError(ValueError):
    """A reranker file that does not describe this module's signals or the ensemble's members."""


@dataclass(frozen=True)
class Reranker:
    """Per source (an ensemble member's name), a bias and a weight per signal of FEATURES."""

    weights: Mapping[str, Mapping[str, float]]
    provenance: Mapping[str, Any] = field(default_factory=dict)
    # The ensemble's verifier (pgmr.generators.verifier.Verifier), which feeds the "verifier" signal.
    verifier: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.weights:
            raise RerankerError("a reranker needs weights for at least one source")
        for source, weights in self.weights.items():
            expected = {"bias", *FEATURES}
            if set(weights) != expected:
                missing = sorted(expected - set(weights))
                extra = sorted(set(weights) - expected)
                raise RerankerError(f"weights of {source!r}: missing {missing}, unknown {extra}")
            for name, value in weights.items():
                if not isinstance(value, int | float) or not math.isfinite(value):
                    raise RerankerError(f"weight {name!r} of {source!r} is not a finite number: {value!r}")

    @property
    def uses_verifier(self) -> bool:
        return any(w["verifier"] != 0 for w in self.weights.values())

    @classmethod
    def from_json(cls, data: Mapping[str, Any], verifier: Any = None) -> Reranker:
        if not isinstance(data, Mapping) or not isinstance(data.get("weights"), Mapping):
            raise RerankerError("a reranker is a JSON object with 'weights': {source: {signal: weight}}")
        features = tuple(data.get("features", FEATURES))
        weights = {s: {k: float(v) for k, v in w.items()} for s, w in data["weights"].items()}
        unknown = sorted(set(features) - set(FEATURES))
        if unknown:
            raise RerankerError(f"reranker signals {unknown} are not among this version's {list(FEATURES)}")
        # A file fitted before a signal existed weighs it 0: its choice is what it always was.
        added = [name for name in FEATURES if name not in features]
        weights = {s: {**dict.fromkeys(added, 0.0), **w} for s, w in weights.items()}
        reranker = cls(weights, dict(data.get("provenance", {})), verifier)
        if reranker.uses_verifier and verifier is None:
            raise RerankerError(
                f"the reranker weighs a draft verifier, but none was loaded (an ensemble's {VERIFIER_DIR}/)"
            )
        return reranker

    def to_json(self) -> dict[str, Any]:
        return {
            "features": list(FEATURES),
            "weights": {s: dict(w) for s, w in self.weights.items()},
            "provenance": dict(self.provenance),
        }

    def check_sources(self, sources: Sequence[str]) -> None:
        missing = [s for s in sources if s not in self.weights]
        if missing:
            raise RerankerError(
                f"the reranker has no weights for {missing} (it knows {sorted(self.weights)})"
            )

    def score(self, source: str, signals: Mapping[str, float]) -> float:
        weights = self.weights[source]
        return weights["bias"] + sum(weights[name] * signals[name] for name in FEATURES)


def _evidence(item: Prepared) -> Sequence[PlaceholderEvidence]:
    if item.resolution is not None:
        return item.resolution.evidence
    verdict = item.result.verdict if item.result is not None else None
    return verdict.evidence if verdict is not None else ()


def status_of(item: Prepared) -> str:
    if item.resolution is not None:
        return "resolved"
    return item.result.status if item.result is not None else "invalid"


def _final_sparql(item: Prepared) -> str | None:
    return item.resolution.sparql if item.resolution is not None else None


def _log(confidence: Mapping[str, float], key: str) -> float:
    value = confidence.get(key)
    return math.log(max(float(value), _FLOOR)) if value is not None else 0.0


def signals(
    item: Prepared,
    agreement: float,
    confidence: Mapping[str, float] | None = None,
    verified: float | None = None,
) -> dict[str, float]:
    """The reranker's signals of one prepared draft (all but `agreement` from the draft alone; `confidence`
    is what its member reported; `verified` the verifier's logit, None without a verifier)."""
    evidence = _evidence(item)
    confidences = [float(e.confidence or 0.0) for e in evidence]
    entities = [e for e in evidence if e.placeholder.kind == "entity"]
    relations = [e for e in evidence if e.placeholder.kind == "relation"]
    question = f" {' '.join(_WORD.findall((item.question or '').lower()))} "
    in_question = [f" {' '.join(_WORD.findall(e.placeholder.label.lower()))} " in question for e in entities]
    resolved = item.resolution is not None and bool(confidences)
    return {
        "resolved": float(resolved),
        "min_confidence": min(confidences) if confidences else 0.0,
        "min_entity_confidence": min((float(e.confidence or 0.0) for e in entities), default=1.0),
        "min_relation_confidence": min((float(e.confidence or 0.0) for e in relations), default=1.0),
        "mean_log_confidence": (
            sum(math.log(max(c, _FLOOR)) for c in confidences) / len(confidences)
            if confidences
            else math.log(_FLOOR)
        ),
        "placeholders": float(len(evidence)),
        "entities_in_question": sum(in_question) / len(in_question) if in_question else 1.0,
        "agreement": agreement,
        "generator_template": _log(confidence or {}, "template"),
        "generator_slots": _log(confidence or {}, "slots"),
        "unasked": float(unasked_parts(item.question, _final_sparql(item), evidence)),
        "verifier": 0.0 if verified is None else (verified if resolved else -MAX_LOGIT),
    }


def draft_signals(
    items: Sequence[Prepared],
    confidences: Sequence[Mapping[str, float]] | None = None,
    verified: Sequence[float | None] | None = None,
) -> list[dict[str, float]]:
    """The signals of one question's prepared drafts (`confidences`: what each draft's member reported;
    `verified`: the verifier's logits, `verifier_scores`)."""
    finals = [_final_sparql(i) for i in items]
    reported = list(confidences) if confidences is not None else [{} for _ in items]
    logits = list(verified) if verified is not None else [None for _ in items]
    out = []
    for k, item in enumerate(items):
        others = [f for j, f in enumerate(finals) if j != k]
        same = sum(1 for f in others if f is not None and f == finals[k])
        out.append(signals(item, same / len(others) if others else 0.0, reported[k], logits[k]))
    return out


def verifier_scores(items: Sequence[Prepared], verifier: Any, resolver: Resolver) -> list[float | None]:
    """The verifier's logit for each resolved draft (the query verbalized with the memory's labels), -10 for
    the others; None for every draft when there is no verifier. Drafts with the same final query and
    question are scored once."""
    if verifier is None:
        return [None for _ in items]
    verbalize = verifier.describe_with(memory_describer(resolver.memory))
    pairs: dict[tuple[str, str], int] = {}
    keys: list[tuple[str, str] | None] = []
    for item in items:
        text = verbalize(item.resolution.sparql) if item.resolution is not None else None
        key = (item.question or "", text) if text is not None else None
        if key is not None:
            pairs.setdefault(key, len(pairs))
        keys.append(key)
    scores = verifier.score([q for q, _ in pairs], [t for _, t in pairs]) if pairs else []
    return [scores[pairs[key]] if key is not None else -MAX_LOGIT for key in keys]


def best_draft(ranks: Sequence[int], scores: Sequence[float]) -> int:
    """The draft to keep: the best status rank (resolved > refused > invalid), then the best score, then the
    earlier member."""
    return max(range(len(scores)), key=lambda k: (ranks[k], scores[k], -k))


def choose(
    items: Sequence[Prepared],
    sources: Sequence[str],
    reranker: Reranker,
    confidences: Sequence[Mapping[str, float]] | None = None,
    verified: Sequence[float | None] | None = None,
) -> tuple[int, tuple[DraftScore, ...]]:
    """The index of the draft to keep, and every draft's score (ties go to the earlier member)."""
    found = draft_signals(items, confidences, verified)
    scores = [reranker.score(s, f) for s, f in zip(sources, found, strict=True)]
    statuses = [status_of(i) for i in items]
    best = best_draft([_STATUS_RANK.get(s, 0) for s in statuses], scores)
    return best, tuple(
        DraftScore(s, st, sc, k == best, f, _final_sparql(item))
        for k, (s, st, sc, f, item) in enumerate(zip(sources, statuses, scores, found, items, strict=True))
    )


def prepare_drafts(
    questions: Sequence[str | None],
    drafts: Sequence[Sequence[Draft]],
    mode: str,
    resolver: Resolver,
    grounding: GroundingConfig,
    reranker: Reranker | None,
    *,
    timers: Sequence[Timer] | None = None,
    chunk: int | None = None,
    advance: Advance | None = None,
    lock: AbstractContextManager[Any] | None = None,
) -> list[Prepared]:
    """`prepare` for every draft, then per question the chosen one, which records every draft's score in
    `Prepared.drafts`. With one draft per question this is `prepare` itself (no reranker needed)."""
    if len(drafts) != len(questions):
        raise ValueError(f"{len(questions)} questions but {len(drafts)} draft lists")
    if any(not d for d in drafts):
        raise ValueError("every question needs at least one draft")
    timers = list(timers) if timers is not None else [Timer() for _ in questions]
    if all(len(d) == 1 for d in drafts):
        return prepare(
            questions,
            [d[0].text for d in drafts],
            mode,
            resolver,
            grounding,
            timers=timers,
            chunk=chunk,
            advance=advance,
            lock=lock,
        )
    if reranker is None:
        raise ValueError("several drafts per question need a reranker to choose among them")
    reranker.check_sources(sorted({d.source for ds in drafts for d in ds}))
    # Members often write the same text for a question (two structured models of one recipe agree on most):
    # each distinct text of a question is resolved once and copied to its duplicates, which then score the
    # same. The drafts of a question share its timer: the time it took is that of all of them.
    slots: list[int] = []
    unique: dict[tuple[int, str], int] = {}
    for n, ds in enumerate(drafts):
        for d in ds:
            slots.append(unique.setdefault((n, d.text), len(unique)))
    keys = list(unique)
    resolved = prepare(
        [questions[n] for n, _ in keys],
        [text for _, text in keys],
        mode,
        resolver,
        grounding,
        timers=[timers[n] for n, _ in keys],
        chunk=chunk,
        advance=advance,
        lock=lock,
    )
    started = time.perf_counter()
    logits = verifier_scores(resolved, reranker.verifier, resolver)
    if reranker.verifier is not None:
        seconds = time.perf_counter() - started
        for timer in timers:  # one call for the batch, as "resolve" is timed
            timer.add_seconds("verify", seconds)
    verified = [logits[slot] for slot in slots]
    seen: set[int] = set()
    prepared: list[Prepared] = []
    for slot in slots:  # a separate object per draft: the chosen one is given its scores and alternatives
        prepared.append(resolved[slot] if slot not in seen else copy.copy(resolved[slot]))
        seen.add(slot)
    chosen: list[Prepared] = []
    start = 0
    for ds in drafts:
        items = prepared[start : start + len(ds)]
        mine = verified[start : start + len(ds)]
        start += len(ds)
        best, scores = choose(items, [d.source for d in ds], reranker, [d.confidence for d in ds], mine)
        items[best].drafts = scores
        ranked = sorted(
            (k for k in range(len(items)) if k != best and status_of(items[k]) != "invalid"),
            key=lambda k: -scores[k].score,
        )
        items[best].others = tuple((ds[k].source, items[k]) for k in ranked)
        items[best].alternatives = tuple(
            (ds[k].source, items[k]) for k in ranked if items[k].resolution is not None
        )
        chosen.append(items[best])
    return chosen


def reranker_of(generator: Any) -> Reranker | None:
    """The reranker an ensemble generator ships, checked against its members (None for other generators).

    Raises RerankerError for an ensemble of several members without a valid reranker."""
    members = getattr(generator, "members", None)
    if members is None:
        return None
    data = getattr(generator, "reranker", None)
    if data is None:
        if len(members) > 1:
            raise RerankerError(
                f"the ensemble has no {RERANKER_FILE} to choose among its drafts; fit one with pgmr ensemble fit-rerank"
            )
        return None
    reranker = Reranker.from_json(data, getattr(generator, "verifier", None))
    reranker.check_sources([name for name, _ in members])
    return reranker


__all__ = [
    "FEATURES",
    "DraftScore",
    "Reranker",
    "RerankerError",
    "best_draft",
    "choose",
    "draft_signals",
    "prepare_drafts",
    "reranker_of",
    "signals",
    "verifier_scores",
]
