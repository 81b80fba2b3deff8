"""Several final queries for one question, not a silent top-1: the pipeline's answer and the next best complete
queries, each with its support, for interfaces that let a person choose (`pgmr ask --candidates N`, the
`candidates` field of POST /ask and /resolve).

Where they come from. Every draft of the question that parsed (an ensemble writes several; a refused one
too) has, per placeholder, the resolver's top-k candidates; every combination of one candidate per
placeholder, filled into the draft's query, is a complete final query. A resolved draft's combinations are
filled into its query as the resolver returned it (with any triple the training facts turned round), as the
KG check fills the combinations it probes; a refused draft's, into the query the resolver would have
returned for its best candidates with refusal off. Queries are told apart by their final SPARQL: two drafts
that fill to the same query give one candidate.

How they are ranked: by support, the product over a query's placeholders of the probability that its pick
is what the placeholder names (pgmr.resolver.pick_support: the resolver's calibrated confidence for its best
candidate, the rest of the probability shared among the other candidates by a softmax of their resolver
scores, as sharp as the support model's own weight on similarity). If the
placeholders were independent, the product would be the probability that every ID of the query is right.
It is one scale for every query, whichever draft it comes from and however many placeholders it has (a query
with more IDs has more ways to be wrong, and its product is smaller), and it varies the weakest placeholders
first: the less sure the resolver is of a pick, the more probability its other candidates share. The
alternatives considered and set aside:

- the sum of the candidates' resolver scores (the order in which the KG check probes combinations): scores
  are similarities plus a prior, not probabilities; they rank the candidates of one placeholder well, but a
  query with more placeholders sums more, and a near tie of scores says nothing of which placeholder the
  resolver is unsure of;
- the weakest placeholder's confidence (what the refusal gates on): every combination that keeps the
  weakest pick ties, so it cannot rank what the other placeholders could be.

Ties (equal products) go to the draft the reranker scored higher, then to the higher total resolver score.
A pick is `supported` when it passes the gates the refusal applies to the resolver's own pick (its
probability at least the refusal threshold, its similarity at least the similarity threshold); a query is
when all its picks are. Since the others share what the best one leaves, an alternative to a pick the
memory supports is itself below the threshold: flagged, never hidden.

The answer comes first, whatever its support: the KG check (which keeps the best-scored combination that
has a result on the store) and the ensemble's reranker (the verifier, the drafts' agreement, the members'
own confidences) chose it with evidence the support does not see, and what a question gets without
`--candidates` must not move. The alternatives follow by support, highest first; so support does not
increase from the second candidate on, and the first may have less than the second. When the KG check ran
an alternative, its `results` says what it found (usually nothing: why it is not the answer).

A refused question stays refused: there is no answer, and the candidates are the best combinations by
support, each with `supported` false where a pick fails the refusal's gates, so that a person can see what
the memory does have and choose. A question without a query (`invalid`) has no candidates; one in direct
or RAG mode (no placeholders) has its answer alone, with no support.
"""

from __future__ import annotations

import heapq
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from pgmr.conversion import fill
from pgmr.pipeline.results import AskResult, Pick, QueryCandidate
from pgmr.pipeline.stages import Prepared
from pgmr.query import IntermediateQuery
from pgmr.resolver import PlaceholderEvidence, Refusal, Resolution, Resolver
from pgmr.resolver.kg_choice import Probe, ranked_combinations
from pgmr.resolver.pick_support import pick_confidences, pick_supported, similarity_slope

# The most candidates one question may ask for (`pgmr ask --candidates`, the service's `candidates` field).
MAX_CANDIDATES = 10
# A confidence of 0 would make every product with it -inf in logs: floored, it still ranks last.
_FLOOR = 1e-12
# The resolver's score breaks ties between equal supports, weighed too little to reorder unequal ones.
_TIE = 1e-9
_MAX_TRIED = 1000


def check_candidates(n: int) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_CANDIDATES:
        raise ValueError(f"candidates must be an integer from 1 to {MAX_CANDIDATES}, got {n!r}")
    return n


@dataclass(frozen=True)
class _Draft:
    """One draft's verdict, the query its combinations fill, and per placeholder its candidates' supports."""

    verdict: Resolution | Refusal
    query: IntermediateQuery
    source: str | None
    supports: tuple[tuple[float, ...], ...]


@dataclass(frozen=True)
class _Combination:
    log_support: float
    draft: int
    order: int
    index: tuple[int, ...]


def ranked_queries(
    item: Prepared, result: AskResult, n: int, resolver: Resolver
) -> tuple[QueryCandidate, ...]:
    """Up to `n` distinct final queries for `item`'s question, ranked as the module docstring says: the
    answer (`result`, what `finish` made of `item`) first when it has a query, then the best supported
    alternatives. `resolver`: the one that resolved the drafts (its calibration, and its training facts,
    which orient a refused draft's query)."""
    check_candidates(n)
    drafts = _drafts(item, resolver)
    found: list[QueryCandidate] = []
    seen: set[str] = set()
    if result.sparql is not None and result.status != "refused":
        found.append(_answer(result, drafts))
        seen.add(result.sparql)
    alternatives: list[QueryCandidate] = []
    # Only drafts that fill to the same query make a combination be skipped, so this bound is never reached
    # in practice; it keeps a pathological ensemble from walking a product of 50^6 combinations.
    for combination in itertools.islice(_merged(drafts), _MAX_TRIED):
        if len(found) + len(alternatives) >= n:
            break
        draft = drafts[combination.draft]
        candidate = _candidate(
            draft, combination.index, result.probes if draft.verdict is result.verdict else ()
        )
        if candidate.sparql not in seen:
            seen.add(candidate.sparql)
            alternatives.append(candidate)
    # Stable: the merge order stands where rounding makes two supports equal.
    alternatives.sort(key=lambda c: -(c.support if c.support is not None else 1.0))
    return (*found, *alternatives)


def _drafts(item: Prepared, resolver: Resolver) -> list[_Draft]:
    """The drafts that parsed, the chosen one first, then the others as the reranker ranked them; the draft
    of the answer (after the KG check across drafts, maybe not the chosen one) is among them."""
    chosen = next((d.source for d in item.drafts if d.chosen), None)
    drafts: list[_Draft] = []
    for source, prepared in ((chosen, item), *item.others):
        verdict = _verdict(prepared)
        if verdict is None:
            continue
        supports = tuple(
            pick_confidences(e, similarity_slope(resolver.calibration, e.placeholder.kind))
            for e in verdict.evidence
        )
        drafts.append(_Draft(verdict, _query_of(verdict, resolver), source, supports))
    return drafts


def _verdict(prepared: Prepared) -> Resolution | Refusal | None:
    if prepared.resolution is not None:
        return prepared.resolution
    verdict = prepared.result.verdict if prepared.result is not None else None
    return verdict if isinstance(verdict, Resolution | Refusal) else None


def _query_of(verdict: Resolution | Refusal, resolver: Resolver) -> IntermediateQuery:
    """The query a draft's combinations are filled into: a resolution's own; for a refusal, the query the
    resolver would have returned for its best candidates (triples turned round as the training facts say)."""
    if isinstance(verdict, Resolution) or resolver.facts is None:
        return verdict.query
    best = {e.placeholder.name: e.best.id for e in verdict.evidence if e.best is not None}
    if len(best) < len(verdict.evidence):
        return verdict.query  # a placeholder without any candidate: no combination to fill
    skeleton, _ = resolver.facts.turned(verdict.query.skeleton, best)
    return replace(verdict.query, skeleton=skeleton)


def _combinations(draft: _Draft, number: int) -> Iterator[_Combination]:
    """A draft's combinations by decreasing support (sum of log confidences), ties by resolver score: each
    placeholder's candidates sorted so, then the lazy best-first search over their product."""
    orders: list[list[int]] = []
    logs: list[list[float]] = []
    for evidence, supports in zip(draft.verdict.evidence, draft.supports, strict=True):
        keys = [_log(s) + _TIE * c.score for s, c in zip(supports, evidence.candidates, strict=True)]
        # Stable even reversed: equal keys keep the resolver's order.
        order = sorted(range(len(keys)), key=keys.__getitem__, reverse=True)
        orders.append(order)
        logs.append([keys[j] for j in order])
    for k, index in enumerate(ranked_combinations(logs)):
        # The same sum the search ranks by, so that each draft's stream is sorted by the merge's key.
        total = math.fsum(logs[slot][i] for slot, i in enumerate(index))
        yield _Combination(total, number, k, tuple(orders[slot][i] for slot, i in enumerate(index)))


def _merged(drafts: Sequence[_Draft]) -> Iterator[_Combination]:
    streams = [_combinations(d, number) for number, d in enumerate(drafts)]
    yield from heapq.merge(*streams, key=lambda c: (-c.log_support, c.draft, c.order))


def _log(confidence: float) -> float:
    return math.log(max(confidence, _FLOOR))


def _picks(draft: _Draft, index: Sequence[int]) -> tuple[tuple[Pick, ...], float]:
    """The picks of one combination, and its support (the product of their unrounded probabilities)."""
    picks = []
    for evidence, supports, j in zip(draft.verdict.evidence, draft.supports, index, strict=True):
        c = evidence.candidates[j]
        picks.append(
            Pick(
                evidence.placeholder.name,
                evidence.placeholder.kind,
                c.id,
                c.label,
                c.description,
                c.score,
                c.similarity,
                c.prior,
                round(supports[j], 6),
                pick_supported(evidence, j, supports[j]),
            )
        )
    support = math.prod(s[j] for s, j in zip(draft.supports, index, strict=True))
    return tuple(picks), round(support, 6)


def _candidate(draft: _Draft, index: Sequence[int], probes: Sequence[Probe]) -> QueryCandidate:
    picks, support = _picks(draft, index)
    mapping = tuple((p.name, p.id) for p in picks)
    probed = next((p for p in probes if p.mapping == mapping), None)
    return QueryCandidate(
        fill(draft.query, dict(mapping), namespaces=dict(draft.verdict.prefixes)),
        mapping,
        picks,
        support,
        all(p.supported for p in picks),
        source=draft.source,
        results=probed.count if probed is not None else None,
    )


def _answer(result: AskResult, drafts: Sequence[_Draft]) -> QueryCandidate:
    """The result's own query as a candidate: its IDs (the KG check's choice, maybe not the resolver's best)
    with their support; without placeholders (direct and RAG modes) there is no support to give."""
    assert result.sparql is not None
    source = next((d.source for d in result.drafts if d.chosen), None)
    draft = next((d for d in drafts if d.verdict is result.verdict), None)
    if draft is None:
        return QueryCandidate(result.sparql, result.mapping, (), None, True, True, source)
    chosen = dict(result.mapping)
    index = [_position(e, chosen[e.placeholder.name]) for e in draft.verdict.evidence]
    picks, support = _picks(draft, index)
    probed = next((p for p in result.probes if p.mapping == result.mapping), None)
    return QueryCandidate(
        result.sparql,
        result.mapping,
        picks,
        support,
        all(p.supported for p in picks),
        True,
        source,
        probed.count if probed is not None else None,
    )


def _position(evidence: PlaceholderEvidence, wikidata_id: str) -> int:
    for j, c in enumerate(evidence.candidates):
        if c.id == wikidata_id:
            return j
    raise ValueError(f"{evidence.placeholder.name} = {wikidata_id} is none of its candidates")


__all__ = ["MAX_CANDIDATES", "check_candidates", "ranked_queries"]
