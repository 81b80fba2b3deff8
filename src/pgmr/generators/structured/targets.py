"""Training targets of the structured generator, and the label spaces (vocabulary) they index into.

Built from converted records and the label catalog only: the same data the seq2seq generator trains on.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pgmr.conversion import ConvertedRecord
from pgmr.generators.structured.frames import (
    LiteralSlot,
    Span,
    abstract_literals,
    find_span,
    fuzzy_span,
    normalize_question,
)
from pgmr.kg.catalog import LabelCatalog
from pgmr.query import parse
from pgmr.query.normalize import normalize_query

VOCAB_FILE = "structure_vocab.json"
# Fuzzy entity spans ("Andre dé Toth" for "André de Toth"): 75 keeps 92% of LC-QuAD 2.0's entity slots
# reachable against 82% for exact label/alias matches (test statistics; training uses train only).
FUZZY_MIN_RATIO = 75.0


@dataclass(frozen=True)
class Choice:
    """A value the generator can write for a slot: a label with the description that disambiguates it."""

    id: str
    label: str
    description: str


@dataclass(frozen=True)
class Vocabulary:
    templates: tuple[str, ...]
    relations: tuple[Choice, ...]  # every property the table scores
    relation_aliases: tuple[tuple[str, ...], ...]  # per property: its aliases (lexical match feature)
    fallbacks: tuple[Choice, ...]  # entities that questions imply without naming ("human")
    entity_slots: int
    relation_slots: int
    literal_slots: int
    _template_index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _relation_index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)
    _fallback_index: dict[str, int] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        self._template_index.update({t: i for i, t in enumerate(self.templates)})
        self._relation_index.update({c.id: i for i, c in enumerate(self.relations)})
        self._fallback_index.update({c.id: i for i, c in enumerate(self.fallbacks)})

    def template(self, text: str) -> int | None:
        return self._template_index.get(text)

    def relation(self, wikidata_id: str) -> int | None:
        return self._relation_index.get(wikidata_id)

    def fallback(self, wikidata_id: str) -> int | None:
        return self._fallback_index.get(wikidata_id)

    def to_json(self) -> dict:
        def choices(items: Sequence[Choice]) -> list[list[str]]:
            return [[c.id, c.label, c.description] for c in items]

        return {
            "templates": list(self.templates),
            "relations": choices(self.relations),
            "relation_aliases": [list(a) for a in self.relation_aliases],
            "fallbacks": choices(self.fallbacks),
            "entity_slots": self.entity_slots,
            "relation_slots": self.relation_slots,
            "literal_slots": self.literal_slots,
        }

    @classmethod
    def from_json(cls, data: dict) -> Vocabulary:
        return cls(
            templates=tuple(data["templates"]),
            relations=tuple(Choice(*row) for row in data["relations"]),
            relation_aliases=tuple(
                tuple(a) for a in data.get("relation_aliases", [[] for _ in data["relations"]])
            ),
            fallbacks=tuple(Choice(*row) for row in data["fallbacks"]),
            entity_slots=int(data["entity_slots"]),
            relation_slots=int(data["relation_slots"]),
            literal_slots=int(data["literal_slots"]),
        )

    def save(self, directory: Path) -> None:
        (directory / VOCAB_FILE).write_text(json.dumps(self.to_json(), ensure_ascii=False), encoding="utf-8")

    @classmethod
    def load(cls, directory: Path) -> Vocabulary:
        return cls.from_json(json.loads((directory / VOCAB_FILE).read_text(encoding="utf-8")))


@dataclass(frozen=True)
class FrameTarget:
    """One question with the frame of its gold query; slots without a reachable value are None."""

    question: str
    template: str
    entity_spans: tuple[Span | None, ...]
    entity_ids: tuple[str, ...]
    relation_ids: tuple[str, ...]
    literals: tuple[LiteralSlot, ...]


def frame_target(question: str, record: ConvertedRecord, catalog: LabelCatalog) -> FrameTarget:
    question = normalize_question(question)
    query = parse(record.intermediate)
    template, literals = abstract_literals(query.skeleton, question)
    mapping = record.mapping_dict()
    entity_ids = tuple(mapping[p.name] for p in query.placeholders if p.kind == "entity")
    relation_ids = tuple(mapping[p.name] for p in query.placeholders if p.kind == "relation")
    spans: list[Span | None] = []
    for wid in entity_ids:
        entry = catalog.get(wid)
        names = [entry.label or "", *entry.aliases] if entry else []
        spans.append(find_span(question, names) or fuzzy_span(question, names, FUZZY_MIN_RATIO))
    return FrameTarget(question, template, tuple(spans), entity_ids, relation_ids, literals)


def frame_targets(
    records: Iterable[ConvertedRecord],
    catalog: LabelCatalog,
    *,
    paraphrases: dict[str, list[str]] | None = None,
) -> list[FrameTarget]:
    """A target per record, and one per extra question string of the record (`paraphrases`, by record id)."""
    out: list[FrameTarget] = []
    for record in records:
        out.append(frame_target(record.question, record, catalog))
        for extra in (paraphrases or {}).get(record.id, []):
            out.append(frame_target(extra, record, catalog))
    return out


def template_key(template: str) -> str:
    """Templates that Query EM cannot tell apart (keyword case, variable names, spacing) share a key."""
    return normalize_query(template)


def canonical_templates(targets: Sequence[FrameTarget]) -> dict[str, str]:
    """Each template -> the most frequent template of its key, so one class stands for each query shape."""
    by_key: dict[str, Counter[str]] = {}
    for target in targets:
        by_key.setdefault(template_key(target.template), Counter())[target.template] += 1
    canonical = {key: counts.most_common(1)[0][0] for key, counts in by_key.items()}
    return {t: canonical[key] for key, counts in by_key.items() for t in counts}


def build_vocabulary(
    targets: Sequence[FrameTarget], catalog: LabelCatalog, *, min_fallback: int = 3
) -> Vocabulary:
    """Templates seen in training (canonical), every property of the catalog, implied entities seen
    `min_fallback` times without a span."""
    canonical = canonical_templates(targets)
    counts = Counter(canonical[t.template] for t in targets)
    templates = sorted(counts, key=lambda t: (-counts[t], t))
    implied = Counter(
        wid for t in targets for wid, span in zip(t.entity_ids, t.entity_spans, strict=True) if span is None
    )

    def choice(wid: str) -> Choice:
        entry = catalog.get(wid)
        return Choice(
            wid, (entry.label if entry else None) or wid, (entry.description if entry else "") or ""
        )

    fallbacks = tuple(
        choice(w) for w, c in sorted(implied.items(), key=lambda x: (-x[1], x[0])) if c >= min_fallback
    )
    properties = [e for e in sorted(catalog.of_kind("relation"), key=lambda e: e.id) if e.label]
    relations = tuple(Choice(e.id, e.label or e.id, e.description or "") for e in properties)
    return Vocabulary(
        templates=tuple(templates),
        relations=relations,
        relation_aliases=tuple(e.aliases for e in properties),
        fallbacks=fallbacks,
        entity_slots=max([len(t.entity_ids) for t in targets] + [1]),
        relation_slots=max([len(t.relation_ids) for t in targets] + [1]),
        literal_slots=max([len(t.literals) for t in targets] + [1]),
    )
