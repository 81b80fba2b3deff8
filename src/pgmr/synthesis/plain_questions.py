"""Plain one-hop questions made from the graph's own labels: training data beyond a benchmark's templates.

Facts come from training queries (a subject and a property with the object asked for, or a property and an
object with the subject asked for); their wording comes from the property's phrasings (pgmr.synthesis.phrasings)
and the labels and aliases of the catalog. Every record is an ordinary (question, SPARQL) pair with real IDs,
so the usual conversion turns it into SPARQL-PGMR and checks it like any other.

Deterministic: the same records, catalog, count and seed give the same questions in the same order.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from pgmr.datasets.reading import jsonl_items
from pgmr.datasets.records import QARecord
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.synthesis.phrasings import (
    BY_VERB_FORWARD,
    BY_VERB_REVERSE,
    FORWARD_GENERIC,
    PROPERTY_PATTERNS,
    REVERSE_GENERIC,
    by_verb,
    question_word,
)

SOURCE = "plain"
_SUBJECT_FIRST = re.compile(r"wd:(Q\d+)\s+wdt:(P\d+)\s+\?\w+")
_OBJECT_LAST = re.compile(r"\?\w+\s+wdt:(P\d+)\s+wd:(Q\d+)")
# Shapes and their share of the generated questions: most plain questions ask for one value of one thing. No
# counts or ASK: LC-QuAD 2.0 and QALD-10 write those two ways (`COUNT(?x) {...}` against `COUNT(DISTINCT ?x)
# WHERE {...}`, `ASK WHERE` against `ASK`), and a generated convention would move one benchmark's questions to
# the other's; the one-hop SELECT is written alike in both.
SHAPE_SHARES = {"forward": 0.75, "reverse": 0.25}
FORWARD = "SELECT DISTINCT ?answer WHERE {{ wd:{e} wdt:{p} ?answer . }}"
REVERSE = "SELECT DISTINCT ?answer WHERE {{ ?answer wdt:{p} wd:{e} . }}"


@dataclass(frozen=True)
class Fact:
    """An entity and a property that a training query uses together; `reverse`: the entity is the object."""

    entity: str
    prop: str
    reverse: bool = False


def facts_from_queries(sparqls: Iterable[str]) -> list[Fact]:
    """Distinct (entity, property) uses of gold queries, in first-seen order: `wd:Q wdt:P ?x` and
    `?x wdt:P wd:Q` triples (P31 "instance of" left out: a type is not what a plain question asks for)."""
    seen: dict[Fact, None] = {}
    for sparql in sparqls:
        for entity, prop in _SUBJECT_FIRST.findall(sparql):
            if prop != "P31":
                seen.setdefault(Fact(entity, prop))
        for prop, entity in _OBJECT_LAST.findall(sparql):
            if prop != "P31":
                seen.setdefault(Fact(entity, prop, reverse=True))
    return list(seen)


def _names(entry: CatalogEntry) -> list[str]:
    """What a question may call a thing: its label, and now and then an alias (people do)."""
    assert entry.label is not None
    return [entry.label, *(a for a in entry.aliases if len(a) > 2)]


def _property_words(entry: CatalogEntry) -> list[str]:
    """The label and the short aliases (long ones are descriptions in disguise); the label whatever its length."""
    assert entry.label is not None
    return [entry.label, *(w for w in entry.aliases if w and len(w) < 40)]


def _surface(question: str, rng: random.Random) -> str:
    """Questions as typed: sometimes lower case, sometimes without the question mark."""
    roll = rng.random()
    if roll < 0.1:
        question = question.lower()
    elif roll < 0.2:
        question = question.rstrip("?.")
    return question[0].upper() + question[1:] if roll >= 0.1 else question


def _forward_question(
    fact: Fact, name: str, prop: CatalogEntry, datatype: str | None, rng: random.Random
) -> str | None:
    own = PROPERTY_PATTERNS.get(fact.prop, ((), ()))[0]
    verbs = [v for w in _property_words(prop) if (v := by_verb(w))]
    word = question_word(prop.label or "", prop.description, datatype)
    generic = FORWARD_GENERIC[word]
    choices: list[str] = []
    if own:
        choices.extend(own * 3)  # a property's own phrasings first: they are how people ask
    if verbs:
        choices.extend(p.replace("{v}", rng.choice(verbs)) for p in BY_VERB_FORWARD)
    pattern = rng.choice(choices) if choices and rng.random() < 0.8 else rng.choice(generic)
    return pattern.format(e=name, p=rng.choice(_property_words(prop)))


def _reverse_question(fact: Fact, name: str, prop: CatalogEntry, rng: random.Random) -> str | None:
    own = PROPERTY_PATTERNS.get(fact.prop, ((), ()))[1]
    verbs = [v for w in _property_words(prop) if (v := by_verb(w))]
    choices = list(own * 3)
    if verbs:
        choices.extend(p.replace("{v}", rng.choice(verbs)) for p in BY_VERB_REVERSE)
    pattern = rng.choice(choices) if choices and rng.random() < 0.8 else rng.choice(REVERSE_GENERIC)
    return pattern.format(e=name, p=rng.choice(_property_words(prop)))


def plain_questions(
    facts: Sequence[Fact],
    catalog: LabelCatalog,
    count: int,
    *,
    datatypes: Mapping[str, str] | None = None,
    seed: int = 0,
) -> list[QARecord]:
    """`count` plain questions over `facts` whose entity and property have labels in `catalog`.

    Shapes follow SHAPE_SHARES: one value of one thing (`wd:E wdt:P ?answer`), the things with a value
    (`?answer wdt:P wd:E`). Each fact is used at most once per shape and round
    before any is used again, so the questions spread over every fact before repeating."""
    if count < 0:
        raise ValueError(f"count must be >= 0, got {count}")
    datatypes = datatypes or {}
    usable = [
        f
        for f in facts
        if (e := catalog.get(f.entity)) is not None
        and e.label
        and (p := catalog.get(f.prop)) is not None
        and p.label
        and datatypes.get(f.prop, "wikibase-item") not in ("external-id", "url", "commonsMedia")
    ]
    if not usable and count:
        raise ValueError("no fact has a labelled entity and property in the catalog")
    rng = random.Random(seed)
    forward = [f for f in usable if not f.reverse]
    reverse = [f for f in usable if f.reverse]
    pools = {"forward": forward, "reverse": reverse}
    order = {shape: rng.sample(pool, len(pool)) for shape, pool in pools.items()}
    position = dict.fromkeys(pools, 0)
    shapes = [s for s in SHAPE_SHARES if pools[s]]
    weights = [SHAPE_SHARES[s] for s in shapes]
    records: list[QARecord] = []
    while len(records) < count:
        shape = rng.choices(shapes, weights)[0]
        pool = order[shape]
        fact = pool[position[shape] % len(pool)]
        position[shape] += 1
        entity, prop = catalog.get(fact.entity), catalog.get(fact.prop)
        assert entity is not None and prop is not None
        names = _names(entity)
        name = names[0] if rng.random() < 0.85 else rng.choice(names)
        if shape == "forward":
            question = _forward_question(fact, name, prop, datatypes.get(fact.prop), rng)
            sparql = FORWARD.format(e=fact.entity, p=fact.prop)
        else:
            question = _reverse_question(fact, name, prop, rng)
            sparql = REVERSE.format(e=fact.entity, p=fact.prop)
        if question is None:
            continue
        records.append(
            QARecord(
                id=f"{SOURCE}:{len(records)}",
                question=_surface(question, rng),
                sparql=sparql,
                source=SOURCE,
                meta=(("shape", shape),),
            )
        )
    return records


def property_datatypes(data_dir: Path | str) -> dict[str, str]:
    """Property ID -> Wikibase datatype ("time", "quantity", "wikibase-item", ...) from a data directory's
    `memory/properties.jsonl`; empty when the file has none (the question words then come from labels)."""
    path = Path(data_dir) / "memory" / "properties.jsonl"
    if not path.is_file():
        return {}
    found: dict[str, str] = {}
    for _, row in jsonl_items(path):
        if isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("datatype"), str):
            found[row["id"]] = row["datatype"]
    return found
