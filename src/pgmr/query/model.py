"""The typed form of a SPARQL-PGMR query: a SPARQL skeleton plus its placeholders."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pgmr.kg.ids import Kind

PLACEHOLDER_RE = re.compile(r"^(entity|relation)(0|[1-9][0-9]*)$")
TAGS: dict[Kind, str] = {"entity": "ENT", "relation": "REL"}


def placeholder_kind(name: str) -> Kind | None:
    m = PLACEHOLDER_RE.match(name)
    return m.group(1) if m else None  # type: ignore[return-value]


@dataclass(frozen=True)
class Placeholder:
    """One `entityN`/`relationN` with the canonical label and description the generator gave it."""

    name: str
    kind: Kind
    label: str
    description: str = ""

    @property
    def tag(self) -> str:
        return TAGS[self.kind]

    def mapping_line(self) -> str:
        line = f"{self.name} = [{self.tag}] {self.label} [/{self.tag}]"
        return f"{line} {self.description}" if self.description else line


@dataclass(frozen=True)
class IntermediateQuery:
    """`skeleton` is SPARQL in which every Wikidata ID is a placeholder (`wd:entity0`, `wdt:relation0`).

    Placeholders keep the order of the mapping block they were parsed from (canonically: first use).
    """

    skeleton: str
    placeholders: tuple[Placeholder, ...]

    def placeholder(self, name: str) -> Placeholder:
        for p in self.placeholders:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.placeholders)

    def to_text(self) -> str:
        return "\n".join([self.skeleton, *(p.mapping_line() for p in self.placeholders)])

    def __str__(self) -> str:
        return self.to_text()
