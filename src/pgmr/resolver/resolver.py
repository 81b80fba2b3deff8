"""Post-generation retrieval: every placeholder of an intermediate query -> a Wikidata ID from the memory,
or a refusal naming the placeholders the memory does not support."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Protocol

import numpy as np
from rapidfuzz import fuzz, process

from pgmr.conversion import fill, to_skeleton
from pgmr.conversion.graph import raw_graph_iris
from pgmr.kg.ids import ID_PREFIXES, Kind, id_number_order, id_order
from pgmr.kg.iris import namespace_of
from pgmr.memory import Memory, MemoryDictionary, MemoryHit, memory_text
from pgmr.memory.lexical import best_edit_similarities
from pgmr.query.errors import RawIdentifierError
from pgmr.query.gate import check_query
from pgmr.query.lexer import tokenize
from pgmr.query.model import IntermediateQuery, Placeholder, placeholder_kind
from pgmr.resolver.facts import TrainingFacts, shipped_facts
from pgmr.resolver.model import Candidate, PlaceholderEvidence, Refusal, Resolution
from pgmr.resolver.ranking import Prior, normalize_label, prior_for
from pgmr.resolver.support import Calibration, question_keys, shipped_calibration


class ResolutionError(RuntimeError):
    """The resolver produced a query it must not return (a bug, never bad input): it refuses to emit it."""


@dataclass(frozen=True)
class ResolverConfig:
    k: int = 5
    entity_threshold: float = 0.0
    relation_threshold: float = 0.0
    # Rows retrieved per placeholder before re-ranking; the top `k` are kept as evidence.
    search_k: int = 50
    prior_weight: float = 0.02
    # Bonus when placeholder and candidate agree on having a description. The training transformation writes an
    # empty description exactly for IDs without one, so a generator trained on it does the same; it applies only
    # to queries that give a description somewhere (their writer describes), never to label-only writers.
    agreement_weight: float = 0.03
    # Bonus when the placeholder's label is the candidate's own label, not just one of its aliases. The training
    # transformation writes each ID's label from the memory, so a generator trained on it names "country" for
    # Q6256 (label "country") and not for Q3624078 ("sovereign state", alias "country"); both match exactly.
    # 0.03 is above the prior's whole range (0.02), so an own label beats any alias-only tie.
    canonical_weight: float = 0.03
    # When no label/alias matches exactly, the `fuzzy_k` closest ones (edit similarity >= fuzzy_cutoff) join.
    fuzzy_k: int = 10
    fuzzy_cutoff: float = 0.8
    batch_size: int = 128
    # Refuse a placeholder whose support (pgmr.resolver.support: the estimated probability that the memory
    # holds what it names) is below this; 0 never refuses on it. The resolver's own default stays 0 (the library ranks, the caller
    # decides); pgmr ask/serve/demo and the experiments pass the shipped threshold.
    min_confidence: float = 0.0
    # Turn round a triple that the training queries' role facts show backwards (pgmr.resolver.facts).
    orient: bool = True
    # Judge per kind whether a query describes (agreement_weight): the structured members describe relations
    # but name entities by question spans, whose empty descriptions say nothing (docs/research-log.md).
    describing_per_kind: bool = False

    def __post_init__(self) -> None:
        if self.k < 1 or self.search_k < self.k:
            raise ValueError("need 1 <= k <= search_k")
        for name in ("entity_threshold", "relation_threshold"):
            value = getattr(self, name)
            if not -1.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a similarity in [-1, 1], got {value}")
        if not 0.0 <= self.fuzzy_cutoff <= 1.0:
            raise ValueError("fuzzy_cutoff must be in [0, 1]")
        if not 0.0 <= self.min_confidence <= 1.0:
            raise ValueError(f"min_confidence must be a probability in [0, 1], got {self.min_confidence}")
        if self.prior_weight < 0 or self.fuzzy_k < 0 or self.canonical_weight < 0:
            raise ValueError("prior_weight, canonical_weight and fuzzy_k must be >= 0")

    def threshold(self, kind: Kind) -> float:
        return self.entity_threshold if kind == "entity" else self.relation_threshold


def placeholder_text(placeholder: Placeholder) -> str:
    """The memory is searched with the same text template it was built with."""
    return memory_text(placeholder.label, placeholder.description or None)


class Lexicon(Protocol):
    """Label and alias lookups by normalized key (`normalize_label`): the in-memory `_Lexicon` below, or a
    memory's on-disk tier (pgmr.memory.lexical.LexicalIndex)."""

    def knows(self, key: str) -> bool: ...

    def surfaces_of(self, wikidata_id: str) -> set[str]: ...

    def exact(self, key: str, limit: int) -> list[str]: ...

    def fuzzy(self, key: str, limit: int, cutoff: float) -> list[str]: ...

    def similarities(self, wikidata_ids: Sequence[str], key: str) -> list[float]: ...


class _Lexicon:
    """Normalized labels and aliases of one dictionary: exact and fuzzy lookups, per-ID edit similarity."""

    def __init__(self, dictionary: MemoryDictionary) -> None:
        self.surfaces: dict[str, set[str]] = {}
        self.by_id: dict[str, set[str]] = {}
        for row in dictionary.rows:
            key = normalize_label(row.surface or row.label)
            self.surfaces.setdefault(key, set()).add(row.id)
            self.by_id.setdefault(row.id, set()).add(key)
        self.choices = list(self.surfaces)

    def knows(self, key: str) -> bool:
        return key in self.surfaces

    def surfaces_of(self, wikidata_id: str) -> set[str]:
        return self.by_id.get(wikidata_id, set())

    def exact(self, key: str, limit: int) -> list[str]:
        found = self.surfaces.get(key, set())
        return sorted(found, key=id_order)[:limit]

    def fuzzy(self, key: str, limit: int, cutoff: float) -> list[str]:
        if not limit:
            return []
        hits = process.extract(key, self.choices, scorer=fuzz.ratio, limit=limit, score_cutoff=cutoff * 100)
        found = [wid for choice, _, _ in hits for wid in sorted(self.surfaces[choice], key=id_number_order)]
        return found[:limit]

    def similarities(self, wikidata_ids: Sequence[str], key: str) -> list[float]:
        """Per ID, the best edit similarity (fuzz.ratio / 100) of `key` with its labels and aliases (0 for an ID
        without any), in one rapidfuzz call over all their surfaces."""
        return best_edit_similarities([self.by_id.get(wid, ()) for wid in wikidata_ids], key)


def _search_texts(placeholders: Sequence[Placeholder]) -> tuple[list[str], list[str]]:
    """What `Resolver.candidates` embeds and searches for these placeholders, each distinct text once: the labels,
    and label plus description where there is a description."""
    labels = list(dict.fromkeys(p.label for p in placeholders))
    described = list(dict.fromkeys(placeholder_text(p) for p in placeholders if p.description))
    return labels, described


class Resolver:
    def __init__(
        self,
        memory: Memory,
        config: ResolverConfig | None = None,
        prior: Prior | None = None,
        calibration: Calibration | None = None,
        facts: TrainingFacts | None = None,
    ) -> None:
        """`facts`: the role facts that orient triples (default: those that ship, from the shipped generator's
        training data); unused when `config.orient` is off."""
        self.memory = memory
        self.config = config or ResolverConfig()
        self.prior = prior or prior_for(memory.prior_source, memory.prior_counts, memory.manifest.prior)
        self.calibration = calibration or shipped_calibration()
        # `is None`, not `or`: an empty TrainingFacts is falsy and must not fall back to the shipped facts.
        # The shipped facts are Wikidata's: a memory of another graph has none unless given its own.
        default_facts = shipped_facts() if memory.graph is None else None
        self.facts = (facts if facts is not None else default_facts) if self.config.orient else None
        # Another graph's prefixes, for writing its IRIs into final queries (empty for Wikidata).
        self.prefixes: tuple[tuple[str, str], ...] = memory.graph.prefixes if memory.graph else ()
        self._graph_namespaces: frozenset[str] | None = None
        self._lexicons: dict[Kind, Lexicon] = {}

    def lexicon(self, kind: Kind) -> Lexicon:
        """The memory's on-disk lexical tier when it has one (pgmr.memory.lexical: same lookups, bounded
        memory), else the labels and aliases of its rows held here."""
        if kind not in self._lexicons:
            on_disk = self.memory.lexical.get(kind)
            self._lexicons[kind] = on_disk if on_disk is not None else _Lexicon(self.memory.dictionary(kind))
        return self._lexicons[kind]

    def knows(self, kind: Kind, text: str) -> bool:
        """Whether `text` is, up to case, accents and spacing, a label or alias of a `kind` of the memory (what
        label grounding asks: pgmr.resolver.grounding.Known)."""
        return self.lexicon(kind).knows(normalize_label(text))

    def resolve(self, query: IntermediateQuery, question: str | None = None) -> Resolution | Refusal:
        return self.resolve_many([query], [question])[0]

    def resolve_many(
        self, queries: Sequence[IntermediateQuery], questions: Sequence[str | None] | None = None
    ) -> list[Resolution | Refusal]:
        """Batched: all placeholders of one kind across the queries are embedded and searched together. With
        `questions` (one per query, None where there is none), support also weighs whether each label is a
        span of its question that the memory does not know (pgmr.resolver.support)."""
        if questions is not None and len(questions) != len(queries):
            raise ValueError(f"{len(queries)} queries but {len(questions)} questions")
        for query in queries if self.memory.graph is not None else ():
            self._check_graph_skeleton(query)
        evidence: dict[tuple[int, str], PlaceholderEvidence] = {}
        per_kind = self.config.describing_per_kind
        describing = [
            {k: any(p.description for p in q.placeholders if p.kind == k or not per_kind) for k in ("entity", "relation")}
            for q in queries
        ]
        keys = [question_keys(q) for q in questions] if questions is not None else None
        kinds: tuple[Kind, ...] = ("entity", "relation")
        slots_of = {
            kind: [(i, p) for i, q in enumerate(queries) for p in q.placeholders if p.kind == kind]
            for kind in kinds
        }
        # Both kinds' texts in one encoder call: per call the encoder costs more than per text.
        texts = list(
            dict.fromkeys(
                t for kind in kinds for part in _search_texts([p for _, p in slots_of[kind]]) for t in part
            )
        )
        vectors = self.memory.encoder.encode(texts, batch_size=self.config.batch_size) if texts else None
        encoded = dict(zip(texts, vectors, strict=True)) if vectors is not None else {}
        for kind in kinds:
            slots = slots_of[kind]
            describes = [describing[i][kind] for i, _ in slots]
            spans = [keys[i] for i, _ in slots] if keys is not None else None
            found = self.candidates([p for _, p in slots], kind, describes, spans, encoded=encoded)
            for (i, p), ev in zip(slots, found, strict=True):
                evidence[(i, p.name)] = ev
        return [
            self._decide(q, [evidence[(i, p.name)] for p in q.placeholders]) for i, q in enumerate(queries)
        ]

    def candidates(
        self,
        placeholders: Sequence[Placeholder],
        kind: Kind,
        describing: Sequence[bool] | None = None,
        questions: Sequence[frozenset[str]] | None = None,
        *,
        encoded: Mapping[str, np.ndarray] | None = None,
    ) -> list[PlaceholderEvidence]:
        """Ranked candidates (the top k) for placeholders of one kind: one search with the label alone and, for
        placeholders with a description, one with label and description. `questions`: each placeholder's
        question spans (`pgmr.resolver.support.question_keys`), for its support. `encoded`: vectors of these
        texts already embedded (text -> vector), where the caller embedded several kinds at once."""
        if not placeholders:
            return []
        dictionary = self.memory.dictionary(kind)
        labels = [p.label for p in placeholders]
        texts = [placeholder_text(p) for p in placeholders]
        described = [i for i, p in enumerate(placeholders) if p.description]
        # A batch repeats itself (the same relation across questions, an ensemble's drafts agreeing): each
        # distinct text is embedded and searched once.
        unique_labels, unique_texts = _search_texts(placeholders)
        wanted = unique_labels + unique_texts
        if encoded is not None and all(t in encoded for t in wanted):
            vectors = np.stack([encoded[t] for t in wanted])
        else:
            vectors = self.memory.encoder.encode(wanted, batch_size=self.config.batch_size)
        label_at = {text: k for k, text in enumerate(unique_labels)}
        text_at = {text: k for k, text in enumerate(unique_texts)}
        # One search for both kinds of text: a flat index is scanned once per call, whatever the number of
        # queries (at batch 1 the scan is most of the resolver's time).
        hits = dictionary.search_vectors(vectors, k=self.config.search_k)
        unique_label_hits = hits[: len(unique_labels)]
        label_vectors = [vectors[label_at[label]] for label in labels]
        label_hits = [unique_label_hits[label_at[label]] for label in labels]
        full_hits: list[list[MemoryHit] | None] = [None] * len(placeholders)
        full_vector: list[np.ndarray | None] = [None] * len(placeholders)
        if described:
            full_vectors = vectors[len(unique_labels) :]
            unique_full_hits = hits[len(unique_labels) :]
            for i in described:
                k = text_at[texts[i]]
                full_hits[i], full_vector[i] = unique_full_hits[k], full_vectors[k]
        return [
            self._rank(
                p,
                texts[i],
                dictionary,
                label_vectors[i],
                label_hits[i],
                full_vector[i],
                full_hits[i],
                describing[i] if describing is not None else bool(p.description),
                questions[i] if questions is not None else frozenset(),
            )
            for i, p in enumerate(placeholders)
        ]

    def _rank(
        self,
        placeholder: Placeholder,
        text: str,
        dictionary: MemoryDictionary,
        label_vector: np.ndarray,
        label_hits: list[MemoryHit],
        full_vector: np.ndarray | None,
        full_hits: list[MemoryHit] | None,
        describing: bool,
        question: frozenset[str] = frozenset(),
    ) -> PlaceholderEvidence:
        cfg = self.config
        lexicon = self.lexicon(placeholder.kind)
        key = normalize_label(placeholder.label)
        # Label matches join the dense hits: exact ones always, the closest fuzzy ones when none is exact.
        lexical_ids = lexicon.exact(key, cfg.search_k) or lexicon.fuzzy(key, cfg.fuzzy_k, cfg.fuzzy_cutoff)
        label_dense = {h.id: h.score for h in label_hits}
        full_dense = {h.id: h.score for h in full_hits or ()}
        ids = list(dict.fromkeys([*label_dense, *full_dense, *lexical_ids]))
        label_dense.update(dictionary.similarities(label_vector, [i for i in ids if i not in label_dense]))
        if full_vector is not None:
            full_dense.update(dictionary.similarities(full_vector, [i for i in ids if i not in full_dense]))
        lexical = lexicon.similarities(ids, key)
        # Scores for every candidate, Candidate objects only for the kept ones (a placeholder has ~100).
        scored: list[tuple[float, float, int]] = []
        for n, wid in enumerate(ids):
            row = dictionary.get(wid)
            assert row is not None
            label_sim = max(label_dense[wid], lexical[n])
            similarity = label_sim if full_vector is None else (label_sim + full_dense[wid]) / 2
            agree = describing and bool(placeholder.description) == bool(row.description)
            canonical = bool(cfg.canonical_weight) and normalize_label(row.label) == key
            score = (
                similarity
                + cfg.prior_weight * self.prior(wid)
                + cfg.agreement_weight * agree
                + cfg.canonical_weight * canonical
            )
            scored.append((round(score, 6), similarity, n))
        scored.sort(key=lambda item: (-item[0], *id_order(ids[item[2]])))
        ranked: list[Candidate] = []
        for score, similarity, n in scored[: cfg.k]:
            wid = ids[n]
            row = dictionary.get(wid)
            assert row is not None
            ranked.append(
                Candidate(
                    wid,
                    row.label,
                    row.description,
                    similarity=round(similarity, 6),
                    score=score,
                    label_similarity=round(label_dense[wid], 6),
                    lexical=round(lexical[n], 6),
                    description_similarity=None if full_vector is None else round(full_dense[wid], 6),
                    prior=round(self.prior.value(wid), 6),
                )
            )
        kept = tuple(ranked[: cfg.k])
        return PlaceholderEvidence(
            placeholder,
            text,
            kept,
            cfg.threshold(placeholder.kind),
            support=self.calibration.support(
                placeholder,
                kept,
                question=question,
                known=lexicon.knows(key),
                surfaces=sorted(lexicon.surfaces_of(kept[0].id)) if kept else None,
                unknown=frozenset({"prior"}) if self.memory.graph is not None else frozenset(),
            ),
            min_confidence=cfg.min_confidence,
        )

    def _check_graph_skeleton(self, query: IntermediateQuery) -> None:
        """A skeleton over another graph that writes one of its IRIs itself is refused like a raw Wikidata ID:
        the memory's IRIs come from the memory, never from the model."""
        memory = self.memory
        if self._graph_namespaces is None:
            ids = memory.entities.ids() | memory.relations.ids()
            self._graph_namespaces = frozenset(namespace_of(i) for i in ids)
        raw = raw_graph_iris(query.skeleton, memory.contains, self._graph_namespaces)
        if raw:
            raise RawIdentifierError(f"IRI <{raw[0]}> of the graph in the query; use a placeholder")

    def _decide(self, query: IntermediateQuery, evidence: list[PlaceholderEvidence]) -> Resolution | Refusal:
        unsupported = tuple(ev.placeholder.name for ev in evidence if not ev.supported)
        if unsupported:
            return Refusal(query, unsupported, tuple(evidence), self.prefixes)
        mapping = {ev.placeholder.name: ev.best.id for ev in evidence if ev.best is not None}
        notes: tuple[str, ...] = ()
        if self.facts is not None:
            skeleton, notes = self.facts.turned(query.skeleton, mapping)
            query = replace(query, skeleton=skeleton)
        sparql = fill(query, mapping, namespaces=dict(self.prefixes))
        self._check_output(sparql, mapping)
        return Resolution(query, sparql, tuple(mapping.items()), tuple(evidence), notes, self.prefixes)

    def _check_output(self, sparql: str, mapping: dict[str, str]) -> None:
        for name, wid in mapping.items():
            if wid not in self.memory:
                raise ResolutionError(f"{name} resolved to {wid}, which is not in the memory")
        for tok in tokenize(sparql):
            if tok.kind == "pname" and tok.prefix in ID_PREFIXES and placeholder_kind(tok.local):
                raise ResolutionError(f"placeholder {tok.text} left in the resolved query")
        check_query(sparql)


def resolved_ids(sparql: str) -> set[str]:
    """Every Wikidata ID in a query (prefixed or full IRI), for checks that outputs only use memory IDs."""
    return set(to_skeleton(sparql)[1].values())


__all__ = ["Resolver", "ResolverConfig", "ResolutionError", "placeholder_text", "resolved_ids"]
