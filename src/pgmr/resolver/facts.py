"""Which way round a property is used: evidence from training gold queries, to turn a triple the generator wrote
backwards (beyond the paper).

LC-QuAD 2.0 phrases "the X of E" and "the E of X" alike, so the generators often write `wd:E wdt:P ?x` where the
gold query has `?x wdt:P wd:E` (on LC-QuAD 2.0 validation, 76 of the default's 897 wrong queries are right
with one triple turned round). Which way round is a fact of the KG: a gold query's triple `wd:E wdt:P ?x` says
that E has a value for P (E is a subject of P), and `?x wdt:P wd:E . ?x wdt:P31 wd:C` that things of class C are
subjects of P. `TrainingFacts` holds those role facts from the gold queries of the generator's training data
(a small stand-in for the KG when no store is configured).

`orient` turns a triple `wd:E wdt:P ?x` (or `?x wdt:P wd:E`) round when the facts never show E in its role for
P, nor ?x's class (a `?x wdt:P31 wd:C` of the same query) in the other role, but do show the opposite. Where
they show nothing, or both ways, the triple stays as generated: no evidence, no change. Only a triple between
one entity and one variable, written on its own (after `{` or `.`, before `.` or `}`), is ever turned; a class
constraint `?x wdt:P31 wd:C` never is.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Any, Literal

from pgmr.conversion import ConversionError, to_skeleton
from pgmr.query.errors import IntermediateQueryError
from pgmr.query.lexer import Token, tokenize

FACTS_FILE = "facts.json"
INSTANCE_OF = "P31"
Role = Literal["subject", "object"]
ROLES: tuple[Role, Role] = ("subject", "object")
_OTHER: dict[Role, Role] = {"subject": "object", "object": "subject"}
_STARTS = frozenset({"{", "."})
_ENDS = frozenset({".", "}"})
_WDT = frozenset({"wdt"})
_FACT_PREFIXES = frozenset({"wdt", "p", "ps"})


class FactsError(ValueError):
    """A facts file that cannot be read."""


@dataclass(frozen=True)
class Triple:
    """One `subject predicate object` pattern of a query, as tokens of its text."""

    subject: Token
    predicate: Token
    object: Token


def _is_var(tok: Token) -> bool:
    return tok.kind == "other" and tok.text[:1] in "?$" and len(tok.text) > 1


def triples(text: str, prefixes: frozenset[str] = _WDT) -> list[Triple]:
    """The stand-alone triple patterns of a query whose predicate is a name with one of `prefixes`: after `{` or
    `.`, before `.` or `}` (a pattern continued with `;` or `,` is skipped, since turning it round would change
    its neighbours)."""
    return _triples(_tokens(text), prefixes)


def _triples(tokens: list[Token], prefixes: frozenset[str]) -> list[Triple]:
    found: list[Triple] = []
    for i in range(1, len(tokens) - 3):
        before, s, p, o, after = tokens[i - 1], tokens[i], tokens[i + 1], tokens[i + 2], tokens[i + 3]
        if before.text not in _STARTS or after.text not in _ENDS:
            continue
        if p.kind != "pname" or p.prefix not in prefixes:
            continue
        if all((t.kind == "pname" and t.prefix == "wd") or _is_var(t) for t in (s, o)):
            found.append(Triple(s, p, o))
    return found


def _classes(found: Iterable[Triple], value: Mapping[str, str]) -> dict[str, str]:
    """Variable -> its class, from `?x wdt:P31 wd:C` (`value` maps a token's text to its ID)."""
    return {
        t.subject.text: value[t.object.text]
        for t in found
        if _is_var(t.subject) and t.object.text in value and value.get(t.predicate.text) == INSTANCE_OF
    }


def _roles(
    found: list[Triple], value: Mapping[str, str]
) -> Iterator[tuple[Triple, str, str, Role, str | None]]:
    """(triple, property, entity, the entity's role, the variable's class) for each triple between one entity
    and one variable that is not a class constraint."""
    classes = _classes(found, value)
    for t in found:
        prop = value.get(t.predicate.text)
        if prop is None:
            continue
        role: Role
        if _is_var(t.subject) and not _is_var(t.object):
            if prop == INSTANCE_OF:
                continue
            entity, role, var = t.object.text, "object", t.subject.text
        elif _is_var(t.object) and not _is_var(t.subject):
            entity, role, var = t.subject.text, "subject", t.object.text
        else:
            continue
        if entity in value:
            yield t, prop, value[entity], role, classes.get(var)


def _tokens(text: str) -> list[Token]:
    """A query's tokens without comments; none for text the lexer cannot read."""
    try:
        return [t for t in tokenize(text) if t.kind != "comment"]
    except IntermediateQueryError:
        return []


def _values(tokens: list[Token], mapping: Mapping[str, str]) -> dict[str, str]:
    """Token text (`wd:entity0`) -> Wikidata ID, for the placeholders of a skeleton (`mapping`: placeholder -> ID)."""
    return {t.text: mapping[t.local] for t in tokens if t.kind == "pname" and t.local in mapping}


class TrainingFacts:
    """Role facts of properties: which entities occur as a property's subject or object in training gold
    queries, and which classes the variable on the other side has."""

    def __init__(
        self,
        entities: Mapping[Role, Mapping[str, Iterable[str]]],
        classes: Mapping[Role, Mapping[str, Iterable[str]]],
        provenance: Mapping[str, Any] | None = None,
    ) -> None:
        self.entities = {r: {p: frozenset(ids) for p, ids in entities.get(r, {}).items()} for r in ROLES}
        self.classes = {r: {p: frozenset(ids) for p, ids in classes.get(r, {}).items()} for r in ROLES}
        self.provenance = dict(provenance or {})

    def __len__(self) -> int:
        return sum(
            len(ids) for table in (self.entities, self.classes) for r in ROLES for ids in table[r].values()
        )

    @classmethod
    def from_sparql(
        cls, queries: Iterable[str], provenance: Mapping[str, Any] | None = None
    ) -> TrainingFacts:
        entities: dict[Role, dict[str, set[str]]] = {r: {} for r in ROLES}
        classes: dict[Role, dict[str, set[str]]] = {r: {} for r in ROLES}
        for sparql in queries:
            try:
                skeleton, mapping = to_skeleton(sparql)
            except ConversionError:
                continue
            tokens = _tokens(skeleton)
            value = _values(tokens, mapping)
            found = _triples(tokens, _FACT_PREFIXES)
            for _, prop, entity, role, var_class in _roles(
                [t for t in found if t.predicate.prefix == "wdt"], value
            ):
                entities[role].setdefault(prop, set()).add(entity)
                if var_class is not None:
                    classes[_OTHER[role]].setdefault(prop, set()).add(var_class)
            # Facts the triples above skip: both sides named (`wd:A wdt:P wd:B`, as in yes/no questions), and
            # statements (`wd:A p:P ?s . ?s ps:P wd:B`: A is a subject of P, B an object).
            for t in found:
                subject = None if _is_var(t.subject) else value.get(t.subject.text)
                obj = None if _is_var(t.object) else value.get(t.object.text)
                prefix, named = t.predicate.prefix, value.get(t.predicate.text)
                if named is None:
                    continue
                if subject is not None and (prefix == "p" or (prefix == "wdt" and obj is not None)):
                    entities["subject"].setdefault(named, set()).add(subject)
                if obj is not None and (prefix == "ps" or (prefix == "wdt" and subject is not None)):
                    entities["object"].setdefault(named, set()).add(obj)
        return cls(entities, classes, provenance)

    def support(self, prop: str, entity: str, role: Role, var_class: str | None) -> int:
        """How many facts show `entity` as `prop`'s `role` (0-2: the entity's own, and its variable's class in
        the other role)."""
        other = _OTHER[role]
        return int(entity in self.entities[role].get(prop, ())) + int(
            var_class is not None and var_class in self.classes[other].get(prop, ())
        )

    def turned(self, skeleton: str, mapping: Mapping[str, str]) -> tuple[str, tuple[str, ...]]:
        """`skeleton` (placeholders filled by `mapping`, placeholder -> ID) with each triple the facts say is
        backwards turned round, and a note per turned triple."""
        tokens = _tokens(skeleton)
        edits: list[tuple[Triple, str]] = []
        for t, prop, entity, role, var_class in _roles(_triples(tokens, _WDT), _values(tokens, mapping)):
            if self.support(prop, entity, role, var_class) or not self.support(
                prop, entity, _OTHER[role], var_class
            ):
                continue
            shown = (
                [f"{entity} as the {_OTHER[role]} of {prop}"]
                if entity in self.entities[_OTHER[role]].get(prop, ())
                else []
            )
            if var_class is not None and var_class in self.classes[role].get(prop, ()):
                shown.append(f"things of class {var_class} as its {role}")
            edits.append(
                (t, f"turned round: training queries show {' and '.join(shown)}, never the other way round")
            )
        text = skeleton
        for t, _ in sorted(edits, key=lambda e: -e[0].subject.start):
            s, o = t.subject, t.object
            text = text[: s.start] + o.text + text[s.end : o.start] + s.text + text[o.end :]
        return text, tuple(note for _, note in edits)

    def to_json(self) -> dict[str, Any]:
        def table(t: Mapping[Role, Mapping[str, frozenset[str]]]) -> dict[str, dict[str, list[str]]]:
            return {r: {p: sorted(ids) for p, ids in sorted(t[r].items())} for r in ROLES}

        return {
            "provenance": self.provenance,
            "entities": table(self.entities),
            "classes": table(self.classes),
        }

    @classmethod
    def from_json(cls, data: Any) -> TrainingFacts:
        def table(name: str) -> dict[Role, dict[str, list[str]]]:
            part = data.get(name) if isinstance(data, Mapping) else None
            if not isinstance(part, Mapping) or set(part) != set(ROLES):
                raise FactsError(f"bad facts file: {name!r} must map 'subject' and 'object' to properties")
            for role in ROLES:
                rows = part[role]
                if not isinstance(rows, Mapping) or not all(
                    isinstance(ids, list) and all(isinstance(i, str) for i in ids) for ids in rows.values()
                ):
                    raise FactsError(f"bad facts file: {name}.{role} must map properties to lists of IDs")
            return part  # type: ignore[return-value]

        return cls(table("entities"), table("classes"), dict(data.get("provenance") or {}))


@lru_cache(maxsize=1)
def shipped_facts() -> TrainingFacts:
    """The role facts that ship in the package (read once): from the shipped generator's training data."""
    try:
        data = json.loads(resources.files("pgmr.resolver").joinpath(FACTS_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise FactsError(f"cannot read the shipped facts file {FACTS_FILE}: {exc}") from None
    return TrainingFacts.from_json(data)


__all__ = ["FACTS_FILE", "FactsError", "TrainingFacts", "Triple", "shipped_facts", "triples"]
