"""Post-generation retrieval: every placeholder of an intermediate query -> a Wikidata ID from the memory,
or a refusal naming the placeholders the memory does not support."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgmr.conversion import fill
from pgmr.kg.ids import Kind, id_number
from pgmr.memory import Memory, MemoryDictionary, memory_text
from pgmr.query.lexer import tokenize
from pgmr.query.model import IntermediateQuery, Placeholder
from pgmr.query.sparql import check_query
from pgmr.resolver.model import Candidate, PlaceholderEvidence, Refusal, Resolution
from pgmr.resolver.ranking import Prior, normalize_label


class ResolutionError(RuntimeError):
    """The resolver produced a query it must not return (a bug, never bad input): it refuses to emit it."""


@dataclass(frozen=True)
class ResolverConfig:
    k: int = 5
    entity_threshold: float = 0.0
    relation_threshold: float = 0.0
    # Rows retrieved per placeholder before re-ranking; the top `k` are kept as evidence.
    search_k: int = 50
    exact_weight: float = 0.05
    prior_weight: float = 0.02
    batch_size: int = 128

    def __post_init__(self) -> None:
        if self.k < 1 or self.search_k < self.k:
            raise ValueError("need 1 <= k <= search_k")
        for name in ("entity_threshold", "relation_threshold"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a cosine in [-1, 1], got {value}")

    def threshold(self, kind: Kind) -> float:
        return self.entity_threshold if kind == "entity" else self.relation_threshold


def placeholder_text(placeholder: Placeholder) -> str:
    """The memory is searched with the same text template it was built with."""
    return memory_text(placeholder.label, placeholder.description or None)


class _Lexicon:
    """Normalized label/alias -> IDs of one dictionary, for exact-match candidates and the bonus."""

    def __init__(self, dictionary: MemoryDictionary) -> None:
        self.surfaces: dict[str, set[str]] = {}
        self.by_id: dict[str, set[str]] = {}
        for row in dictionary.rows:
            key = normalize_label(row.surface)
            self.surfaces.setdefault(key, set()).add(row.id)
            self.by_id.setdefault(row.id, set()).add(key)

    def ids(self, label: str, limit: int) -> list[str]:
        found = self.surfaces.get(normalize_label(label), set())
        return sorted(found, key=lambda i: (id_number(i), i))[:limit]

    def matches(self, wikidata_id: str, label: str) -> bool:
        return normalize_label(label) in self.by_id.get(wikidata_id, ())


class Resolver:
    def __init__(
        self, memory: Memory, config: ResolverConfig | None = None, prior: Prior | None = None
    ) -> None:
        self.memory = memory
        self.config = config or ResolverConfig()
        self.prior = prior or Prior(memory.prior_counts)
        self._lexicons: dict[Kind, _Lexicon] = {}

    def lexicon(self, kind: Kind) -> _Lexicon:
        if kind not in self._lexicons:
            self._lexicons[kind] = _Lexicon(self.memory.dictionary(kind))
        return self._lexicons[kind]

    def resolve(self, query: IntermediateQuery) -> Resolution | Refusal:
        return self.resolve_many([query])[0]

    def resolve_many(self, queries: Sequence[IntermediateQuery]) -> list[Resolution | Refusal]:
        """Batched: all placeholders of one kind across the queries are embedded and searched together."""
        evidence: dict[tuple[int, str], PlaceholderEvidence] = {}
        for kind in ("entity", "relation"):
            slots = [(i, p) for i, q in enumerate(queries) for p in q.placeholders if p.kind == kind]
            for (i, p), ev in zip(slots, self.candidates([p for _, p in slots], kind), strict=True):
                evidence[(i, p.name)] = ev
        return [
            self._decide(q, [evidence[(i, p.name)] for p in q.placeholders]) for i, q in enumerate(queries)
        ]

    def candidates(self, placeholders: Sequence[Placeholder], kind: Kind) -> list[PlaceholderEvidence]:
        """Ranked candidates (the top k) for placeholders of one kind."""
        if not placeholders:
            return []
        dictionary = self.memory.dictionary(kind)
        texts = [placeholder_text(p) for p in placeholders]
        vectors = self.memory.encoder.encode(texts, batch_size=self.config.batch_size)
        hits = dictionary.search_vectors(vectors, k=self.config.search_k)
        return [
            self._rank(p, text, vector, found, dictionary)
            for p, text, vector, found in zip(placeholders, texts, vectors, hits, strict=True)
        ]

    def _rank(self, placeholder, text, vector, hits, dictionary) -> PlaceholderEvidence:  # type: ignore[no-untyped-def]
        cfg = self.config
        lexicon = self.lexicon(placeholder.kind)
        similarity = {h.id: h.score for h in hits}
        info = {h.id: (h.label, h.description) for h in hits}
        label_only = not placeholder.description
        if label_only:
            # Exact label/alias matches are candidates even when the embedding search ranked them low.
            for wid in lexicon.ids(placeholder.label, cfg.search_k):
                if wid not in info:
                    row = dictionary.get(wid)
                    assert row is not None
                    info[wid] = (row.label, row.description)
                    similarity[wid] = float("-inf")
        ranked: list[Candidate] = []
        for wid, (label, description) in info.items():
            exact = lexicon.matches(wid, placeholder.label)
            sim = 1.0 if (label_only and exact) else similarity[wid]
            score = sim + cfg.exact_weight * exact + cfg.prior_weight * self.prior(wid)
            ranked.append(Candidate(wid, label, description, round(sim, 6), round(score, 6), exact))
        ranked.sort(key=lambda c: (-c.score, id_number(c.id), c.id))
        return PlaceholderEvidence(placeholder, text, tuple(ranked[: cfg.k]), cfg.threshold(placeholder.kind))

    def _decide(self, query: IntermediateQuery, evidence: list[PlaceholderEvidence]) -> Resolution | Refusal:
        unsupported = tuple(ev.placeholder.name for ev in evidence if not ev.supported)
        if unsupported:
            return Refusal(query, unsupported, tuple(evidence))
        mapping = {ev.placeholder.name: ev.best.id for ev in evidence if ev.best is not None}
        sparql = fill(query, mapping)
        self._check_output(sparql, mapping)
        return Resolution(query, sparql, tuple(mapping.items()), tuple(evidence))

    def _check_output(self, sparql: str, mapping: dict[str, str]) -> None:
        for name, wid in mapping.items():
            if wid not in self.memory:
                raise ResolutionError(f"{name} resolved to {wid}, which is not in the memory")
        for tok in tokenize(sparql):
            if tok.kind == "pname" and (tok.local.startswith("entity") or tok.local.startswith("relation")):
                raise ResolutionError(f"placeholder {tok.text} left in the resolved query")
        check_query(sparql)


def resolved_ids(sparql: str) -> set[str]:
    """Every Wikidata ID in a query (prefixed or full IRI), for checks that outputs only use memory IDs."""
    from pgmr.conversion import to_skeleton

    return set(to_skeleton(sparql)[1].values())


__all__ = ["Resolver", "ResolverConfig", "ResolutionError", "placeholder_text", "resolved_ids"]
