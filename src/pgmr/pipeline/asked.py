"""What a draft adds that its question does not ask for: a reranker signal (issue 46).

Generators trained on LC-QuAD 2.0 glue its template habits onto plain questions: "Who founded Microsoft?"
becomes the founder *that is a human* (`?x wdt:P31 wd:Q5`), "When was Marie Curie born?" gains a qualifier.
A part of a query is asked for when the question names it:
- a type triple (`wdt:P31 wd:Q...`) when a word of the class's label is a word of the question ("Which
  *city* ...", "*people*" for "person" is not caught: a missed type word costs a signal, not the query);
- a qualifier (`pq:`) when the question has a number (a year, a date) or a word of the qualifier's label.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pgmr.resolver import PlaceholderEvidence

_WORD = re.compile(r"[a-z0-9]+")
_TYPE = re.compile(r"(?:wdt:|<http://www\.wikidata\.org/prop/direct/)P31>?\s+(?:wd:|<http://www\.wikidata\.org/entity/)(Q\d+)")
_QUALIFIER = re.compile(r"(?:pq:|<http://www\.wikidata\.org/prop/qualifier/)(P\d+)")
_STOP = frozenset({"the", "of", "and", "for", "in", "on", "at", "by", "to", "a", "an", "or", "with", "from"})


def _stems(text: str) -> set[str]:
    """Lower-case content words with a plural 's' taken off, so "cities"/"city" and "films"/"film" meet."""
    out = set()
    for word in _WORD.findall(text.lower()):
        if word in _STOP or len(word) < 3:
            continue
        if word.endswith("ies"):
            word = word[:-3] + "y"
        elif word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        out.add(word)
    return out


def unasked_parts(question: str | None, sparql: str | None, evidence: Sequence[PlaceholderEvidence]) -> int:
    """How many type triples and qualifiers of `sparql` the question does not ask for (0 without a question
    or a query: nothing to compare)."""
    if not question or not sparql:
        return 0
    asked = _stems(question)
    labels: dict[str, set[str]] = {}
    for item in evidence:
        best = item.best
        if best is not None:
            labels.setdefault(best.id, set()).update(_stems(f"{best.label} {item.placeholder.label}"))
    count = 0
    for class_id in _TYPE.findall(sparql):
        if not labels.get(class_id, set()) & asked:
            count += 1
    has_number = any(ch.isdigit() for ch in question)
    for qualifier in set(_QUALIFIER.findall(sparql)):
        if not has_number and not labels.get(qualifier, set()) & asked:
            count += 1
    return count
