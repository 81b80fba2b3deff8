"""Label grounding: snap a generated entity label to the question span it was meant to copy.

Small generators trained on this machine get the query structure right far more often than they spell the
entities: "Was Roman Polanski born in Paris?" comes out with `[ENT] Roman Poly Poli [/ENT]`. In LC-QuAD 2.0
and QALD most entity labels are copied from the question, so before resolution each entity label is compared
with every word span of the question (character-level similarity, case-insensitive); when the best span is
close enough, and the label is not already in the question, the span replaces the label. Labels that are not
in the question (an alias, a class the question only implies: "USA" -> "United States of America") stay as
generated, because no span is close enough. Relation labels are never snapped: questions paraphrase
relations ("born in" for "place of birth").

This runs after generation and before the memory lookup; it only edits labels, never the skeleton, and the
original and grounded labels are both reported, so a user sees what changed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from rapidfuzz import fuzz

from pgmr.query import IntermediateQuery

_WORD = re.compile(r"[^\s?!,;:\"()\[\]{}]+")
_TRIM = "'’`.\""


@dataclass(frozen=True)
class GroundingConfig:
    min_similarity: float = 0.5  # chosen on LC-QuAD 2.0 validation (docs/generators.md)
    max_span_words: int = 8

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_similarity <= 1.0:
            raise ValueError("min_similarity must be in [0, 1]")
        if self.max_span_words < 1:
            raise ValueError("max_span_words must be positive")


@dataclass(frozen=True)
class Snap:
    placeholder: str
    generated: str
    grounded: str
    similarity: float


def question_spans(question: str, max_words: int = 8) -> list[str]:
    """Every run of up to `max_words` words, as written in the question (possessive 's and quotes trimmed)."""
    words = [m.group(0) for m in _WORD.finditer(question)]
    spans: list[str] = []
    for i in range(len(words)):
        for j in range(i + 1, min(len(words), i + max_words) + 1):
            text = " ".join(words[i:j])
            if text.endswith(("'s", "’s")):
                text = text[:-2]
            text = text.strip(_TRIM)
            if text:
                spans.append(text)
    return list(dict.fromkeys(spans))


def ground_labels(
    query: IntermediateQuery, question: str, config: GroundingConfig | None = None
) -> tuple[IntermediateQuery, tuple[Snap, ...]]:
    """The query with entity labels snapped to question spans, and what was snapped."""
    config = config or GroundingConfig()
    spans = question_spans(question, config.max_span_words)
    folded = [s.casefold() for s in spans]
    if not spans:
        return query, ()
    snaps: list[Snap] = []
    placeholders = []
    for p in query.placeholders:
        label = p.label.strip()
        key = label.casefold()
        if p.kind != "entity" or not key or key in folded:
            placeholders.append(p)
            continue
        best, best_score = "", 0.0
        for span, span_key in zip(spans, folded, strict=True):
            score = fuzz.ratio(key, span_key) / 100.0
            # Ties go to the longer span: a partial copy is the usual failure, not an overlong one.
            if score > best_score or (score == best_score and len(span) > len(best)):
                best, best_score = span, score
        if best_score >= config.min_similarity:
            snaps.append(Snap(p.name, p.label, best, round(best_score, 4)))
            placeholders.append(replace(p, label=best))
        else:
            placeholders.append(p)
    if not snaps:
        return query, ()
    return replace(query, placeholders=tuple(placeholders)), tuple(snaps)
