"""The chat prompt for a graph without training pairs: a system message that teaches SPARQL-PGMR over the graph
and lists its schema (pgmr.generators.chat.schema), and a few worked examples written from that schema by
fixed templates (a lookup, a class with a property value, a count, a literal value, a superlative, two hops).

Nothing here depends on the question, so every question is sent with the same prefix (system message and
examples): a llama.cpp server evaluates it once and reuses it from its KV cache. The examples are generic: each
template takes the first schema terms (most used first) that fit it, and its values from the graph's own data,
never from any benchmark's questions.

The prompt also carries what the mapping grammar may allow (`relation_lines`, `class_lines`): each property's
and each class's exact `label [/TAG] description`, so that a constrained model names a property or a class
exactly as the memory holds it; instances stay free text (a graph has too many to list, and the resolver
grounds an instance's label in the question's words).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pgmr.generators.chat.grammar import DESCRIPTION_WORDS, LABEL_WORDS
from pgmr.generators.chat.schema import GraphSchema, SchemaClass, SchemaInstance, SchemaProperty
from pgmr.generators.examples import Example

_SYSTEM = """You translate questions about one knowledge graph into SPARQL-PGMR: a SPARQL query in which every \
class, instance and property of the graph is a placeholder, followed by one mapping line per placeholder that \
names it with its label in the graph.
Rules:
- Write the query on one line, without PREFIX declarations and without IRIs.
- Classes and instances are wd:entity0, wd:entity1, ...; properties are wdt:relation0, wdt:relation1, ... \
Number each kind by first appearance; the same class, instance or property keeps its placeholder.
- What the question asks for is a variable, such as ?result.
- `?x a wd:entityN` says that ?x is an instance of the class entityN; `?c rdfs:subClassOf* wd:entityN` reaches \
its subclasses. A class appears only there, never as the subject or object of a property.
- Text, numbers and dates are literals, such as "Berlin" or 42, never placeholders.
- After the query, one line per placeholder in order of first use: `entityN = [ENT] label [/ENT] description` \
or `relationN = [REL] label [/REL] description`. A class or a property has the label and description the \
schema below gives it; an instance has its name as the question writes it, and its class as description.
- Answer with the query and its mapping lines only: no explanation, no code fences."""

_MAPPING_SYSTEM = """You write the mapping block of a SPARQL-PGMR query over the knowledge graph described \
below: for each placeholder of the given query, in order of first use, one line \
`entityN = [ENT] label [/ENT] description` or `relationN = [REL] label [/REL] description`, naming the class, \
instance or property of the graph that the placeholder stands for in the question. A class or a property has \
the label and description the schema gives it; an instance has its name as the question writes it, and its \
class as description. Answer with the mapping lines only."""


@dataclass(frozen=True)
class SchemaPrompt:
    """`system`: the first request's system message (the skeleton, or the whole answer in one step);
    `mapping_system`: two-step decoding's second request; `examples`: the worked examples, in order;
    `relation_lines`/`class_lines`: the exact `label [/TAG] description` texts the mapping grammar allows."""

    system: str
    mapping_system: str
    examples: tuple[Example, ...]
    relation_lines: tuple[str, ...]
    class_lines: tuple[str, ...]


def _words(text: str, limit: int) -> str:
    return " ".join(text.split()[:limit])


def _pair(label: str, description: str, tag: str) -> str:
    """`label [/TAG] description`, cut to the mapping grammar's caps."""
    text = f"{_words(label, LABEL_WORDS)} [/{tag}]"
    description = _words(description, DESCRIPTION_WORDS)
    return f"{text} {description}" if description else text


def schema_text(schema: GraphSchema, *, max_classes: int = 60, max_properties: int = 120) -> str:
    """The schema as the prompts list it: classes with instance counts and examples, properties with what they
    link. Terms past the caps are counted, not listed."""
    lines = ["Classes (label [instances]: description):"]
    for cls in schema.classes[:max_classes]:
        lines.append(
            f"- {cls.label} [{_instances(cls)}]: {_words(cls.description, DESCRIPTION_WORDS) or '-'}"
        )
    if len(schema.classes) > max_classes:
        lines.append(f"- ... and {len(schema.classes) - max_classes} more classes")
    lines.append("Properties (label [subject class -> object class or kind of value]: description):")
    for prop in schema.properties[:max_properties]:
        lines.append(
            f"- {prop.label} [{_links(schema, prop)}]: {_words(prop.description, DESCRIPTION_WORDS) or '-'}"
        )
    if len(schema.properties) > max_properties:
        lines.append(f"- ... and {len(schema.properties) - max_properties} more properties")
    return "\n".join(lines)


def _instances(cls: SchemaClass) -> str:
    if not cls.count:
        return "no direct instances"
    shown = ", ".join(f'"{i.label}"' for i in cls.instances)
    return f"{cls.count:,} instances" + (f", e.g. {shown}" if shown else "")


def _links(schema: GraphSchema, prop: SchemaProperty) -> str:
    subjects = ", ".join(schema.class_label(c) for c in prop.subjects) or "?"
    objects = ", ".join(schema.class_label(c) for c in prop.objects) or prop.value or "?"
    return f"{subjects} -> {objects}"


def schema_prompt(schema: GraphSchema, *, max_classes: int = 60, max_properties: int = 120) -> SchemaPrompt:
    text = schema_text(schema, max_classes=max_classes, max_properties=max_properties)
    return SchemaPrompt(
        system=f"{_SYSTEM}\n\n{text}",
        mapping_system=f"{_MAPPING_SYSTEM}\n\n{text}",
        examples=tuple(schema_examples(schema)),
        relation_lines=tuple(dict.fromkeys(_pair(p.label, p.description, "REL") for p in schema.properties)),
        class_lines=tuple(dict.fromkeys(_pair(c.label, c.description, "ENT") for c in schema.classes)),
    )


# -- the worked examples ------------------------------------------------------------------------------------

Term = SchemaClass | SchemaProperty | SchemaInstance


def _line(name: str, term: Term) -> str:
    if isinstance(term, SchemaProperty):
        return f"{name} = [REL] {_pair(term.label, term.description, 'REL')}"
    return f"{name} = [ENT] {_pair(term.label, term.description, 'ENT')}"


def _example(n: int, question: str, skeleton: str, terms: Sequence[tuple[str, Term]]) -> Example:
    target = "\n".join([skeleton, *(_line(name, term) for name, term in terms)])
    return Example(f"schema-{n}", question, target, "pgmr")


def _class_of(schema: GraphSchema, iris: Sequence[str]) -> SchemaClass | None:
    return next((c for iri in iris for c in schema.classes if c.iri == iri), None)


def _literal(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def schema_examples(schema: GraphSchema) -> list[Example]:
    """Up to six examples, each from the first schema terms its template fits (properties and classes most
    used first); a template nothing fits is left out."""
    out: list[Example] = []
    props = schema.properties
    linked = [p for p in props if p.example_subject and p.example_object and p.subjects]
    literal = [p for p in props if p.example_subject and p.example_value is not None and p.value == "text"
               and p.subjects and len(p.example_value.split()) <= 4 and len(p.example_value) <= 40]  # fmt: skip
    numeric = [p for p in props if p.value == "number" and p.subjects]
    if linked:
        p = linked[0]
        assert p.example_subject is not None
        out.append(_example(len(out), f"What is the {p.label} of {p.example_subject.label}?",
                            "SELECT DISTINCT ?result WHERE { wd:entity0 wdt:relation0 ?result . }",
                            [("entity0", p.example_subject), ("relation0", p)]))  # fmt: skip
    p2 = linked[1] if len(linked) > 1 else (linked[0] if linked else None)
    cls = _class_of(schema, p2.subjects) if p2 else None
    if p2 and cls and p2.example_object:
        out.append(_example(len(out), f"Which {cls.label} has the {p2.label} {p2.example_object.label}?",
                            "SELECT DISTINCT ?result WHERE { ?result a wd:entity0 . ?result wdt:relation0 wd:entity1 . }",
                            [("entity0", cls), ("relation0", p2), ("entity1", p2.example_object)]))  # fmt: skip
    counted = [c for c in schema.classes if c.count]
    if counted:
        c = counted[1] if len(counted) > 1 else counted[0]
        out.append(_example(len(out), f"How many {c.label} are there?",
                            "SELECT (COUNT(DISTINCT ?x) AS ?result) WHERE { ?x a wd:entity0 . }",
                            [("entity0", c)]))  # fmt: skip
    if literal:
        p = literal[0]
        cls = _class_of(schema, p.subjects)
        value = p.example_value or ""
        if cls:
            out.append(_example(len(out), f"Which {cls.label} has the {p.label} {value}?",
                                f"SELECT DISTINCT ?result WHERE {{ ?result a wd:entity0 . ?result wdt:relation0 {_literal(value)} . }}",
                                [("entity0", cls), ("relation0", p)]))  # fmt: skip
    if numeric:
        p = numeric[0]
        cls = _class_of(schema, p.subjects)
        if cls:
            out.append(_example(len(out), f"Which {cls.label} has the highest {p.label}?",
                                "SELECT DISTINCT ?result WHERE { ?result a wd:entity0 . ?result wdt:relation0 ?value . } ORDER BY DESC(?value) LIMIT 1",
                                [("entity0", cls), ("relation0", p)]))  # fmt: skip
    hop = _two_hops(linked, [*literal, *numeric])
    if hop:
        first, second = hop
        assert first.example_subject is not None
        out.append(_example(len(out), f"What is the {second.label} of the {first.label} of {first.example_subject.label}?",
                            "SELECT DISTINCT ?result WHERE { wd:entity0 wdt:relation0 ?x . ?x wdt:relation1 ?result . }",
                            [("entity0", first.example_subject), ("relation0", first), ("relation1", second)]))  # fmt: skip
    return out


def _two_hops(
    linked: Sequence[SchemaProperty], values: Sequence[SchemaProperty]
) -> tuple[SchemaProperty, SchemaProperty] | None:
    """The first (link, value property) pair where the value property's subjects hold the link's objects."""
    for first in linked:
        for second in values:
            if set(first.objects) & set(second.subjects):
                return first, second
    return None


__all__ = ["SchemaPrompt", "schema_examples", "schema_prompt", "schema_text"]
