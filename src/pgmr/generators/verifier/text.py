"""Verbalization: a resolved query written with the memory's labels in place of IDs, the text the draft verifier
reads beside the question.

Variables are renamed `?v0`, `?v1`, ... in order, keywords lower-cased, PREFIX lines and a `.` before `}`
dropped, so a gold query and a draft that equals it read the same and the verifier cannot tell them apart by
how they are written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pgmr.query import IntermediateQueryError
from pgmr.query.lexer import tokenize

_ID_PREFIXES = frozenset({"wd", "wdt", "p", "ps", "pq"})

Describe = Callable[[str], tuple[str, str | None] | None]


def memory_describer(memory: Any) -> Describe:
    """`describe` over a memory (pgmr.memory.Memory): an ID's label and description from its dictionary."""

    def describe(wid: str) -> tuple[str, str | None] | None:
        row = memory.dictionary("relation" if wid.startswith("P") else "entity").get(wid)
        return (row.label, row.description) if row is not None else None

    return describe


def verbalize(sparql: str, describe: Describe, *, description_words: int = 6) -> str | None:
    """`sparql` with each Wikidata ID written as its label: entities as `[label (first words of the
    description)]`, properties as `<label>`; variables renamed `?v0`, `?v1`, ... in order of appearance,
    keywords lower-cased, PREFIX declarations and a `.` before `}` dropped. `describe(id)` gives (label,
    description) or None (the ID is then written as it is). None for text the lexer cannot read."""
    try:
        tokens = [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError:
        return None
    out: list[str] = []
    names: dict[str, str] = {}
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok.kind == "keyword" and tok.text.lower() == "prefix":
            i += 3  # PREFIX name: <iri>
            continue
        if tok.kind == "pname" and tok.prefix in _ID_PREFIXES and tok.local:
            found = describe(tok.local)
            label, description = found if found is not None else (tok.local, None)
            if tok.prefix == "wd":
                words = (description or "").split()[:description_words]
                out.append(f"[{label} ({' '.join(words)})]" if words else f"[{label}]")
            else:
                out.append(f"<{label}>")
        elif tok.kind == "other" and tok.text[:1] in "?$" and len(tok.text) > 1:
            out.append(names.setdefault(tok.text.lower(), f"?v{len(names)}"))
        elif tok.kind == "keyword":
            out.append(tok.text.lower())
        else:
            if tok.text == "}" and out and out[-1] == ".":
                out.pop()
            out.append(tok.text)
        i += 1
    return " ".join(out)


__all__ = ["Describe", "memory_describer", "verbalize"]
