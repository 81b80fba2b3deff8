"""Gold SPARQL over any graph -> a skeleton with placeholders, from the graph's label catalog.

The intermediate language stays the one of Wikidata (docs/own-graph.md): a class or instance of the graph
becomes `wd:entityN`, a property `wdt:relationN`, whatever its namespace, and the IRI itself lives in the
memory's rows; `fill` (pgmr.conversion.convert) writes it back with the graph's own prefixes. So parser,
generators and resolver need no other placeholder, and a generator trained on Wikidata writes skeletons a
graph's memory can fill.

Which IRIs of a gold query become placeholders:
- an IRI the catalog has (it has a label) -> a placeholder, the same IRI always the same one;
- an IRI in a namespace that holds catalog entries but without an entry of its own -> the record is skipped
  (`missing_label`: the memory could never produce it), as a Wikidata ID without a label is;
- any other IRI (`rdf:type`, `rdfs:subClassOf`, a value of another dataset the graph only points at) stays as
  written, as `wikibase:label` does in a Wikidata query; so do datatypes (`^^xsd:date`) and function names.
PREFIX declarations the skeleton no longer uses, or that restate a standard prefix, are dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from urllib.parse import urljoin

from pgmr.conversion.errors import ConversionError
from pgmr.kg.graph import GraphCatalog
from pgmr.kg.ids import WIKIDATA_PREFIXES
from pgmr.kg.iris import is_iri, namespace_of
from pgmr.query.errors import IntermediateQueryError
from pgmr.query.lexer import Token, tokenize

# The prefixes a skeleton writes its placeholders with: any graph's kinds map onto Wikidata's two.
ENTITY_PREFIX = "wd"
RELATION_PREFIX = "wdt"


def _tokens(sparql: str) -> list[Token]:
    try:
        return [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError as exc:
        raise ConversionError("invalid_sparql", str(exc)) from None


def _declarations(tokens: list[Token]) -> dict[int, tuple[str, str]]:
    """Index of each `PREFIX name: <iri>` keyword -> (name, iri)."""
    found: dict[int, tuple[str, str]] = {}
    for i in range(len(tokens) - 2):
        kw, name, iri = tokens[i], tokens[i + 1], tokens[i + 2]
        if (
            kw.kind == "keyword"
            and kw.text.upper() == "PREFIX"
            and name.kind == "pname"
            and name.local == ""
            and iri.kind == "iri"
        ):
            found[i] = (name.prefix, iri.text[1:-1])
    return found


def declared_prefix_map(sparql: str) -> dict[str, str]:
    """The prefixes a query declares itself (name -> namespace); {} for text the lexer cannot read."""
    try:
        return dict(_declarations(_tokens(sparql)).values())
    except ConversionError:
        return {}


def _base(tokens: list[Token]) -> str | None:
    for i, tok in enumerate(tokens[:-1]):
        if tok.kind == "keyword" and tok.text.upper() == "BASE" and tokens[i + 1].kind == "iri":
            return tokens[i + 1].text[1:-1]
    return None


def iri_of(tok: Token, prefixes: dict[str, str], base: str | None = None) -> str | None:
    """The IRI a token names (a prefixed name with a known prefix, or `<...>`), else None."""
    if tok.kind == "pname" and tok.local and tok.prefix in prefixes:
        return prefixes[tok.prefix] + tok.local
    if tok.kind == "iri":
        iri = tok.text[1:-1]
        return iri if is_iri(iri) or base is None else urljoin(base, iri)
    return None


def _named_terms(tokens: list[Token]) -> list[int]:
    """Indexes of the tokens that may name a resource: not a declaration's, not a datatype (`^^x`), not a
    function name (`x(`)."""
    skip: set[int] = set()
    for i in _declarations(tokens):
        skip.update((i + 1, i + 2))
    for i, tok in enumerate(tokens):
        if tok.kind == "keyword" and tok.text.upper() == "BASE" and i + 1 < len(tokens):
            skip.add(i + 1)
    found = []
    for i, tok in enumerate(tokens):
        if i in skip or tok.kind not in ("pname", "iri"):
            continue
        if i > 1 and tokens[i - 1].text == "^" and tokens[i - 2].text == "^":
            continue  # a datatype; one '^' alone is an inverse path, whose property is a term
        if i + 1 < len(tokens) and tokens[i + 1].text == "(" and tokens[i + 1].start == tok.end:
            continue
        found.append(i)
    return found


def graph_skeleton(sparql: str, catalog: GraphCatalog) -> tuple[str, dict[str, str]]:
    """Gold SPARQL -> (compact skeleton with placeholders, placeholder -> IRI). Raises ConversionError."""
    tokens = _tokens(sparql)
    declarations = _declarations(tokens)
    prefixes = {**WIKIDATA_PREFIXES, **dict(declarations.values())}
    base = _base(tokens)
    namespaces = catalog.namespaces()
    names: dict[str, str] = {}
    counters = {"entity": 0, "relation": 0}
    written: dict[int, str] = {}
    for i in _named_terms(tokens):
        iri = iri_of(tokens[i], prefixes, base)
        if iri is None:
            continue
        entry = catalog.get(iri)
        if entry is None:
            if namespace_of(iri) in namespaces:
                raise ConversionError("missing_label", iri)
            continue
        if iri not in names:
            names[iri] = f"{entry.kind}{counters[entry.kind]}"
            counters[entry.kind] += 1
        written[i] = f"{ENTITY_PREFIX if entry.kind == 'entity' else RELATION_PREFIX}:{names[iri]}"
    kept = {t.prefix for i, t in enumerate(tokens) if t.kind == "pname" and t.local and i not in written}
    drop: set[int] = set()
    for i, (name, iri) in declarations.items():
        if name not in kept or WIKIDATA_PREFIXES.get(name) == iri:
            drop.update((i, i + 1, i + 2))
    pieces: list[str] = []
    last_end: int | None = None
    for i, tok in enumerate(tokens):
        if i in drop:
            continue
        if last_end is not None and sparql[last_end : tok.start]:
            pieces.append(" ")
        pieces.append(written.get(i, tok.text))
        last_end = tok.end
    return "".join(pieces).strip(), {name: iri for iri, name in names.items()}


def query_iris(sparql: str) -> list[str]:
    """Every IRI a query names as a term (`a` aside), in order, repeats kept: prefixed names expanded with its
    declarations and the standard prefixes; not datatypes, function names or declarations. [] for text the
    lexer cannot read."""
    try:
        tokens = _tokens(sparql)
    except ConversionError:
        return []
    prefixes = {**WIKIDATA_PREFIXES, **dict(_declarations(tokens).values())}
    base = _base(tokens)
    return [iri for i in _named_terms(tokens) if (iri := iri_of(tokens[i], prefixes, base)) is not None]


def raw_graph_iris(skeleton: str, is_entry: Callable[[str], bool], namespaces: frozenset[str]) -> list[str]:
    """IRIs a skeleton writes itself that the graph's memory names, or that lie in its namespaces: a
    generator's output must name those by placeholder (the memory's IRIs are never the model's), as a raw
    Wikidata ID is refused by the parser. Empty for text the lexer cannot read (the parser says why)."""
    try:
        tokens = _tokens(skeleton)
    except ConversionError:
        return []
    prefixes = {**WIKIDATA_PREFIXES, **dict(_declarations(tokens).values())}
    base = _base(tokens)
    found = []
    for i in _named_terms(tokens):
        tok = tokens[i]
        if tok.kind == "pname" and tok.prefix in (ENTITY_PREFIX, RELATION_PREFIX):
            continue  # a placeholder (or a Wikidata ID, which the parser refuses)
        iri = iri_of(tok, prefixes, base)
        if iri is not None and (is_entry(iri) or namespace_of(iri) in namespaces):
            found.append(iri)
    return found


__all__ = [
    "ENTITY_PREFIX",
    "RELATION_PREFIX",
    "declared_prefix_map",
    "graph_skeleton",
    "iri_of",
    "query_iris",
    "raw_graph_iris",
]
