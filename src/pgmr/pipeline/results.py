"""What one question's way through the pipeline produces: `AskResult`, the one result type of every entry
point (`pgmr ask`, `pgmr serve`, `pgmr generate --resolve`, `pgmr resolve`, the demo, the experiments).

`AskResult.to_json` is what ask and serve show; `AskResult.to_row` is the same verdict as the fields of a
prediction row (status resolved / refused / invalid, the final query or why there is none), which `pgmr eval`
scores and the experiments write.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from pgmr.query import IntermediateQueryError
from pgmr.resolver import PlaceholderEvidence
from pgmr.resolver.kg_choice import Probe

if TYPE_CHECKING:
    from pgmr.resolver import Refusal, Resolution

# answered: executed, with a result (ASK: either value); empty: executed, no result; resolved: every ID found
# but no store to run it on; refused: a placeholder lacks support in the memory; invalid: the model output is
# not a (read-only) query; error: the store failed (timeout, unreachable).
STATUSES: tuple[str, ...] = ("answered", "empty", "resolved", "refused", "invalid", "error")


@dataclass(frozen=True)
class CandidateView:
    id: str
    label: str
    description: str | None
    score: float
    similarity: float


@dataclass(frozen=True)
class PlaceholderView:
    """One placeholder: what the generator wrote, the memory's candidates, and the ID chosen (None: refused)."""

    name: str
    kind: str
    label: str
    description: str
    threshold: float
    supported: bool
    candidates: tuple[CandidateView, ...]
    chosen: str | None
    # The estimated probability that the memory holds what the placeholder names (None: no support model for the kind), the
    # refusal threshold it is compared with, and why it was rejected ("" when it was not).
    confidence: float | None = None
    min_confidence: float = 0.0
    rejected: str = ""

    @classmethod
    def of(cls, evidence: PlaceholderEvidence, chosen: str | None) -> PlaceholderView:
        p = evidence.placeholder
        return cls(
            name=p.name,
            kind=p.kind,
            label=p.label,
            description=p.description,
            threshold=evidence.threshold,
            supported=evidence.supported,
            candidates=tuple(
                CandidateView(c.id, c.label, c.description, c.score, c.similarity)
                for c in evidence.candidates
            ),
            chosen=chosen,
            confidence=evidence.confidence,
            min_confidence=evidence.min_confidence,
            rejected="" if evidence.supported else evidence.why_unsupported(),
        )

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["candidates"] = [asdict(c) for c in self.candidates]
        return data

    def best(self) -> dict[str, Any] | None:
        """The top candidate as a prediction row records it (the whole evidence would dwarf the row)."""
        if not self.candidates:
            return None
        top = self.candidates[0]
        return {"id": top.id, "label": top.label, "similarity": top.similarity}


@dataclass(frozen=True)
class Answer:
    """One bound value of a result row. `id`/`label`/`description` for Wikidata IRIs the catalog knows."""

    value: str
    kind: str
    variable: str | None = None
    id: str | None = None
    label: str | None = None
    description: str | None = None
    datatype: str | None = None
    language: str | None = None


@dataclass(frozen=True)
class AskError:
    """Why a result has no answer: `code` is stable (a parser error code, read_only, timeout, unavailable...)."""

    code: str
    message: str
    line: int | None = None
    column: int | None = None

    @classmethod
    def of(cls, exc: IntermediateQueryError) -> AskError:
        return cls(exc.code, exc.message, exc.line, exc.column)


@dataclass(frozen=True)
class DraftScore:
    """One draft of a question as the reranker saw it."""

    source: str
    status: str  # resolved, refused or invalid
    score: float
    chosen: bool
    signals: Mapping[str, float] = field(default_factory=dict, compare=False)
    # The draft's final query when it resolved (what the question would get had this draft been chosen).
    sparql: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "status": self.status,
            "score": round(self.score, 6),
            "chosen": self.chosen,
            "signals": {k: round(v, 6) for k, v in self.signals.items()},
            "sparql": self.sparql,
        }


@dataclass(frozen=True)
class Pick:
    """One placeholder's ID in a candidate query (pgmr.pipeline.alternatives): the memory's candidate, its
    resolver score and prior, and the probability that it is what the placeholder names
    (pgmr.resolver.pick_support: for the resolver's best candidate, its confidence)."""

    name: str
    kind: str
    id: str
    label: str
    description: str | None
    score: float
    similarity: float
    prior: float
    confidence: float
    supported: bool


@dataclass(frozen=True)
class QueryCandidate:
    """One complete final query among the several a question may get (`pgmr ask --candidates N`): its IDs
    with their support, and the overall `support` its rank comes from (pgmr.pipeline.alternatives)."""

    sparql: str
    mapping: tuple[tuple[str, str], ...]
    picks: tuple[Pick, ...]
    # The product of the picks' confidences; None for a query without placeholders (direct and RAG modes).
    support: float | None
    # Every pick passes the refusal's gates, as the resolver's own pick must.
    supported: bool
    # The pipeline's answer (the result's `sparql`), which comes first whatever its support.
    answer: bool = False
    # The ensemble member whose draft it fills (None with one generator).
    source: str | None = None
    # How many result values the KG check found for it, when it ran this query (None: it did not).
    results: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "sparql": self.sparql,
            "mapping": dict(self.mapping),
            "support": self.support,
            "supported": self.supported,
            "answer": self.answer,
            "source": self.source,
            "results": self.results,
            "picks": [asdict(p) for p in self.picks],
        }


@dataclass(frozen=True)
class AskResult:
    question: str | None
    status: str
    mode: str
    intermediate: str | None
    placeholders: tuple[PlaceholderView, ...] = ()
    sparql: str | None = None
    mapping: tuple[tuple[str, str], ...] = ()
    answers: tuple[Answer, ...] = ()
    answer_count: int = 0
    boolean: bool | None = None
    reason: str | None = None
    unsupported: tuple[str, ...] = ()
    error: AskError | None = None
    # How the mapping was chosen: "top" (the resolver's best), "kg" (a lower-ranked combination with results),
    # "fallback" (no probe had a result: the top one), "" when nothing was resolved.
    choice: str = ""
    probes: tuple[Probe, ...] = ()
    timings: tuple[tuple[str, float], ...] = ()
    # Labels and literals snapped to the question before resolution: (placeholder or "literal", generated,
    # grounded).
    grounded: tuple[tuple[str, str, str], ...] = ()
    # What the resolver changed in the query besides filling IDs (a triple turned round by the training facts,
    # pgmr.resolver.facts); `intermediate` stays as generated.
    notes: tuple[str, ...] = ()
    # The resolver's own verdict, with every candidate's signals (None when nothing was resolved): for those
    # who study resolution (the refusal experiment, `pgmr generate --resolve`'s evidence). Not in `to_json`.
    verdict: Resolution | Refusal | None = field(default=None, repr=False, compare=False)
    # With several drafts per question (an ensemble generator), how the reranker scored each; the chosen one's
    # text is `intermediate`.
    drafts: tuple[DraftScore, ...] = ()
    # The best complete queries with their support, the answer first (`Pipeline.ask(..., candidates=N)`, N > 1;
    # empty otherwise, and then absent from `to_json`, which stays what it was without them).
    candidates: tuple[QueryCandidate, ...] = ()

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown status {self.status!r}")

    def to_json(self) -> dict[str, Any]:
        return {
            "question": self.question,
            "status": self.status,
            "mode": self.mode,
            "intermediate": self.intermediate,
            "placeholders": [p.to_json() for p in self.placeholders],
            "sparql": self.sparql,
            "mapping": dict(self.mapping),
            "answers": [asdict(a) for a in self.answers],
            "answer_count": self.answer_count,
            "boolean": self.boolean,
            "reason": self.reason,
            "unsupported": list(self.unsupported),
            "error": asdict(self.error) if self.error else None,
            "choice": self.choice,
            "probes": [p.to_json() for p in self.probes],
            "timings": {stage: round(seconds, 6) for stage, seconds in self.timings},
            "grounded": self.grounded_json(),
            "notes": list(self.notes),
            "drafts": [d.to_json() for d in self.drafts],
            **({"candidates": [c.to_json() for c in self.candidates]} if self.candidates else {}),
        }

    @property
    def row_status(self) -> str:
        """The verdict of a prediction row: resolved (a final query), refused or invalid; what the store made
        of the query (answered, empty, error) is not part of it."""
        return self.status if self.status in ("refused", "invalid") else "resolved"

    def to_row(self, *, evidence: bool = False) -> dict[str, Any]:
        """The fields of a prediction row (`pgmr eval` reads status, sparql, reason and error): per
        placeholder its best candidate, or with `evidence` the resolver's whole evidence (`pgmr generate
        --resolve`, `pgmr resolve`)."""
        row = self._row(evidence)
        if self.drafts:
            row["drafts"] = [d.to_json() for d in self.drafts]
        return row

    def _row(self, evidence: bool) -> dict[str, Any]:
        status = self.row_status
        if status == "invalid" or self.sparql is None and status == "resolved":
            error = self.error or AskError("invalid", self.reason or "no query")
            return {"status": "invalid", "error": asdict(error)}
        if evidence and self.verdict is not None:
            data = self.verdict.to_json()
            if status == "resolved":  # the KG may have chosen another combination than the resolver's top
                data.update(sparql=self.sparql, mapping=dict(self.mapping))
            return data
        best = {p.name: p.best() for p in self.placeholders}
        if status == "resolved":
            return {"status": status, "sparql": self.sparql, "mapping": dict(self.mapping), "best": best}
        return {"status": status, "reason": self.reason, "unsupported": list(self.unsupported), "best": best}

    def grounded_json(self) -> list[dict[str, str]]:
        return [{"placeholder": p, "generated": g, "grounded": t} for p, g, t in self.grounded]


__all__ = [
    "STATUSES",
    "Answer",
    "AskError",
    "AskResult",
    "CandidateView",
    "DraftScore",
    "Pick",
    "PlaceholderView",
    "Probe",
    "QueryCandidate",
]
