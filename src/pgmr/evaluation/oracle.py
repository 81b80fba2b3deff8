"""Oracle resolution: the gold conversion of a dataset resolved as if a perfect generator wrote it.

Conditions (what the "generator" writes for each placeholder):
- `label+description`: the catalog label and description (the conversion's own mapping lines);
- `label`: the label alone;
- `noisy`: a perturbed label with the description kept, the perturbation being, in this order and seeded per
  slot: with probability 1/2 an alias instead of the label (when the ID has aliases), lowercasing, and one
  typo (a letter deleted, doubled, replaced or swapped with its neighbour, in a word of 4+ letters);
- `noisy-label`: the perturbed label alone.

The string-lookup peer resolves labels without embeddings: exact label/alias match after case, accent and
whitespace normalization, ties broken by the lowest ID number (a prominence prior); in the noisy conditions,
when nothing matches exactly, the closest label/alias by rapidfuzz's normalized edit similarity, ties again to
the lowest ID.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from pgmr.conversion import ConvertedRecord
from pgmr.kg.catalog import LabelCatalog
from pgmr.kg.ids import Kind, id_kind, id_number
from pgmr.query import IntermediateQuery, Placeholder, parse
from pgmr.resolver.ranking import normalize_label

CONDITIONS = ("label+description", "label", "noisy", "noisy-label")


@dataclass(frozen=True)
class OracleCase:
    record_id: str
    query: IntermediateQuery
    gold: tuple[tuple[str, str], ...]

    def gold_dict(self) -> dict[str, str]:
        return dict(self.gold)


def oracle_cases(records: Iterable[ConvertedRecord]) -> list[OracleCase]:
    return [OracleCase(r.id, parse(r.intermediate), r.mapping) for r in records]


def _typo(text: str, rng: random.Random) -> str:
    words = [(i, w) for i, w in enumerate(text.split(" ")) if sum(ch.isalpha() for ch in w) >= 4]
    if not words:
        return text
    index, word = rng.choice(words)
    pos = rng.randrange(1, len(word) - 1)
    op = rng.choice(("delete", "double", "replace", "swap"))
    if op == "delete":
        word = word[:pos] + word[pos + 1 :]
    elif op == "double":
        word = word[:pos] + word[pos] + word[pos:]
    elif op == "replace":
        word = (
            word[:pos] + rng.choice([c for c in string.ascii_lowercase if c != word[pos]]) + word[pos + 1 :]
        )
    else:
        word = word[: pos - 1] + word[pos] + word[pos - 1] + word[pos + 1 :]
    parts = text.split(" ")
    parts[index] = word
    return " ".join(parts)


def noisy_label(label: str, aliases: Sequence[str], rng: random.Random) -> str:
    if aliases and rng.random() < 0.5:
        label = rng.choice(list(aliases))
    return _typo(label.lower(), rng)


def condition_query(
    case: OracleCase, condition: str, catalog: LabelCatalog, seed: int = 0
) -> IntermediateQuery:
    if condition not in CONDITIONS:
        raise ValueError(f"unknown condition {condition!r}; choose from {CONDITIONS}")
    if condition == "label+description":
        return case.query
    gold = case.gold_dict()
    placeholders: list[Placeholder] = []
    for p in case.query.placeholders:
        label, description = p.label, p.description
        if condition.startswith("noisy"):
            entry = catalog.get(gold[p.name])
            rng = random.Random(f"{seed}:{case.record_id}:{p.name}")
            label = noisy_label(p.label, entry.aliases if entry else (), rng)
        if condition in ("label", "noisy-label"):
            description = ""
        placeholders.append(replace(p, label=label, description=description))
    return replace(case.query, placeholders=tuple(placeholders))


class StringLookupPeer:
    """Label/alias lookup without embeddings, over the same IDs as the memory it is compared with."""

    def __init__(self, catalog: LabelCatalog, ids: set[str] | None = None) -> None:
        self._exact: dict[Kind, dict[str, str]] = {"entity": {}, "relation": {}}
        self._choices: dict[Kind, list[tuple[str, str]]] = {"entity": [], "relation": []}
        entries = sorted(
            (e for e in catalog if e.label and (ids is None or e.id in ids)), key=lambda e: id_number(e.id)
        )
        for entry in entries:
            kind = id_kind(entry.id)
            for surface in (entry.label, *entry.aliases):
                key = normalize_label(surface)
                # Entries come in ID order, so the first claim of a surface is the lowest ID.
                if key not in self._exact[kind]:
                    self._exact[kind][key] = entry.id
                    self._choices[kind].append((key, entry.id))

    def lookup(self, label: str, kind: Kind, fuzzy: bool = False) -> str | None:
        key = normalize_label(label)
        found = self._exact[kind].get(key)
        if found or not fuzzy:
            return found
        from rapidfuzz import fuzz, process

        choices = self._choices[kind]
        best = process.extractOne(key, [c for c, _ in choices], scorer=fuzz.ratio)
        return choices[best[2]][1] if best else None

    def resolve(self, query: IntermediateQuery, fuzzy: bool = False) -> dict[str, str | None]:
        return {p.name: self.lookup(p.label, p.kind, fuzzy) for p in query.placeholders}


@dataclass(frozen=True)
class SlotScores:
    entity_slots: int
    entity_correct: int
    relation_slots: int
    relation_correct: int
    queries: int
    queries_correct: int

    @property
    def entity_accuracy(self) -> float:
        return self.entity_correct / self.entity_slots if self.entity_slots else 0.0

    @property
    def relation_accuracy(self) -> float:
        return self.relation_correct / self.relation_slots if self.relation_slots else 0.0

    @property
    def query_accuracy(self) -> float:
        return self.queries_correct / self.queries if self.queries else 0.0

    def to_json(self) -> dict[str, float | int]:
        return {
            "entity_slots": self.entity_slots,
            "entity_accuracy": self.entity_accuracy,
            "relation_slots": self.relation_slots,
            "relation_accuracy": self.relation_accuracy,
            "queries": self.queries,
            "queries_fully_correct": self.query_accuracy,
        }


def score_slots(cases: Sequence[OracleCase], predictions: Sequence[dict[str, str | None]]) -> SlotScores:
    counts = {"entity": [0, 0], "relation": [0, 0]}
    full = 0
    for case, predicted in zip(cases, predictions, strict=True):
        all_right = True
        for name, wid in case.gold:
            kind = "entity" if name.startswith("entity") else "relation"
            counts[kind][0] += 1
            if predicted.get(name) == wid:
                counts[kind][1] += 1
            else:
                all_right = False
        full += all_right
    return SlotScores(
        counts["entity"][0],
        counts["entity"][1],
        counts["relation"][0],
        counts["relation"][1],
        len(cases),
        full,
    )
