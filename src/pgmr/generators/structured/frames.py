"""Query frames: what the structured generator predicts, and the intermediate text it is turned into.

A converted record's intermediate query splits into
- a **template**: the skeleton with each literal that the question contains replaced by a mark
  (`{{lit0}}`; `{{lit0|lower}}` when the query lower-cases the question's words, `{{lit0|num}}` when it
  writes the question's number without thousands separators). Literals the question does not contain
  (`'en'`, LIMIT counts) stay in the template: they are part of the query's shape;
- one value per entity placeholder (a span of the question, or one of a few frequent entities that
  questions only imply, "human" for "who"), per relation placeholder (a property of the memory) and per
  literal mark (a span of the question).

Everything the generator writes is still SPARQL-PGMR: labels and descriptions, never an ID.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pgmr.query.lexer import tokenize

MARK = re.compile(r"\{\{lit(\d+)(?:\|(lower|num))?\}\}")
_NUMBER = re.compile(r"(?<![\w.,])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\w,])|(?<![\w.,])\d+(?:\.\d+)?(?![\w])")
_BARE_NUMBER = re.compile(r"(?<![\w?$:.])-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?(?![\w.])")
_WORD_CHAR = re.compile(r"\w")


@dataclass(frozen=True)
class Span:
    """Characters [start, end) of the (whitespace-normalised) question."""

    start: int
    end: int

    def text(self, question: str) -> str:
        return question[self.start : self.end]


@dataclass(frozen=True)
class LiteralSlot:
    span: Span
    transform: str  # "", "lower" or "num"


def normalize_question(question: str) -> str:
    return " ".join(question.split())


def _at_word_bounds(text: str, start: int, end: int) -> bool:
    before = text[start - 1] if start > 0 else " "
    after = text[end] if end < len(text) else " "
    inner_first, inner_last = text[start], text[end - 1]
    return not (
        (_WORD_CHAR.match(before) and _WORD_CHAR.match(inner_first))
        or (_WORD_CHAR.match(after) and _WORD_CHAR.match(inner_last))
    )


def find_span(question: str, texts: Iterable[str]) -> Span | None:
    """The longest of `texts` that occurs in the question at word boundaries (case-insensitive); first one."""
    folded = question.casefold()
    if len(folded) != len(question):  # casefold changed lengths (ß): offsets would not line up
        folded = question.lower()
    best: Span | None = None
    for text in sorted({t.strip() for t in texts if t and t.strip()}, key=len, reverse=True):
        needle = text.casefold() if len(text.casefold()) == len(text) else text.lower()
        if best is not None and len(needle) <= best.end - best.start:
            break
        start = folded.find(needle)
        while start >= 0:
            end = start + len(needle)
            if len(folded) == len(question) and _at_word_bounds(question, start, end):
                best = Span(start, end)
                break
            start = folded.find(needle, start + 1)
    return best


def _number_value(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _find_number(question: str, literal: str) -> tuple[Span, str] | None:
    value = _number_value(literal)
    if value is None:
        return None
    for m in _NUMBER.finditer(question):
        if _number_value(m.group()) == value:
            written = m.group()
            if written == literal:
                return Span(m.start(), m.end()), ""
            if written.replace(",", "") == literal:
                return Span(m.start(), m.end()), "num"
    return None


def _find_literal(question: str, literal: str) -> LiteralSlot | None:
    if not literal.strip() or literal != literal.strip():
        return None
    number = _find_number(question, literal)
    if number is not None:
        return LiteralSlot(*number)
    span = find_span(question, [literal])
    if span is None:
        return None
    written = span.text(question)
    if written == literal:
        return LiteralSlot(span, "")
    if written.lower() == literal:
        return LiteralSlot(span, "lower")
    return None


def _literal_sites(skeleton: str) -> list[tuple[int, int, str]]:
    """(start, end, content) of every quoted literal's content and every bare number, in text order.

    Counts after LIMIT/OFFSET are left out: they are part of the query's shape, not copied from the question.
    """
    sites: list[tuple[int, int, str]] = []
    quoted: list[tuple[int, int]] = []
    for tok in tokenize(skeleton):
        if tok.kind in ("string", "comment", "iri"):
            quoted.append((tok.start, tok.end))
        if tok.kind != "string" or len(tok.text) < 2 or tok.text.startswith(("'''", '"""')):
            continue
        content = tok.text[1:-1]
        if "\\" not in content:
            sites.append((tok.start + 1, tok.end - 1, content))
    for m in _BARE_NUMBER.finditer(skeleton):
        if any(lo <= m.start() < hi for lo, hi in quoted):
            continue
        if re.search(r"(?i)\b(?:limit|offset)\s*$", skeleton[: m.start()]):
            continue
        sites.append((m.start(), m.end(), m.group()))
    return sorted(sites)


def abstract_literals(skeleton: str, question: str) -> tuple[str, tuple[LiteralSlot, ...]]:
    """(template, literal slots in mark order): the skeleton's literals that the question contains as marks.

    A quoted literal is marked when its content occurs in the question (as written, or lower-cased by the
    query), a number (quoted or bare) when the question has the same number. Counts after LIMIT/OFFSET and
    literals the question lacks stay in the template.
    """
    pieces: list[str] = []
    slots: list[LiteralSlot] = []
    last = 0
    for lo, hi, content in _literal_sites(skeleton):
        slot = _find_literal(question, content)
        if slot is None:
            continue
        mark = f"{{{{lit{len(slots)}{'|' + slot.transform if slot.transform else ''}}}}}"
        pieces.append(skeleton[last:lo])
        pieces.append(mark)
        last = hi
        slots.append(slot)
    pieces.append(skeleton[last:])
    return "".join(pieces), tuple(slots)


def literal_marks(template: str) -> list[tuple[int, str]]:
    """(index, transform) of each mark, in order of index."""
    return sorted((int(m.group(1)), m.group(2) or "") for m in MARK.finditer(template))


def apply_transform(text: str, transform: str) -> str:
    if transform == "lower":
        return text.lower()
    if transform == "num":
        return text.replace(",", "")
    return text


def render_template(template: str, literals: Sequence[str]) -> str:
    """The skeleton: each mark replaced by its literal (transformed as the mark says)."""

    def fill(m: re.Match[str]) -> str:
        index = int(m.group(1))
        if index >= len(literals):
            raise ValueError(f"template mark lit{index} has no literal ({len(literals)} given)")
        text = apply_transform(literals[index], m.group(2) or "")
        return text.replace("\\", "\\\\").replace("'", "\\'").replace('"', '\\"')

    return MARK.sub(fill, template)


def placeholder_counts(template: str) -> tuple[int, int]:
    """(entity placeholders, relation placeholders) the template uses: entity0..N-1, relation0..M-1."""
    entities: set[int] = set()
    relations: set[int] = set()
    for tok in tokenize(template):
        if tok.kind != "pname":
            continue
        local = tok.local
        if local.startswith("entity") and local[6:].isdigit():
            entities.add(int(local[6:]))
        elif local.startswith("relation") and local[8:].isdigit():
            relations.add(int(local[8:]))
    return len(entities), len(relations)


_SPAN_WORD = re.compile(r"[^\s\"“”«»()\[\]{}?!,;]+")
_EDGE = "'’`.:\""


def word_spans(question: str, max_words: int = 8) -> list[Span]:
    """Every run of 1..max_words words of the question, trimmed of edge punctuation."""
    words = []
    for m in _SPAN_WORD.finditer(question):
        start, end = m.start(), m.end()
        while start < end and question[start] in _EDGE:
            start += 1
        while end > start and question[end - 1] in _EDGE:
            end -= 1
        if end > start:
            words.append((start, end))
    return [
        Span(words[i][0], words[j][1])
        for i in range(len(words))
        for j in range(i, min(len(words), i + max_words))
    ]


def fuzzy_span(question: str, texts: Iterable[str], min_ratio: float = 80.0) -> Span | None:
    """The word span most similar to one of `texts` (rapidfuzz ratio, case-insensitive), if >= min_ratio.

    For questions that misspell or inflect a label ("Andre dé Toth", "McDonald's", "Circle Game"): the span
    is what the question says, and the memory's nearest label is the resolver's job.
    """
    from rapidfuzz import fuzz

    targets = [t.lower() for t in texts if t and t.strip()]
    best: tuple[float, int, Span] | None = None
    for span in word_spans(question):
        written = span.text(question).lower()
        for target in targets:
            if abs(len(written) - len(target)) > max(4, len(target) // 2):
                continue
            score = fuzz.ratio(written, target)
            key = (score, span.end - span.start)
            if score >= min_ratio and (best is None or key > best[:2]):
                best = (score, span.end - span.start, span)
    return best[2] if best else None
