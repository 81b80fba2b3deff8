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
    thresholds compare with; `score` adds the prominence prior (`prior`) and decides the ranking.
    """

    id: str
    label: str
    description: str | None
    similarity: float
    score: float
    label_similarity: float = 0.0
    lexical: float = 0.0
    description_similarity: float | None = None
    prior: float = 0.0


@dataclass(frozen=True)
class Support:
    """One placeholder's support: the estimated probability that its best candidate is right, and the
    signals it was computed from (pgmr.resolver.support computes it; it lives here, with the evidence that
    carries it, so that the two modules do not import each other)."""

    confidence: float
    features: tuple[tuple[str, float], ...]

    def to_json(self) -> dict[str, Any]:
        return {"confidence": self.confidence, "features": dict(self.features)}


@dataclass(frozen=True)
class PlaceholderEvidence:
    """The ranked candidates of one placeholder and the verdict on its best one.

    `threshold` gates the best similarity; `support` (pgmr.resolver.support) is the estimated probability
    that the memory holds what the placeholder names, with the signals behind it, and `min_confidence` gates it. Supported:
    both gates passed.
    """

    placeholder: Placeholder
    query_text: str
    candidates: tuple[Candidate, ...]
    threshold: float
    support: Support | None = None
    min_confidence: float = 0.0

    @property
    def best(self) -> Candidate | None:
        return self.candidates[0] if self.candidates else None

    @property
    def confidence(self) -> float | None:
        return None if self.support is None else self.support.confidence

    @property
    def similar_enough(self) -> bool:
        return self.best is not None and self.best.similarity >= self.threshold

    @property
    def confident_enough(self) -> bool:
        return self.support is None or self.support.confidence >= self.min_confidence

    @property
    def supported(self) -> bool:
        return self.similar_enough and self.confident_enough

    def why_unsupported(self) -> str:
        """Why the best candidate was rejected, in words ("" when it was not)."""
        best = self.best
        if best is None:
            return "the memory has no candidate"
        reasons = []
        if not self.similar_enough:
            reasons.append(f"similarity {best.similarity:.3f} < threshold {self.threshold:.3f}")
        if not self.confident_enough and self.support is not None:
            signals = dict(self.support.features)
            why = f"confidence {self.support.confidence:.3f} < threshold {self.min_confidence:.3f}"
            weak = []
            if signals.get("named_absent", 0.0) >= 1.0:
                weak.append("the label names something the memory has no label or alias for")
            elif signals.get("unknown_span", 0.0) >= 1.0:
                weak.append("the question names it, but the memory has no label or alias for that name")
            if signals.get("exact", 1.0) < 1.0:
                weak.append(f"the label is no label or alias of it (edit similarity {best.lexical:.2f})")
            if signals.get("margin", 1.0) < 0.02:
                weak.append(f"the runner-up is as close (margin {signals['margin']:.3f})")
            if signals.get("rivals", 0.0) >= 1.0:
                weak.append(f"{signals['rivals']:.0f} other candidate(s) share the label")
            reasons.append(why + (": " + ", ".join(weak) if weak else ""))
        return "; ".join(reasons)

    def to_json(self) -> dict[str, Any]:
        return {
            "placeholder": self.placeholder.name,
            "kind": self.placeholder.kind,
            "label": self.placeholder.label,
            "description": self.placeholder.description,
            "query_text": self.query_text,
            "threshold": self.threshold,
            "min_confidence": self.min_confidence,
            "confidence": self.confidence,
            "signals": None if self.support is None else dict(self.support.features),
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
    # What the resolver changed in the generated query besides filling IDs (a triple turned round by the
    # training facts, pgmr.resolver.facts); `query` is the query as changed.
    notes: tuple[str, ...] = ()
    # A memory of another graph's IRIs: the graph's prefixes, which every query filled from this resolution
    # is written with (`fill(..., namespaces=...)`); empty for Wikidata.
    prefixes: tuple[tuple[str, str], ...] = ()

    status = "resolved"

    def mapping_dict(self) -> dict[str, str]:
        return dict(self.mapping)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "sparql": self.sparql,
            "mapping": dict(self.mapping),
            "evidence": [e.to_json() for e in self.evidence],
            **({"notes": list(self.notes)} if self.notes else {}),
        }


@dataclass(frozen=True)
class Refusal:
    """At least one placeholder lacks support in the memory: the system says so instead of guessing."""

    query: IntermediateQuery
    unsupported: tuple[str, ...]
    evidence: tuple[PlaceholderEvidence, ...]
    prefixes: tuple[tuple[str, str], ...] = ()  # as in Resolution

    status = "refused"

    @property
    def reason(self) -> str:
        parts = []
        for ev in self.evidence:
            if ev.placeholder.name not in self.unsupported:
                continue
            best = ev.best
            got = f"best {best.id} ({best.label}) rejected: " if best else ""
            parts.append(f"{ev.placeholder.name} '{ev.placeholder.label}': {got}{ev.why_unsupported()}")
        return "no support in memory for " + "; ".join(parts)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "unsupported": list(self.unsupported),
            "evidence": [e.to_json() for e in self.evidence],
        }
