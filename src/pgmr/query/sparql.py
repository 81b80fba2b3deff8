"""SPARQL helpers: standard prefixes, and query comparison by rdflib algebra (the syntax gate is `gate`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pgmr.kg.ids import WIKIDATA_PREFIXES
from pgmr.query.errors import InvalidSparqlError
from pgmr.query.lexer import tokenize

# All standard prefixes on ONE line, so that parser error lines map back by subtracting one.
_PREFIX_LINE = " ".join(f"PREFIX {k}: <{v}>" for k, v in WIKIDATA_PREFIXES.items())


def used_prefixes(sparql: str) -> list[str]:
    """Prefixes of the prefixed names in a query, in order of first use."""
    seen: dict[str, None] = {}
    for tok in tokenize(sparql):
        if tok.kind == "pname":
            seen.setdefault(tok.prefix, None)
    return list(seen)


def declared_prefixes(sparql: str) -> set[str]:
    tokens = [t for t in tokenize(sparql) if t.kind != "comment"]
    return {
        tokens[i + 1].prefix
        for i, t in enumerate(tokens[:-1])
        if t.kind == "keyword" and t.text.upper() == "PREFIX" and tokens[i + 1].kind == "pname"
    }


def with_prefixes(sparql: str) -> str:
    """Prepend PREFIX declarations for the standard Wikidata prefixes the query uses but does not declare."""
    declared = declared_prefixes(sparql)
    missing = [p for p in used_prefixes(sparql) if p in WIKIDATA_PREFIXES and p not in declared]
    lines = [f"PREFIX {p}: <{WIKIDATA_PREFIXES[p]}>" for p in missing]
    return "\n".join([*lines, sparql]) if lines else sparql


def _canonical(node: Any, bnodes: dict[str, str]) -> Any:
    from rdflib.plugins.sparql.parserutils import CompValue
    from rdflib.term import BNode

    if isinstance(node, CompValue):
        return (
            node.name,
            tuple((k, _canonical(v, bnodes)) for k, v in node.items() if not k.startswith("_")),
        )
    if isinstance(node, dict):
        return tuple(sorted((str(k), _canonical(v, bnodes)) for k, v in node.items()))
    if isinstance(node, (list, tuple)):
        return tuple(_canonical(v, bnodes) for v in node)
    if isinstance(node, (set, frozenset)):
        return frozenset(_canonical(v, bnodes) for v in node)
    if isinstance(node, BNode):
        return ("_:", bnodes.setdefault(str(node), f"b{len(bnodes)}"))
    return node


def _rdflib_friendly(sparql: str) -> str:
    """Drop whitespace that rdflib's parser chokes on although SPARQL allows it: before a path modifier
    (`wdt:P279 *`) and inside a literal's language tag or datatype (`"x" @en`, `"1" ^^ xsd:integer`). Whitespace
    between tokens carries no meaning in SPARQL, so the query stays the same."""
    try:
        tokens = list(tokenize(sparql))
    except Exception:
        return sparql
    cut: list[tuple[int, int]] = []
    for prev, tok in zip(tokens, tokens[1:], strict=False):
        if prev.end == tok.start:
            continue
        path_modifier = tok.text in ("*", "+") and (prev.kind in ("pname", "iri") or prev.text == ")")
        # `"x" @en`, `"1" ^^ xsd:integer`: a literal's language tag or datatype set apart.
        literal_suffix = (tok.text in ("@", "^") and prev.kind == "string") or prev.text in ("^", "@")
        if path_modifier or literal_suffix:
            cut.append((prev.end, tok.start))
    for start, end in reversed(cut):
        sparql = sparql[:start] + sparql[end:]
    return sparql


def _parse(sparql: str) -> tuple[Any, bool]:
    """(rdflib algebra, whether its projected variables are unordered). Raises InvalidSparqlError."""
    from rdflib.plugins.sparql.algebra import translateQuery
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        tree = parseQuery(f"{_PREFIX_LINE}\n{_rdflib_friendly(sparql)}")
        # Only an explicit SELECT list orders the projected variables: for `SELECT *`, ASK, CONSTRUCT and
        # DESCRIBE rdflib lists them from a set, whose order changes between processes.
        unordered = not (tree[1].name == "SelectQuery" and "projection" in tree[1])
        return translateQuery(tree).algebra, unordered
    except Exception as exc:  # rdflib raises pyparsing and assorted errors
        raise InvalidSparqlError(f"rdflib cannot parse the query: {exc}") from None


def query_algebra(sparql: str, *, canonical: bool = False) -> Any:
    """The SPARQL algebra of a query as a hashable, comparable value (prefix forms and blank node labels
    normalized away). Raises InvalidSparqlError when rdflib cannot parse it.

    With `canonical`, also insensitive to the order of triple patterns inside a basic graph pattern, to
    variable (and blank node) names and to the order of unordered projections (`SELECT *`, ASK); see
    `_variable_namings`."""
    algebra, unordered = _parse(sparql)
    if not canonical:
        return _canonical(algebra, {})
    forms = [
        _Canonicalizer(names, unordered).form(algebra) for names in _variable_namings(algebra, unordered)
    ]
    return min(forms, key=repr) if len(forms) > 1 else forms[0]


def same_query(a: str, b: str, *, canonical: bool = False) -> bool:
    """Same algebra: same triple patterns, filters and modifiers after parsing both (with `canonical`: up to
    triple-pattern order inside a BGP and a renaming of variables)."""
    return query_algebra(a, canonical=canonical) == query_algebra(b, canonical=canonical)


def _is_variable(term: Any) -> bool:
    from rdflib.term import BNode, Variable

    return isinstance(term, Variable | BNode)


def _bgp_triples(node: Any) -> list[tuple[Any, ...]]:
    """Every triple pattern of every BGP, in tree order."""
    from rdflib.plugins.sparql.parserutils import CompValue

    found: list[tuple[Any, ...]] = []
    if isinstance(node, CompValue):
        if node.name == "BGP":
            found.extend(tuple(t) for t in node.get("triples") or ())
        for key, value in node.items():
            if not key.startswith("_"):
                found.extend(_bgp_triples(value))
    elif isinstance(node, list | tuple):
        for value in node:
            found.extend(_bgp_triples(value))
    return found


def _variables_in_order(node: Any) -> list[Any]:
    """Variables and blank nodes in tree order. Sets are skipped, and so are projection lists (PV), which
    rdflib fills from a set unless the query has an explicit SELECT list: their order is not stable."""
    from rdflib.plugins.sparql.parserutils import CompValue

    if _is_variable(node):
        return [node]
    found: list[Any] = []
    if isinstance(node, CompValue):
        for key, value in node.items():
            if not key.startswith("_") and key != "PV":
                found.extend(_variables_in_order(value))
    elif isinstance(node, dict):
        for key, value in node.items():
            found.extend(_variables_in_order(key))
            found.extend(_variables_in_order(value))
    elif isinstance(node, list | tuple):
        for value in node:
            found.extend(_variables_in_order(value))
    return found


# Ties explored at most (see `_variable_namings`); real queries have a handful at most.
_MAX_NAMINGS = 64


def _variable_namings(algebra: Any, unordered: bool) -> list[dict[Any, str]]:
    """Canonical names (v0, v1, ...) for the variables and blank nodes of a query, chosen without looking at
    their written names, so that two queries that differ only by a renaming get the same names:

    1. the projected variables, in SELECT order (not for `SELECT *` or ASK: no order to follow);
    2. then, repeatedly, the unnamed variables of the smallest triple pattern that still has one, where
       patterns are compared with named variables written by their new name and unnamed ones as `?`;
    3. then any other variable (BIND targets, aggregates, filters) in the order of the algebra tree.

    When several patterns tie for smallest in step 2 (`?x wdt:P451 ?a , ?b`), each choice is followed and
    every resulting naming returned; the caller keeps the smallest canonical form, which makes the result
    independent of names. Past `_MAX_NAMINGS` choices the first naming found is used for the rest, which can
    make two equivalent queries compare unequal, never the reverse: equal canonical forms always mean the
    queries are the same up to renaming and pattern order."""
    constants = _Canonicalizer({}, unordered)
    triples = [t for t in _bgp_triples(algebra) if any(_is_variable(x) for x in t)]
    tree_order = _variables_in_order(algebra)
    results: list[dict[Any, str]] = []

    def named(names: dict[Any, str], terms: Iterable[Any]) -> dict[Any, str]:
        names = dict(names)
        for term in terms:
            if _is_variable(term) and term not in names:
                names[term] = f"v{len(names)}"
        return names

    def key(names: dict[Any, str], triple: tuple[Any, ...]) -> str:
        return repr(
            [("?", names.get(x, "")) if _is_variable(x) else ("=", repr(constants.form(x))) for x in triple]
        )

    def extend(names: dict[Any, str]) -> None:
        pending = [t for t in triples if any(_is_variable(x) and x not in names for x in t)]
        if not pending:
            results.append(named(names, tree_order))
            return
        keys = [key(names, t) for t in pending]
        smallest = min(keys)
        tied = [t for t, k in zip(pending, keys, strict=True) if k == smallest]
        for triple in tied if len(results) < _MAX_NAMINGS else tied[:1]:
            extend(named(names, triple))

    extend(named({}, () if unordered else algebra.get("PV") or ()))
    return results


class _Canonicalizer:
    """The comparable form of an algebra tree with variables renamed and BGPs as sorted pattern lists."""

    def __init__(self, names: dict[Any, str], unordered: bool) -> None:
        self.names = names
        self.unordered = unordered

    def form(self, node: Any) -> Any:
        from rdflib.plugins.sparql.parserutils import CompValue

        if _is_variable(node):
            # Variables outside the naming walk (only inside sets) keep a name-dependent form.
            return ("?", self.names.get(node, f"free:{node}"))
        if isinstance(node, CompValue):
            items = []
            for k, v in node.items():
                if k.startswith("_"):
                    continue
                if node.name == "BGP" and k == "triples":
                    value: Any = tuple(sorted((self.form(tuple(t)) for t in v or ()), key=repr))
                elif k == "PV" and self.unordered:
                    value = tuple(sorted((self.form(x) for x in v or ()), key=repr))
                else:
                    value = self.form(v)
                items.append((k, value))
            return (node.name, tuple(items))
        if isinstance(node, dict):
            return tuple(sorted(((self.form(k), self.form(v)) for k, v in node.items()), key=repr))
        if isinstance(node, list | tuple):
            return tuple(self.form(v) for v in node)
        if isinstance(node, set | frozenset):
            return frozenset(self.form(v) for v in node)
        return node
