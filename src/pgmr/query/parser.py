"""Parse model output into an IntermediateQuery, or raise one IntermediateQueryError saying what and where.

Text format (see docs/intermediate-format.md):

    SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }
    entity0 = [ENT] Hamburg [/ENT] city and state in northern Germany
    relation0 = [REL] population [/REL] number of people inhabiting the place
"""

from __future__ import annotations

import re

from pgmr.kg.ids import ID_PREFIXES, iri_to_prefixed, is_wikidata_id
from pgmr.query.errors import (
    DuplicatePlaceholderError,
    EmptyLabelError,
    EmptyQueryError,
    IntermediateQueryError,
    InvalidPlaceholderError,
    KindClashError,
    MalformedMappingError,
    MissingMappingError,
    RawIdentifierError,
    UnusedMappingError,
)
from pgmr.query.gate import check_query
from pgmr.query.lexer import Token, check_brackets, position, tokenize
from pgmr.query.model import TAGS, IntermediateQuery, Placeholder, placeholder_kind

# Where the mapping block starts: the first line that opens with `name =` (name a plausible identifier).
_MAPPING_START = re.compile(r"^\s*[A-Za-z_]\w*\s*=(?!=)")
_MAPPING_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z_]\w*)\s*=\s*\[(?P<tag>ENT|REL)\](?P<label>.*?)\[/(?P<ctag>ENT|REL)\](?P<desc>.*)$"
)
_TAG_MARK = re.compile(r"\[/?(?:ENT|REL)\]")
_KIND_OF_TAG = {tag: kind for kind, tag in TAGS.items()}


def parse(text: object) -> IntermediateQuery:
    """Parse SPARQL-PGMR text. Raises only IntermediateQueryError subclasses."""
    if not isinstance(text, str):
        raise EmptyQueryError(f"expected text, got {type(text).__name__}")
    if "\x00" in text:
        line, column = position(text, text.index("\x00"))
        raise IntermediateQueryError("NUL character in query text", line, column)
    lines = text.split("\n")
    start = next((i for i, line in enumerate(lines) if _MAPPING_START.match(line)), len(lines))
    body = "\n".join(lines[:start]).rstrip()
    if not body.strip():
        raise EmptyQueryError("no SPARQL query before the mapping block" if start < len(lines) else "empty")
    placeholders = _parse_mapping(lines, start)
    uses = _placeholder_uses(body)
    _cross_check(body, lines, start, placeholders, uses)
    check_query(body)
    return IntermediateQuery(skeleton=body.strip("\n"), placeholders=tuple(placeholders))


def _parse_mapping(lines: list[str], start: int) -> list[Placeholder]:
    placeholders: list[Placeholder] = []
    seen: set[str] = set()
    for line_no, line in enumerate(lines[start:], start + 1):
        if not line.strip():
            continue
        m = _MAPPING_LINE.match(line)
        if not m:
            raise MalformedMappingError(
                "expected a mapping line `nameN = [ENT|REL] label [/ENT|REL] description`", line_no
            )
        name, tag, ctag = m.group("name"), m.group("tag"), m.group("ctag")
        label, desc = m.group("label").strip(), m.group("desc").strip()
        kind = placeholder_kind(name)
        if kind is None:
            raise MalformedMappingError(f"'{name}' is not a placeholder name (entityN or relationN)", line_no)
        if tag != ctag:
            raise MalformedMappingError(f"[{tag}] is closed by [/{ctag}]", line_no)
        if _KIND_OF_TAG[tag] != kind:
            raise KindClashError(f"{name} is an {kind} but its mapping says [{tag}]", line_no)
        if _TAG_MARK.search(label) or _TAG_MARK.search(desc):
            raise MalformedMappingError(f"stray [ENT]/[REL] marker in the mapping of {name}", line_no)
        if not label:
            raise EmptyLabelError(f"{name} has an empty label", line_no)
        if name in seen:
            raise DuplicatePlaceholderError(f"{name} is mapped twice", line_no)
        seen.add(name)
        placeholders.append(Placeholder(name, kind, " ".join(label.split()), " ".join(desc.split())))
    return placeholders


def _placeholder_uses(body: str) -> dict[str, Token]:
    """Placeholder name -> its first use; rejects raw IDs and misplaced placeholders."""
    tokens = list(tokenize(body))
    check_brackets(body, tokens)
    uses: dict[str, Token] = {}
    for tok in tokens:
        if tok.kind == "iri":
            hit = iri_to_prefixed(tok.text[1:-1])
            if hit:
                line, column = position(body, tok.start)
                raise RawIdentifierError(
                    f"real Wikidata ID {tok.text} in the query; use a placeholder", line, column
                )
            continue
        if tok.kind != "pname":
            continue
        prefix, local = tok.prefix, tok.local
        kind = placeholder_kind(local)
        if prefix not in ID_PREFIXES:
            if kind is not None:
                line, column = position(body, tok.start)
                raise InvalidPlaceholderError(
                    f"placeholder {local} needs a Wikidata prefix (wd:, wdt:, p:, ps:, pq:, ...), "
                    f"not '{prefix}:'",
                    line,
                    column,
                )
            continue
        line, column = position(body, tok.start)
        if is_wikidata_id(local):
            raise RawIdentifierError(
                f"real Wikidata ID {tok.text} in the query; use a placeholder", line, column
            )
        if kind is None:
            raise InvalidPlaceholderError(
                f"{tok.text} is not a placeholder (expected {prefix}:entityN or {prefix}:relationN)",
                line,
                column,
            )
        if kind == "entity" and prefix != "wd":
            raise KindClashError(f"{tok.text}: '{prefix}:' takes a relation, not an entity", line, column)
        uses.setdefault(local, tok)
    return uses


def _cross_check(
    body: str, lines: list[str], start: int, placeholders: list[Placeholder], uses: dict[str, Token]
) -> None:
    mapped = {p.name for p in placeholders}
    for name, tok in uses.items():
        if name not in mapped:
            line, column = position(body, tok.start)
            raise MissingMappingError(f"{tok.text} is used but has no mapping line", line, column)
    for p in placeholders:
        if p.name not in uses:
            line_no = next(i for i, line in enumerate(lines[start:], start + 1) if p.name in line)
            raise UnusedMappingError(f"{p.name} has a mapping line but the query never uses it", line_no)
