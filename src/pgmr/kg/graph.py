"""The label catalog of any RDF graph: every IRI with a label becomes an entry, with its kind, its label(s) and a
description, chosen by language.

- **Kinds.** A property is used as a predicate, typed as one (`rdf:Property`, `owl:ObjectProperty`, ...) or
  described by `rdfs:domain`/`range`/`subPropertyOf`; a class is the object of `rdf:type`, typed `owl:Class` or
  `rdfs:Class`, or in `rdfs:subClassOf`; everything else is an instance. Properties are the memory's relations,
  classes and instances its entities, so the placeholders stay `wd:entityN` and `wdt:relationN`.
- **Labels** come from `GraphSettings.label_predicates` (in that order of preference: `skos:prefLabel`,
  `rdfs:label`, `schema:name`, `dct:title`, `foaf:name`) and `alias_predicates` (`skos:altLabel`); the label is
  one literal of the first language of `GraphSettings.languages` that has any (default: en, then untagged,
  then any), the other labels in the preferred languages are aliases.
- **Descriptions** come from `description_predicates` (`rdfs:comment`, `skos:definition`,
  `schema:description`), chosen the same way; an instance without one is described by its classes' labels
  ("Product Category"), which is what tells a category named "Encoder" from a product of the same name.

`GraphCatalogBuilder` takes triples one at a time (from files, pgmr.kg.rdf; from an endpoint,
pgmr.stores.graph_pages), so a graph is read once, streaming.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.kg.iris import is_iri, namespace_of

GraphKind = Literal["class", "property", "instance"]
GRAPH_KINDS: tuple[GraphKind, ...] = ("class", "property", "instance")

RDF = "http://www.w3.org/1999/02/22-rdf-syntax-ns#"
RDFS = "http://www.w3.org/2000/01/rdf-schema#"
OWL = "http://www.w3.org/2002/07/owl#"
SKOS = "http://www.w3.org/2004/02/skos/core#"
RDF_TYPE = RDF + "type"
DEFAULT_LABEL_PREDICATES = (
    SKOS + "prefLabel",
    RDFS + "label",
    "http://schema.org/name",
    "https://schema.org/name",
    "http://purl.org/dc/terms/title",
    "http://xmlns.com/foaf/0.1/name",
)
DEFAULT_ALIAS_PREDICATES = (SKOS + "altLabel",)
DEFAULT_DESCRIPTION_PREDICATES = (
    RDFS + "comment",
    SKOS + "definition",
    "http://schema.org/description",
    "https://schema.org/description",
)
# `languages` entries: a language tag (matching itself and its subtags: "en" takes "en-GB"), "" for literals
# without a tag, "*" for any.
UNTAGGED = ""
ANY_LANGUAGE = "*"
DEFAULT_LANGUAGES = ("en", UNTAGGED, ANY_LANGUAGE)
CLASS_TYPES = frozenset({OWL + "Class", RDFS + "Class"})
PROPERTY_TYPES = frozenset(
    {
        RDF + "Property",
        OWL + "ObjectProperty",
        OWL + "DatatypeProperty",
        OWL + "AnnotationProperty",
        OWL + "FunctionalProperty",
        OWL + "TransitiveProperty",
        OWL + "SymmetricProperty",
    }
)
_SUBJECT_IS_PROPERTY = frozenset({RDFS + "domain", RDFS + "range", RDFS + "subPropertyOf"})
_OBJECT_IS_CLASS = frozenset({RDFS + "domain", RDFS + "range", RDFS + "subClassOf", RDF_TYPE})
# rdfs:comment can be a paragraph; a mapping line is one line that a generator writes out.
MAX_DESCRIPTION = 300
MAX_ALIASES = 20


@dataclass(frozen=True)
class GraphSettings:
    """Which predicates name and describe things, and which languages are preferred (validated here, once)."""

    label_predicates: tuple[str, ...] = DEFAULT_LABEL_PREDICATES
    alias_predicates: tuple[str, ...] = DEFAULT_ALIAS_PREDICATES
    description_predicates: tuple[str, ...] = DEFAULT_DESCRIPTION_PREDICATES
    languages: tuple[str, ...] = DEFAULT_LANGUAGES
    class_labels_as_description: bool = True

    def __post_init__(self) -> None:
        for name in ("label_predicates", "alias_predicates", "description_predicates"):
            for iri in getattr(self, name):
                if not isinstance(iri, str) or not is_iri(iri) or any(c in iri for c in '<> "{}|^`\\'):
                    raise ValueError(f"{name}: {iri!r} is not an absolute IRI (write it in full, no <>)")
        if not self.label_predicates:
            raise ValueError("label_predicates must name at least one predicate")
        if not self.languages:
            raise ValueError("languages must name at least one language ('' untagged, '*' any)")
        object.__setattr__(self, "languages", tuple(x.strip().lower() for x in self.languages))

    def with_extra(self, labels: Iterable[str] = (), descriptions: Iterable[str] = ()) -> GraphSettings:
        """These settings with more label and description predicates (after the defaults: less preferred)."""
        return GraphSettings(
            tuple(dict.fromkeys([*self.label_predicates, *labels])),
            self.alias_predicates,
            tuple(dict.fromkeys([*self.description_predicates, *descriptions])),
            self.languages,
            self.class_labels_as_description,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "label_predicates": list(self.label_predicates),
            "alias_predicates": list(self.alias_predicates),
            "description_predicates": list(self.description_predicates),
            "languages": list(self.languages),
            "class_labels_as_description": self.class_labels_as_description,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphSettings:
        return cls(
            tuple(data["label_predicates"]),
            tuple(data["alias_predicates"]),
            tuple(data["description_predicates"]),
            tuple(data["languages"]),
            bool(data["class_labels_as_description"]),
        )


@dataclass(frozen=True)
class GraphTerm:
    """The object of a triple: an IRI, or a literal with its language tag ("" when it has none)."""

    value: str
    literal: bool = False
    language: str = ""


@dataclass(frozen=True)
class GraphInfo:
    """What a memory keeps of the graph it was built from: its prefixes (for writing final queries), where it
    came from, the settings, and which entities are classes (relations are properties, the rest instances)."""

    prefixes: tuple[tuple[str, str], ...]
    sources: tuple[str, ...]
    settings: GraphSettings
    classes: frozenset[str] = field(default_factory=frozenset)
    counts: tuple[tuple[str, int], ...] = ()

    def prefix_map(self) -> dict[str, str]:
        return dict(self.prefixes)

    def to_json(self) -> dict[str, Any]:
        return {
            "sources": list(self.sources),
            "counts": dict(self.counts),
            "prefixes": dict(self.prefixes),
            "settings": self.settings.to_json(),
            "classes": sorted(self.classes),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GraphInfo:
        prefixes = data["prefixes"]
        if not isinstance(prefixes, Mapping) or not all(isinstance(v, str) for v in prefixes.values()):
            raise TypeError("prefixes must map names to namespaces")
        return cls(
            tuple(prefixes.items()),
            tuple(str(s) for s in data["sources"]),
            GraphSettings.from_json(data["settings"]),
            frozenset(str(c) for c in data["classes"]),
            tuple((str(k), int(v)) for k, v in dict(data.get("counts") or {}).items()),
        )


class GraphCatalog(LabelCatalog):
    """A label catalog of IRIs (entries carry their `graph_kind`), with the graph's prefixes."""

    def __init__(
        self,
        entries: Iterable[CatalogEntry] = (),
        prefixes: Mapping[str, str] | None = None,
        sources: Iterable[str] = (),
        settings: GraphSettings | None = None,
    ) -> None:
        super().__init__(entries)
        self.prefixes = dict(prefixes or {})
        self.sources = tuple(sources)
        self.settings = settings or GraphSettings()
        self._namespaces: frozenset[str] | None = None

    def namespaces(self) -> frozenset[str]:
        """Namespaces that hold entries: an IRI in one of them without an entry is unlabelled, not vocabulary."""
        if self._namespaces is None:
            self._namespaces = frozenset(namespace_of(e.id) for e in self)
        return self._namespaces

    def counts(self) -> dict[str, int]:
        found: dict[str, int] = {kind: 0 for kind in GRAPH_KINDS}
        for entry in self:
            found[entry.graph_kind or "instance"] += 1
        return found

    def info(self) -> GraphInfo:
        return GraphInfo(
            tuple(sorted(self.prefixes.items())),
            self.sources,
            self.settings,
            frozenset(e.id for e in self if e.graph_kind == "class"),
            tuple(self.counts().items()),
        )

    @classmethod
    def from_info(cls, entries: Iterable[CatalogEntry], info: GraphInfo) -> GraphCatalog:
        """The catalog a memory was built from, back from its entries (kinds from `info`)."""
        kinds = (
            CatalogEntry(e.id, e.label, e.description, e.aliases, _kind_back(e, info.classes))
            for e in entries
        )
        return cls(kinds, info.prefix_map(), info.sources, info.settings)


def _kind_back(entry: CatalogEntry, classes: frozenset[str]) -> str:
    if entry.graph_kind is not None:
        return entry.graph_kind
    return "class" if entry.id in classes else "instance"


@dataclass
class _Seen:
    labels: list[tuple[int, str, str]] = field(default_factory=list)  # (predicate rank, language, value)
    descriptions: list[tuple[int, str, str]] = field(default_factory=list)
    types: set[str] = field(default_factory=set)


class GraphCatalogBuilder:
    """Triples in (`add`), a `GraphCatalog` out (`build`). Holds, per IRI, only its labels, descriptions and
    types, and the set of IRIs seen as classes and as properties."""

    def __init__(self, settings: GraphSettings | None = None) -> None:
        self.settings = settings or GraphSettings()
        named = [*self.settings.label_predicates, *self.settings.alias_predicates]
        self._label_rank = {iri: n for n, iri in reversed(list(enumerate(named)))}
        self._aliases_from = len(self.settings.label_predicates)
        self._description_rank = {
            iri: n for n, iri in reversed(list(enumerate(self.settings.description_predicates)))
        }
        self._seen: dict[str, _Seen] = {}
        self.classes: set[str] = set()
        self.properties: set[str] = set()
        self.triples = 0

    def add(self, subject: str, predicate: str, obj: GraphTerm) -> None:
        """One triple; `subject` is an IRI (callers skip blank nodes)."""
        self.triples += 1
        self.properties.add(predicate)
        if obj.literal:
            rank = self._label_rank.get(predicate)
            if rank is not None:
                self._entry(subject).labels.append((rank, obj.language.lower(), obj.value))
                return
            rank = self._description_rank.get(predicate)
            if rank is not None:
                self._entry(subject).descriptions.append((rank, obj.language.lower(), obj.value))
            return
        if predicate == RDF_TYPE:
            if obj.value in CLASS_TYPES:
                self.classes.add(subject)
            elif obj.value in PROPERTY_TYPES:
                self.properties.add(subject)
            else:
                self._entry(subject).types.add(obj.value)
        if predicate in _SUBJECT_IS_PROPERTY:
            self.properties.add(subject)
        if predicate == RDFS + "subPropertyOf":
            self.properties.add(obj.value)
        if predicate == RDFS + "subClassOf":
            self.classes.add(subject)
        if predicate in _OBJECT_IS_CLASS:
            self.classes.add(obj.value)

    def mark(self, iri: str, kind: GraphKind) -> None:
        """What a source knows without the triple that shows it (an endpoint's per-kind queries)."""
        (self.properties if kind == "property" else self.classes).add(iri)

    def _entry(self, iri: str) -> _Seen:
        seen = self._seen.get(iri)
        if seen is None:
            seen = self._seen[iri] = _Seen()
        return seen

    def build(self, prefixes: Mapping[str, str] | None = None, sources: Iterable[str] = ()) -> GraphCatalog:
        languages = self.settings.languages
        labels: dict[str, tuple[str, tuple[str, ...]]] = {}
        for iri, seen in self._seen.items():
            named = _labels(seen.labels, languages, self._aliases_from)
            if named is not None:
                labels[iri] = named
        entries = []
        for iri, (label, aliases) in labels.items():
            seen = self._seen[iri]
            kind: GraphKind = (
                "property" if iri in self.properties else "class" if iri in self.classes else "instance"
            )
            description = _pick(seen.descriptions, languages)
            if description is None and kind == "instance" and self.settings.class_labels_as_description:
                names = sorted({labels[t][0] for t in seen.types if t in labels})
                description = ", ".join(names) or None
            entries.append(CatalogEntry(iri, label, _shorten(description), aliases, kind))
        entries.sort(key=lambda e: e.id)
        return GraphCatalog(entries, prefixes, sources, self.settings)


def _clean(text: str) -> str:
    return " ".join(text.split())


def _matches(tag: str, wanted: str) -> bool:
    if wanted == ANY_LANGUAGE:
        return True
    if wanted == UNTAGGED:
        return tag == ""
    return tag == wanted or tag.startswith(wanted + "-")


def _pick(found: list[tuple[int, str, str]], languages: tuple[str, ...]) -> str | None:
    """The best literal of the first preferred language that has one: by predicate rank, then exact tag,
    then text (so that a build does not depend on triple order)."""
    for wanted in languages:
        hits = [
            (rank, tag != wanted, _clean(v)) for rank, tag, v in found if _matches(tag, wanted) and v.strip()
        ]
        if hits:
            return min(hits)[2]
    return None


def _labels(
    found: list[tuple[int, str, str]], languages: tuple[str, ...], aliases_from: int
) -> tuple[str, tuple[str, ...]] | None:
    """(label, aliases): the label from a label predicate where there is one (an alias predicate only
    otherwise); aliases are the other names in any preferred language but "any"."""
    proper = [f for f in found if f[0] < aliases_from]
    label = _pick(proper, languages) or _pick(found, languages)
    if label is None:
        return None
    explicit = [x for x in languages if x != ANY_LANGUAGE]
    others = sorted(
        {_clean(v) for _, tag, v in found if v.strip() and any(_matches(tag, x) for x in explicit)} - {label}
    )
    return label, tuple(others[:MAX_ALIASES])


def _shorten(text: str | None) -> str | None:
    if text is None or len(text) <= MAX_DESCRIPTION:
        return text
    cut = text.rfind(" ", 0, MAX_DESCRIPTION)
    return text[: cut if cut > 0 else MAX_DESCRIPTION].rstrip(" ,;:") + " ..."


__all__ = [
    "ANY_LANGUAGE",
    "DEFAULT_DESCRIPTION_PREDICATES",
    "DEFAULT_LABEL_PREDICATES",
    "DEFAULT_LANGUAGES",
    "GRAPH_KINDS",
    "RDF_TYPE",
    "UNTAGGED",
    "GraphCatalog",
    "GraphCatalogBuilder",
    "GraphInfo",
    "GraphKind",
    "GraphSettings",
    "GraphTerm",
]
