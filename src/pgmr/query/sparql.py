"""Real SPARQL parsing: syntax checks with pyoxigraph (fast) and algebra comparison with rdflib."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from pgmr.kg.ids import WIKIDATA_PREFIXES
from pgmr.query.errors import InvalidSparqlError
from pgmr.query.lexer import tokenize

# All standard prefixes on ONE line, so that parser error lines map back by subtracting one.
_PREFIX_LINE = " ".join(f"PREFIX {k}: <{v}>" for k, v in WIKIDATA_PREFIXES.items())
_OX_POSITION = re.compile(r"error at (\d+):(\d+)")


@lru_cache(maxsize=1)
def _empty_store() -> Any:
    import pyoxigraph

    return pyoxigraph.Store()


def check_query(sparql: str) -> None:
    """Raise InvalidSparqlError unless `sparql` parses as a SPARQL 1.1 query (standard prefixes predeclared).

    Parsing is done by evaluating against an empty in-memory store without consuming results: oxigraph parses
    eagerly and evaluates lazily, so nothing (not even a SERVICE call) is executed.
    """
    try:
        _empty_store().query(f"{_PREFIX_LINE}\n{sparql}")
    except SyntaxError as exc:
        msg = str(exc)
        m = _OX_POSITION.search(msg)
        line, column = (int(m.group(1)) - 1, int(m.group(2))) if m else (None, None)
        detail = _OX_POSITION.sub("", msg).lstrip(": ")
        raise InvalidSparqlError(f"not a valid SPARQL query: {detail}", line, column) from None
    except Exception as exc:  # oxigraph raises OSError/ValueError/TypeError for odd inputs
        raise InvalidSparqlError(f"not a valid SPARQL query: {exc}") from None


def is_valid_query(sparql: str) -> bool:
    try:
        check_query(sparql)
    except InvalidSparqlError:
        return False
    return True


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


def query_algebra(sparql: str) -> Any:
    """The SPARQL algebra of a query as a hashable, comparable value (prefix forms and blank node labels
    normalized away). Raises InvalidSparqlError when rdflib cannot parse it."""
    from rdflib.plugins.sparql.algebra import translateQuery
    from rdflib.plugins.sparql.parser import parseQuery

    try:
        algebra = translateQuery(parseQuery(f"{_PREFIX_LINE}\n{_rdflib_friendly(sparql)}")).algebra
    except Exception as exc:  # rdflib raises pyparsing and assorted errors
        raise InvalidSparqlError(f"rdflib cannot parse the query: {exc}") from None
    return _canonical(algebra, {})


def same_query(a: str, b: str) -> bool:
    """Same algebra: same triple patterns, filters and modifiers after parsing both."""
    return query_algebra(a) == query_algebra(b)
