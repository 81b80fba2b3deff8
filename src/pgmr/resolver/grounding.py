"""Label grounding: snap a generated label to the question span it was meant to copy.

Small generators trained on this machine get the query structure right far more often than they spell the
entities: "Was Roman Polanski born in Paris?" comes out with `[ENT] Roman Poly Poli [/ENT]`. In LC-QuAD 2.0
and QALD most entity labels are copied from the question, so before resolution each entity label is compared
with every word span of the question (character-level similarity, case-insensitive); when the best span is
close enough, and the label is not already in the question, the span replaces the label. Labels that are not
in the question (an alias, a class the question only implies: "USA" -> "United States of America") stay as
generated, because no span is close enough. Relation labels are not snapped to arbitrary spans: questions
paraphrase relations ("born in" for "place of birth").

With the memory's labels (`known`, which every caller that holds a resolver passes: `Resolver.knows`), the
rules change, because a span that is itself a label of the memory is far more likely to be what the model
meant than one that is not:
- a generated label that is a label or alias of the memory stays as generated ("Babe Ruth" is not re-spelt
  "Babe_Ruth" after the question), with the two exceptions below (since 2026-12-05);
- an entity label snaps to the closest span that is a memory label when one is close enough, and only
  otherwise to the closest span of all ("The Ivroy Coast" -> "Ivory Coast", a memory label, rather than the
  closer span "the Ivory Coast", which is not), unless that closer span holds the memory label plus content
  words ("CFR/22 class" -> "CFR DE 241 class", not the memory label "class"): a memory that knows only a
  fragment of the name most likely lacks the entity, and the fragment would defeat refusal (since 2026-12-03);
- a relation label that the memory does not know snaps to a close span that is a relation label of the
  memory ("Miastituent ID" -> "MIA constituent ID" when the question names that ID). Other relation labels
  stay as written, so a paraphrased relation stays as the model wrote it.
On LC-QuAD 2.0 validation (600 questions, the default model) this took Query EM from 41.33% to 44.50%, most of
it from relations (docs/research-log.md, 2026-12-02). Two exceptions for labels the memory knows (2026-12-05;
LC-QuAD 2.0 validation, the default ensemble: 48.36% -> 50.88% Query EM, 47 of 1,826 queries turned right, 1
wrong):
- a longer name wins: an entity label that is a span of the question gives way to the longest span that holds
  it plus content words and is itself an entity label of the memory ("Salta" -> "Salta Province", "Jesus" ->
  "Jesus Christ", "Medusa" -> "The Raft of the Medusa"). The generators often copy part of a name, and the
  part is often the name of something else the memory knows. A span that is or holds another entity label of
  the query is not taken, and extra function words do not count ("West Wing" stays);
- an identifier the question names wins. Questions ask for an external ID by its name ("What is Wereld van
  Oranje ID of Rinus Michels?"), and among thousands of near-identical ID properties the generators often
  write a neighbour the memory also knows ("Nihon Tarento Meikan ID"), or another relation altogether
  ("heritage designation" for "NSW Heritage database ID"). The question names an identifier when exactly one
  of its spans is a relation label of the memory with an identifier word ("ID", "identifier", "URL", "code",
  "number", "username") and another content word (the longest where they nest), and no relation of the query
  names it already. Then a relation label that is not in the question becomes that span, its description
  dropped (it described the other property), if the label has an identifier word itself or is the query's
  only relation label that is not in the question.
A name the memory lacks is never a candidate of either rule, so neither can hide a missing entity or relation
from refusal.

Literals get the same treatment (`ground_literals`): the model writes the right filter but garbles the digits
or the word it should copy ("36936.0" for "population of 394,169", 'kinson' for "the word turnip"). A number
in a comparison or a quoted literal that does not occur in the question is replaced by the most similar
number of the question (keeping the model's format: no thousands separators, a trailing ".0" where it wrote
one); a quoted word by the most similar content word of the question that no label already uses. Literals
that are in the question, language tags, LIMIT/OFFSET counts, and every literal of a question without a
candidate stay as generated.

This runs after generation and before the memory lookup; labels and literals are the only edits (the query's
structure is never touched), and every change is reported with what was generated, so a user sees it.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from rapidfuzz import fuzz

from pgmr.kg.ids import Kind
from pgmr.query import IntermediateQuery, IntermediateQueryError
from pgmr.query.lexer import tokenize
from pgmr.query.question import IDENTIFIER_WORDS, STOP_WORDS, names_identifier, question_spans, question_words

LITERAL = "literal"
# Is this text a label or alias of the memory, for entities or relations? (`Resolver.knows`)
Known = Callable[[Kind, str], bool]


@dataclass(frozen=True)
class GroundingConfig:
    # Entity labels snap to a question span at least this similar (1 turns label grounding off); chosen on
    # LC-QuAD 2.0 validation (docs/research-log.md, "2026-11-29 — Label grounding").
    min_similarity: float = 0.5
    max_span_words: int = 8
    literals: bool = True  # ground_literals as well
    # With a `known` predicate: keep memory labels, prefer spans that are memory labels.
    use_memory: bool = True

    def __post_init__(self) -> None:
        if not 0.0 <= self.min_similarity <= 1.0:
            raise ValueError("min_similarity must be in [0, 1]")
        if self.max_span_words < 1:
            raise ValueError("max_span_words must be positive")


@dataclass(frozen=True)
class Snap:
    """One edit: `placeholder` is the placeholder whose label changed, or LITERAL for a literal of the
    skeleton (`generated` and `grounded` are then the literals as written in the query, quotes included)."""

    placeholder: str
    generated: str
    grounded: str
    similarity: float


def _closest(key: str, spans: list[tuple[str, str]]) -> tuple[str, float]:
    """The span (as written, case-folded) most similar to `key`, and its similarity."""
    best, best_score = "", 0.0
    for span, span_key in spans:
        score = fuzz.ratio(key, span_key) / 100.0
        # Ties go to the longer span: a partial copy is the usual failure, not an overlong one.
        if score > best_score or (score == best_score and len(span) > len(best)):
            best, best_score = span, score
    return best, best_score


def _fragment_of(known: str, known_score: float, closest: str, score: float) -> bool:
    """Whether the closest question span of all (`closest`, at `score`) is closer to the generated label than
    the memory label `known` and holds it plus content words: "CFR/22 class" is closer to "CFR DE 241 class" than to "class", and "Bell Jelly" to
    "Bell Jar" than to "bell". The memory then knows only a fragment of the name the model meant, which is what
    a memory lacking the entity looks like; snapping to the fragment would resolve it with full support, so
    refusal could not see it. Extra function words do not count ("the Ivory Coast" still gives way to the memory
    label "Ivory Coast")."""
    return score > known_score and _holds_plus_content(closest.casefold(), known.casefold())


def _run_at(words: list[str], part: list[str]) -> int | None:
    """Where `part` first occurs as a run of `words`, or None."""
    for start in range(len(words) - len(part) + 1):
        if words[start : start + len(part)] == part:
            return start
    return None


def _contains_words(outer: str, inner: str) -> bool:
    """Whether `inner`'s words are a run of `outer`'s, `outer` having more of them."""
    words, part = question_words(outer), question_words(inner)
    return len(part) < len(words) and _run_at(words, part) is not None


def _holds_plus_content(outer: str, inner: str) -> bool:
    """Whether `inner`'s words are a run of `outer`'s and `outer` has a content word besides them ("Salta
    Province" over "Salta", "CFR DE 241 class" over "class": yes; "the West Wing" over "West Wing": no)."""
    words, part = question_words(outer), question_words(inner)
    start = _run_at(words, part)
    if start is None:
        return False
    return any(w not in STOP_WORDS for w in words[:start] + words[start + len(part) :])


def _longest_known_name(key: str, known_entities: list[tuple[str, str]], others: list[str]) -> str | None:
    """The longest entity label of the memory among the question spans that hold `key` (an entity label the
    generator copied from the question) plus content words, and neither are nor hold another entity label of
    the query."""
    longer = [
        (span, span_key)
        for span, span_key in known_entities
        if _holds_plus_content(span_key, key)
        and not any(other and (other == span_key or _contains_words(span_key, other)) for other in others)
    ]
    if not longer:
        return None
    return max(longer, key=lambda pair: len(question_words(pair[1])))[0]


def _named_identifier(known_relations: list[tuple[str, str]], taken: set[str]) -> str | None:
    """The one identifier relation the question names (the longest where such spans nest), unless it names
    none or several, or another relation placeholder of the query already names it."""
    # A bare "ID" (an alias of "record number") or "code" names no particular property.
    named = [
        (span, key)
        for span, key in known_relations
        if names_identifier(span)
        and any(w not in IDENTIFIER_WORDS and w not in STOP_WORDS for w in question_words(key))
    ]
    outermost = [(s, k) for s, k in named if not any(_contains_words(other, k) for _, other in named)]
    if len(outermost) != 1 or outermost[0][1] in taken:
        return None
    return outermost[0][0]


def ground_labels(
    query: IntermediateQuery,
    question: str,
    config: GroundingConfig | None = None,
    known: Known | None = None,
) -> tuple[IntermediateQuery, tuple[Snap, ...]]:
    """The query with entity labels snapped to question spans, and what was snapped. With `known` (is this
    label or alias in the memory, for this kind?), see the module docstring: memory labels are kept, and
    spans that are memory labels are preferred."""
    config = config or GroundingConfig()
    spans = question_spans(question, config.max_span_words)
    if not spans:
        return query, ()
    folded = [s.casefold() for s in spans]
    pairs = list(zip(spans, folded, strict=True))
    known_spans: dict[Kind, list[tuple[str, str]]] = {}

    def spans_known(kind: Kind) -> list[tuple[str, str]]:
        if kind not in known_spans:
            assert known is not None
            known_spans[kind] = [(s, f) for s, f in pairs if known(kind, s)]
        return known_spans[kind]

    relation_labels = {q.label.strip().casefold() for q in query.placeholders if q.kind == "relation"}
    # Relations whose label is not a question span: when one alone is, it is the one a named identifier replaces.
    unnamed_relations = sum(
        1 for q in query.placeholders if q.kind == "relation" and q.label.strip().casefold() not in folded
    )
    snaps: list[Snap] = []
    placeholders = []
    for p in query.placeholders:
        label = p.label.strip()
        key = label.casefold()
        if key and key in folded and p.kind == "entity" and known is not None:
            others = [
                q.label.strip().casefold() for q in query.placeholders if q.kind == "entity" and q is not p
            ]
            longer = _longest_known_name(key, spans_known("entity"), others)
            if longer is not None:
                snaps.append(
                    Snap(p.name, p.label, longer, round(fuzz.ratio(key, longer.casefold()) / 100.0, 4))
                )
                placeholders.append(replace(p, label=longer))
                continue
        if not key or key in folded or (p.kind != "entity" and known is None):
            placeholders.append(p)
            continue
        best, best_score = "", 0.0
        closest: tuple[str, float] | None = None  # the closest span of all, found at most once
        if known is not None:
            if known(p.kind, label):
                named = None
                if p.kind == "relation" and (names_identifier(label) or unnamed_relations == 1):
                    named = _named_identifier(spans_known(p.kind), relation_labels)
                if named is None:
                    placeholders.append(p)
                else:
                    score = fuzz.ratio(key, named.casefold()) / 100.0
                    snaps.append(Snap(p.name, p.label, named, round(score, 4)))
                    placeholders.append(replace(p, label=named, description=""))
                    relation_labels.add(named.casefold())  # no second relation of the query takes it too
                continue
            best, best_score = _closest(key, spans_known(p.kind))
            if best_score < config.min_similarity:
                best, best_score = "", 0.0
            elif p.kind == "entity":
                closest = _closest(key, pairs)
                if _fragment_of(best, best_score, *closest):
                    best, best_score = "", 0.0  # the closest span of all wins below
        # Relations paraphrase the question ("born in" for "place of birth"): they only ever snap to a span
        # that is itself a relation label of the memory.
        if not best and p.kind == "entity":
            best, best_score = closest or _closest(key, pairs)
        if best and best_score >= config.min_similarity:
            snaps.append(Snap(p.name, p.label, best, round(best_score, 4)))
            placeholders.append(replace(p, label=best))
        else:
            placeholders.append(p)
    if not snaps:
        return query, ()
    return replace(query, placeholders=tuple(placeholders)), tuple(snaps)


def ground(
    query: IntermediateQuery,
    question: str,
    config: GroundingConfig | None = None,
    known: Known | None = None,
) -> tuple[IntermediateQuery, tuple[Snap, ...]]:
    """Labels (unless `min_similarity` is 1) and then literals (unless `literals` is off) grounded in the
    question; what `pgmr generate --resolve`, `pgmr ask`, the service, the demo and the experiments run
    (with `known` from their resolver: `Resolver.knows`)."""
    config = config or GroundingConfig()
    snaps: tuple[Snap, ...] = ()
    if config.min_similarity < 1.0:
        query, snaps = ground_labels(query, question, config, known if config.use_memory else None)
    if config.literals:
        query, literal_snaps = ground_literals(query, question)
        snaps += literal_snaps
    return query, snaps


# A number as questions write it: 394,169 / -26.8989 / 2.64804e+06; "1882-7-3" gives 1882, 7 and 3.
_QUESTION_NUMBER = re.compile(
    r"(?<![\w.-])-?\d+(?:,\d{3})*(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w])|(?<=\d-)\d+(?![\w])"
)
_NUMERIC = re.compile(r"-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")
# Literals of a skeleton worth grounding: a quoted string, or a bare number right after a comparison.
_SKELETON_LITERAL = re.compile(
    r"'(?P<quoted>[^'\n]*)'|(?<=[=<>])(?P<space>\s*)(?P<number>-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?)(?![\w.])"
)
_LANG_TAG = re.compile(r"lang\s*\([^)]*\)\s*=\s*$", re.IGNORECASE)
# Words of LC-QuAD's label-filter templates ("whose name has the word X in it", "starts with the letter X"):
# never the literal itself.
_TEMPLATE_WORDS = frozenset(
    {"word", "words", "letter", "letters", "contain", "contains", "containing", "start", "starts", "starting"}
    | {"started", "begin", "begins", "beginning", "end", "ends", "ending", "named", "names", "string"}
)


def _number_value(text: str) -> float | None:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def _digits(text: str) -> str:
    text = text.replace(",", "")
    return text[:-2] if text.endswith(".0") else text


def _as_generated(number: str, generated: str) -> str:
    """The question's number written the way the model wrote its literal (LC-QuAD's own format): no
    thousands separators, and a trailing ".0" where the model wrote one and the question has none."""
    number = number.replace(",", "")
    if generated.endswith(".0") and not any(c in number for c in ".eE"):
        number += ".0"
    return number


def _best(candidates: list[str], key: str, used: set[str]) -> tuple[str, float]:
    """The candidate most similar to `key` by character ratio, and its ratio; unused candidates win ties, so
    two garbled literals of one question ("between 10 and 21") go to different question numbers."""
    scored = [(fuzz.ratio(key, _digits(c).casefold()) / 100.0, _digits(c) not in used, c) for c in candidates]
    score, _, best = max(scored, key=lambda t: (t[0], t[1]))
    return best, score


def ground_literals(query: IntermediateQuery, question: str) -> tuple[IntermediateQuery, tuple[Snap, ...]]:
    """The query with literals that are not in the question replaced by the question's closest number or
    word (see the module docstring), and what was replaced."""
    folded_question = question.casefold()
    numbers = [m.group(0) for m in _QUESTION_NUMBER.finditer(question)]
    values = {v for v in map(_number_value, numbers) if v is not None}
    label_words = {w.casefold() for p in query.placeholders for w in question_words(p.label)}
    words = [
        word
        for word in question_spans(question, max_words=1)
        if (key := word.casefold()) not in STOP_WORDS
        and key not in _TEMPLATE_WORDS
        and key not in label_words
        and not _NUMERIC.fullmatch(key)
    ]
    used: set[str] = set()  # question numbers and words already in the query (as _digits writes them)
    snaps: list[Snap] = []

    def replace_literal(m: re.Match[str]) -> str:
        quoted = m.group("quoted") is not None
        literal = m.group("quoted") if quoted else m.group("number")
        if quoted and _LANG_TAG.search(m.string[: m.start()]):
            return m.group(0)
        if _NUMERIC.fullmatch(literal):
            if not numbers or _number_value(literal) in values or literal in question:
                used.add(_digits(literal))
                return m.group(0)
            best, score = _best(numbers, _digits(literal), used)
            grounded = _as_generated(best, literal)
        else:
            if not literal.strip() or literal.casefold() in folded_question or not words:
                return m.group(0)
            best, score = _best(words, literal.casefold(), used)
            # Lower-cased where the model wrote it so: LC-QuAD's label filters compare with lcase(...).
            grounded = best.casefold() if literal == literal.casefold() else best
        used.add(_digits(best))
        if grounded == literal:
            return m.group(0)
        # A question word may hold the quote itself ("d'Arc"): escaped, the literal stays one string.
        written = f"'{_escape(grounded)}'" if quoted else grounded
        snaps.append(Snap(LITERAL, f"'{literal}'" if quoted else literal, written, round(score, 4)))
        return written if quoted else m.group("space") + written

    skeleton = _SKELETON_LITERAL.sub(replace_literal, query.skeleton)
    if not snaps:
        return query, ()
    try:
        list(tokenize(skeleton))
    except IntermediateQueryError:  # never hand the resolver a skeleton that no longer lexes
        return query, ()
    return replace(query, skeleton=skeleton), tuple(snaps)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace("'", "\\'")


__all__ = [
    "LITERAL",
    "GroundingConfig",
    "Known",
    "Snap",
    "ground",
    "ground_labels",
    "ground_literals",
    "question_spans",
]
