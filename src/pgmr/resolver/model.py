"""What resolution produces: a filled query or a refusal, each with its evidence."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from pgmr.query.model import IntermediateQuery, Placeholder


@dataclass(frozen=True)
class Candidate:
    """One memory entry proposed for a placeholder, with the parts of its support (see ranking.py).

    `label_similarity`: cosine of the placeholder label with the entry's rows; `lexical`: edit similarity of
    the label with the entry's label/aliases; `description_similarity`: cosine of "label, description" with the
    entry's rows (None when the placeholder has no description). `similarity` combines them and is what
    thresholds compare with; `score` adds the prominence prior and decides the ranking.
    """

    id: str
    label: str
    description: str | None
    similarity: float
    score: float
    label_similarity: float = 0.0
    lexical: float = 0.0
    description_similarity: float | None = None


@dataclass(frozen=True)
class PlaceholderEvidence:
    placeholder: Placeholder
    query_text: str
    candidates: tuple[Candidate, ...]
    threshold: float

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def supported(self) -> bool:
        return self.best is not None and self.best.similarity >= self.threshold

    def to_json(self) -> dict[str, Any]:
        return {
            "placeholder": self.placeholder.name,
            "kind": self.placeholder.kind,
            "label": self.placeholder.label,
            "description": self.placeholder.description,
            "query_text": self.query_text,
            "threshold": self.threshold,
            "supported": self.supported,
            "candidates": [asdict(c) for c in self.candidates],
        }


@dataclass(frozen=True)
class Resolution:
    """Every placeholder resolved: `sparql` is executable and every ID in it is in the memory."""

    query: IntermediateQuery
    sparql: str
    mapping: tuple[tuple[str, str], ...]
    evidence: tuple[PlaceholderEvidence, ...]

    status = "resolved"

    def mapping_dict(self) -> dict[str, str]:
        return dict(self.mapping)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "sparql": self.sparql,
            "mapping": dict(self.mapping),
            "evidence": [e.to_json() for e in self.evidence],
        }


@dataclass(frozen=True)
class Refusal:
    """At least one placeholder lacks support in the memory: the system says so instead of guessing."""

    query: IntermediateQuery
    unsupported: tuple[str, ...]
    evidence: tuple[PlaceholderEvidence, ...]

    status = "refused"

    @property
    def reason(self) -> str:
        parts = []
        for ev in self.evidence:
            if ev.placeholder.name not in self.unsupported:
                continue
            best = ev.best
            got = f"best {best.id} ({best.label}) at {best.similarity:.3f}" if best else "no candidate"
            parts.append(
                f"{ev.placeholder.name} '{ev.placeholder.label}': {got} < threshold {ev.threshold:.3f}"
            )
        return "no support in memory for " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "unsupported": list(self.unsupported),
            "evidence": [e.to_json() for e in self.evidence],
        }
