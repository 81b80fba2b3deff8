"""What a chat model is told about a graph that has no training pairs: its classes and properties with their
labels and descriptions, how many instances each class has and a few of them, and for each property the
classes (or the kind of value) it links, read from the graph itself.

The labels and descriptions come from the graph's catalog (the memory's, so that the model names things as the
resolver will look them up); the structure comes from a SPARQL store holding the graph: a few bounded queries
per class and per property (a sample of `sample` triples each, in the store's order), so a large graph or a
remote endpoint costs one short query per schema term, not a scan. Everything is ordered deterministically
(count, then label, then IRI): the prompt built from it is the same text for every question, which is what
lets a llama.cpp server reuse its evaluated prefix (pgmr.generators.chat.schema_prompt).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from pgmr.kg.catalog import CatalogEntry
from pgmr.kg.graph import GraphCatalog
from pgmr.stores import SparqlStore, StoreError

XSD = "http://www.w3.org/2001/XMLSchema#"
_NUMBER_TYPES = frozenset(
    XSD + t
    for t in ("integer", "decimal", "double", "float", "int", "long", "short", "nonNegativeInteger",
              "positiveInteger", "negativeInteger", "nonPositiveInteger", "unsignedInt", "unsignedLong")
)  # fmt: skip
_DATE_TYPES = frozenset(XSD + t for t in ("date", "dateTime", "gYear", "gYearMonth", "time"))
ValueKind = str  # "text", "number", "date", "boolean", "IRI" (an unlabelled resource), "" for none seen


class SchemaError(Exception):
    """The graph's schema could not be read (a store error, or a graph without labelled classes or
    properties); the message says which."""


@dataclass(frozen=True)
class SchemaInstance:
    iri: str
    label: str
    description: str


@dataclass(frozen=True)
class SchemaClass:
    iri: str
    label: str
    description: str
    count: int
    instances: tuple[SchemaInstance, ...]


@dataclass(frozen=True)
class SchemaProperty:
    """`subjects`/`objects`: class IRIs, most used first; `value`: the kind of literal (or unlabelled IRI) its
    objects mostly are when they are no class's instances, else ""; an example triple of the data: a labelled
    subject with a labelled object (`example_object`) or a literal (`example_value`), the first in IRI order."""

    iri: str
    label: str
    description: str
    count: int
    subjects: tuple[str, ...]
    objects: tuple[str, ...]
    value: ValueKind
    example_subject: SchemaInstance | None = None
    example_object: SchemaInstance | None = None
    example_value: str | None = None


@dataclass(frozen=True)
class GraphSchema:
    classes: tuple[SchemaClass, ...]
    properties: tuple[SchemaProperty, ...]

    def class_label(self, iri: str) -> str:
        return next((c.label for c in self.classes if c.iri == iri), iri)


def read_schema(
    store: SparqlStore,
    catalog: GraphCatalog,
    *,
    instances_per_class: int = 3,
    sample: int = 500,
    timeout: float = 30.0,
) -> GraphSchema:
    """The schema of the graph in `store`, named with `catalog`'s labels. Raises SchemaError."""
    if instances_per_class < 0 or sample < 1:
        raise ValueError("instances_per_class must be >= 0 and sample >= 1")
    classes = [e for e in catalog if e.graph_kind == "class" and e.label]
    properties = [e for e in catalog if e.graph_kind == "property" and e.label]
    if not classes and not properties:
        raise SchemaError("the graph's catalog has no labelled class or property: nothing to describe")
    try:
        read_classes = [_read_class(store, catalog, e, instances_per_class, sample, timeout) for e in classes]
        read_properties = [_read_property(store, catalog, e, sample, timeout) for e in properties]
    except StoreError as exc:
        raise SchemaError(f"cannot read the graph's schema from the store: {exc}") from None
    read_classes.sort(key=lambda c: (-c.count, c.label.lower(), c.iri))
    read_properties.sort(key=lambda p: (-p.count, p.label.lower(), p.iri))
    return GraphSchema(tuple(read_classes), tuple(read_properties))


def _text(entry: CatalogEntry | None) -> tuple[str, str]:
    if entry is None:
        return "", ""
    return " ".join((entry.label or "").split()), " ".join((entry.description or "").split())


def _instance(catalog: GraphCatalog, iri: str) -> SchemaInstance | None:
    label, description = _text(catalog.get(iri))
    return SchemaInstance(iri, label, description) if label else None


def _read_class(
    store: SparqlStore, catalog: GraphCatalog, entry: CatalogEntry, k: int, sample: int, timeout: float
) -> SchemaClass:
    count_rows = store.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?x a <{entry.id}> }}", timeout=timeout).rows
    count = int(count_rows[0]["n"].value) if count_rows and "n" in count_rows[0] else 0
    found: list[SchemaInstance] = []
    if k and count:
        rows = store.query(f"SELECT ?x WHERE {{ ?x a <{entry.id}> }} LIMIT {sample}", timeout=timeout).rows
        iris = sorted({row["x"].value for row in rows if "x" in row and row["x"].kind == "iri"})
        for iri in iris:
            instance = _instance(catalog, iri)
            if instance is not None:
                found.append(instance)
            if len(found) == k:
                break
    label, description = _text(entry)
    return SchemaClass(entry.id, label, description, count, tuple(found))


def _read_property(
    store: SparqlStore, catalog: GraphCatalog, entry: CatalogEntry, sample: int, timeout: float
) -> SchemaProperty:
    count_rows = store.query(f"SELECT (COUNT(*) AS ?n) WHERE {{ ?s <{entry.id}> ?o }}", timeout=timeout).rows
    count = int(count_rows[0]["n"].value) if count_rows and "n" in count_rows[0] else 0
    subjects: Counter[str] = Counter()
    objects: Counter[str] = Counter()
    values: Counter[str] = Counter()
    pairs: set[tuple[str, str, bool]] = set()
    if count:
        query = (
            f"SELECT ?s ?o ?sc ?oc WHERE {{ {{ SELECT ?s ?o WHERE {{ ?s <{entry.id}> ?o }} LIMIT {sample} }} "
            "OPTIONAL { ?s a ?sc } OPTIONAL { ?o a ?oc } }"
        )
        for row in store.query(query, timeout=timeout).rows:
            subject, obj = row.get("s"), row.get("o")
            if "sc" in row:
                subjects[row["sc"].value] += 1
            if "oc" in row:
                objects[row["oc"].value] += 1
            elif obj is not None:
                values[_value_kind(obj.kind, obj.datatype)] += 1
            if (
                subject is not None
                and obj is not None
                and subject.kind == "iri"
                and obj.kind in ("iri", "literal")
            ):
                pairs.add((subject.value, obj.value, obj.kind == "literal"))
    example_subject = example_object = example_value = None
    for s, o, literal in sorted(pairs):
        head = _instance(catalog, s)
        tail = None if literal else _instance(catalog, o)
        if head is not None and (literal or tail is not None):
            example_subject, example_object, example_value = head, tail, (o if literal else None)
            break
    label, description = _text(entry)
    value = values.most_common(1)[0][0] if values and sum(values.values()) > sum(objects.values()) else ""
    return SchemaProperty(
        entry.id, label, description, count, _ranked(subjects), _ranked(objects), value,
        example_subject, example_object, example_value,
    )  # fmt: skip


def _ranked(counts: Counter[str], keep: int = 3) -> tuple[str, ...]:
    return tuple(iri for iri, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:keep])


def _value_kind(kind: str, datatype: str | None) -> ValueKind:
    if kind == "iri":
        return "IRI"
    if kind != "literal":
        return "text"
    if datatype in _NUMBER_TYPES:
        return "number"
    if datatype in _DATE_TYPES:
        return "date"
    if datatype == XSD + "boolean":
        return "boolean"
    return "text"


__all__ = [
    "GraphSchema",
    "SchemaClass",
    "SchemaError",
    "SchemaInstance",
    "SchemaProperty",
    "read_schema",
]
