"""The SPARQL store seam: one read-only `query()` over an embedded oxigraph store or a SPARQL endpoint.

Everything that executes SPARQL in pgmr goes through a `SparqlStore`. Results come back as plain frozen values
(`QueryResult` of `Term`s), whatever the backend, so callers never see pyoxigraph or HTTP types. Every backend
calls `prepare_query` first: the standard Wikidata prefixes are declared, the text must parse as a SPARQL
query, and anything else (SPARQL UPDATE, LOAD, CLEAR, ...) is refused before it reaches any store.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, Protocol, runtime_checkable

from pgmr.kg.ids import WIKIDATA_PREFIXES
from pgmr.query import gate
from pgmr.query.errors import IntermediateQueryError, InvalidSparqlError, ReadOnlyQueryError
from pgmr.query.gate import PreparedQuery
from pgmr.query.lexer import tokenize

TermKind = Literal["iri", "literal", "bnode", "triple"]
ResultKind = Literal["bindings", "boolean", "graph"]

XSD_STRING = "http://www.w3.org/2001/XMLSchema#string"
RDF_LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
GRAPH_VARIABLES = ("s", "p", "o")


# --- errors -------------------------------------------------------------------------------------------------


class StoreError(Exception):
    """A SPARQL store could not answer; the message says why in words a user can act on."""

    code = "store_error"


class StoreTimeout(StoreError):
    code = "timeout"


class StoreUnavailable(StoreError):
    """Connection refused, DNS failure, or 429/5xx answers that outlasted the retries."""

    code = "unavailable"


class StoreBadResponse(StoreError):
    """The endpoint answered, but not with something readable: a body cut short, a results document that does
    not parse, or a media type that is not SPARQL results (an HTML error page from a proxy, say)."""

    code = "bad_response"


class ReadOnlyError(StoreError):
    """SPARQL UPDATE (INSERT, DELETE, LOAD, CLEAR, DROP, CREATE, ...) refused before reaching any store."""

    code = "read_only"


class ServiceRefusedError(StoreError):
    """A query with a SERVICE clause refused by a store that would otherwise call the endpoint it names.

    `endpoints` lists what the clauses name as written (`<http://...>`, `wikibase:label`, `?var`); empty when
    the clause was found without its name."""

    code = "service_refused"

    def __init__(self, message: str, endpoints: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.endpoints = endpoints


class QuerySyntaxError(StoreError):
    """The text is not a SPARQL query. `line`/`column` (1-based, in the text as given) when the parser says."""

    code = "syntax"

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        super().__init__(message)
        self.line = line
        self.column = column


# --- values -------------------------------------------------------------------------------------------------


def _escape_literal(value: str) -> str:
    return (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("\n", "\\n")
        .replace("\r", "\\r")
        .replace("\t", "\\t")
    )


_PN_LOCAL = re.compile(r"^[\w\-]([\w\-.]*[\w\-])?$", re.UNICODE)


def shorten_iri(iri: str, prefixes: Mapping[str, str] = WIKIDATA_PREFIXES) -> str:
    """`http://www.wikidata.org/entity/Q64` -> `wd:Q64`; IRIs no prefix fits stay `<...>`."""
    best: tuple[str, str] | None = None
    for name, base in prefixes.items():
        if iri.startswith(base) and (best is None or len(base) > len(prefixes[best[0]])):
            local = iri[len(base) :]
            if _PN_LOCAL.match(local):
                best = (name, local)
    return f"{best[0]}:{best[1]}" if best else f"<{iri}>"


@dataclass(frozen=True)
class Term:
    """One RDF term of a result row.

    Literals are normalized the way SPARQL JSON results write them: a simple literal has `datatype=None`
    (not xsd:string) and a language-tagged one has `language` set and `datatype=None` (not rdf:langString), so
    that answers compare equal whichever backend produced them. A "triple" (RDF 1.2 triple term) carries its
    N-Triples form `<<( s p o )>>` as value.
    """

    kind: TermKind
    value: str
    datatype: str | None = None
    language: str | None = None

    @classmethod
    def iri(cls, value: str) -> Term:
        return cls("iri", value)

    @classmethod
    def literal(cls, value: str, datatype: str | None = None, language: str | None = None) -> Term:
        if language:
            return cls("literal", value, None, language.lower())
        return cls("literal", value, None if datatype in (None, XSD_STRING, RDF_LANG_STRING) else datatype)

    @classmethod
    def bnode(cls, value: str) -> Term:
        return cls("bnode", value)

    def to_sparql(self) -> str:
        """N-Triples / SPARQL syntax of the term (full IRIs)."""
        if self.kind == "iri":
            return f"<{self.value}>"
        if self.kind == "bnode":
            return f"_:{self.value}"
        if self.kind == "triple":
            return self.value
        text = f'"{_escape_literal(self.value)}"'
        if self.language:
            return f"{text}@{self.language}"
        return f"{text}^^<{self.datatype}>" if self.datatype else text

    def short(self, prefixes: Mapping[str, str] = WIKIDATA_PREFIXES) -> str:
        """Compact display form: `wd:Q64`, `"Berlin"@en`, `"3"^^xsd:integer`."""
        if self.kind == "iri":
            return shorten_iri(self.value, prefixes)
        if self.kind == "literal" and self.datatype:
            return f'"{_escape_literal(self.value)}"^^{shorten_iri(self.datatype, prefixes)}'
        return self.to_sparql()

    def to_json(self) -> dict[str, Any]:
        """The term as a SPARQL 1.1 JSON results binding."""
        if self.kind == "literal":
            d: dict[str, Any] = {"type": "literal", "value": self.value}
            if self.language:
                d["xml:lang"] = self.language
            elif self.datatype:
                d["datatype"] = self.datatype
            return d
        if self.kind == "triple":
            return {"type": "triple", "value": _triple_parts_json(self.value)}
        return {"type": "uri" if self.kind == "iri" else "bnode", "value": self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Term:
        """Parse a SPARQL JSON results binding (also the legacy `typed-literal` and RDF-star `triple`)."""
        kind = data.get("type")
        value = data.get("value")
        if kind == "uri":
            return cls.iri(str(value))
        if kind == "bnode":
            return cls.bnode(str(value))
        if kind in ("literal", "typed-literal"):
            return cls.literal(str(value), data.get("datatype"), data.get("xml:lang") or data.get("lang"))
        if kind == "triple" and isinstance(value, Mapping):
            parts = [cls.from_json(value[k]).to_sparql() for k in ("subject", "predicate", "object")]
            return cls("triple", f"<<( {' '.join(parts)} )>>")
        raise ValueError(f"not a SPARQL JSON results term: {dict(data)!r}")


def _triple_parts_json(value: str) -> dict[str, Any]:
    """`<<( s p o )>>` as the SPARQL JSON results object of a triple term, read back by oxigraph."""
    import pyoxigraph as ox

    inner = value.strip()
    if inner.startswith("<<(") and inner.endswith(")>>"):
        inner = inner[3:-3]
    (triple,) = [q.triple for q in ox.parse(f"{inner} .", ox.RdfFormat.N_TRIPLES)]
    parts = zip(
        ("subject", "predicate", "object"), (triple.subject, triple.predicate, triple.object), strict=True
    )
    return {name: term_from_oxigraph(t).to_json() for name, t in parts}


def term_from_oxigraph(term: Any) -> Term:
    import pyoxigraph as ox

    """A pyoxigraph NamedNode / BlankNode / Literal / Triple as a `Term`."""
    if isinstance(term, ox.NamedNode):
        return Term.iri(term.value)
    if isinstance(term, ox.BlankNode):
        return Term.bnode(term.value)
    if isinstance(term, ox.Literal):
        return Term.literal(term.value, term.datatype.value, term.language)
    if isinstance(term, ox.Triple):
        parts = (term_from_oxigraph(x).to_sparql() for x in (term.subject, term.predicate, term.object))
        return Term("triple", f"<<( {' '.join(parts)} )>>")
    raise StoreError(f"unexpected RDF term from oxigraph: {term!r}")


@dataclass(frozen=True)
class QueryResult:
    """The answer to one query. `rows` of a "graph" result have the keys s, p, o; unbound variables are
    absent from a row's mapping."""

    kind: ResultKind
    variables: tuple[str, ...] = ()
    rows: tuple[Mapping[str, Term], ...] = field(default=())
    boolean: bool | None = None

    def values(self) -> list[Term]:
        """Every bound value of every row, row by row in variable order (the answers)."""
        return [row[v] for row in self.rows for v in self.variables if v in row]

    def __len__(self) -> int:
        return len(self.rows)

    def to_json(self) -> dict[str, Any]:
        """SPARQL 1.1 JSON results; a graph result is written as bindings of ?s ?p ?o."""
        if self.kind == "boolean":
            return {"head": {}, "boolean": bool(self.boolean)}
        return {
            "head": {"vars": list(self.variables)},
            "results": {"bindings": [{k: t.to_json() for k, t in row.items()} for row in self.rows]},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> QueryResult:
        """Parse SPARQL 1.1 JSON results. Raises ValueError on anything else."""
        if not isinstance(data, Mapping):
            raise ValueError("SPARQL JSON results must be an object")
        if "boolean" in data:
            return cls("boolean", boolean=bool(data["boolean"]))
        head = data.get("head") or {}
        bindings = (data.get("results") or {}).get("bindings")
        if not isinstance(bindings, list):
            raise ValueError("SPARQL JSON results without results.bindings")
        variables = tuple(head.get("vars") or ())
        rows = tuple({k: Term.from_json(v) for k, v in b.items()} for b in bindings)
        if not variables:  # some endpoints omit head.vars; keep first-seen order
            seen: dict[str, None] = {}
            for row in rows:
                seen.update(dict.fromkeys(row))
            variables = tuple(seen)
        return cls("bindings", variables, rows)


# --- the seam -----------------------------------------------------------------------------------------------


@runtime_checkable
class SparqlStore(Protocol):
    def query(self, sparql: str, *, timeout: float | None = None) -> QueryResult: ...

    def close(self) -> None: ...


# --- the read-only gate -------------------------------------------------------------------------------------
# The gate itself lives in `pgmr.query.gate` (one gate for everything pgmr parses or runs); stores raise its
# verdicts as store errors, so a caller of `query()` catches one family.


def prepare_query(sparql: str) -> PreparedQuery:
    """`pgmr.query.gate.prepare_query` with its errors as store errors (ReadOnlyError, QuerySyntaxError)."""
    try:
        return gate.prepare_query(sparql)
    except ReadOnlyQueryError as exc:
        raise ReadOnlyError(exc.message) from None
    except InvalidSparqlError as exc:
        where = f" at line {exc.line}, column {exc.column}" if exc.line is not None and exc.line > 0 else ""
        raise QuerySyntaxError(
            f"invalid SPARQL query{where}: {gate.detail_of(exc)}", exc.line, exc.column
        ) from None


# --- SERVICE clauses ----------------------------------------------------------------------------------------
# The embedded store evaluates SERVICE by calling the endpoint it names, from the machine pgmr runs on: a model
# (or a user of `pgmr serve`) that writes one makes the server send requests of their choosing (server-side
# request forgery). Stores that would do so refuse such queries unless told otherwise.

_SERVICE_WORD = re.compile(r"service", re.IGNORECASE | re.ASCII)
# Same length as "service", so that it fits wherever the word can stand without being the keyword: in a
# string, IRI, comment, prefixed name, variable or language tag.
_NOT_SERVICE = "zzzzzzz"


@lru_cache(maxsize=1)
def _probe_store() -> Any:
    import pyoxigraph as ox

    return ox.Store()


def service_calls(sparql: str) -> tuple[str, ...]:
    """The endpoints the SERVICE clauses of a query name, as written (`<http://...>`, `wikibase:label`,
    `?var`); empty when it has none. `sparql` is a query that passed `prepare_query`.

    Oxigraph matches keywords in ASCII case only, so a text without the letters "service" has no SERVICE
    clause. Otherwise pgmr's lexer names the endpoints. Where it sees none (the word is in a string, an IRI, a
    comment, a name... or the lexer was misled, e.g. by a `\\#` escape in a prefixed name, which it takes for
    the start of a comment), every occurrence is masked and the text parsed again, which cannot reach the
    network: if the masked text no longer parses, an occurrence was the keyword, named `""` here.
    """
    if not _SERVICE_WORD.search(sparql):
        return ()
    try:
        tokens = [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError:
        tokens = []
    endpoints: list[str] = []
    for i, tok in enumerate(tokens):
        if tok.kind == "keyword" and tok.text.upper() == "SERVICE":
            rest = tokens[i + 1 : i + 3]
            if rest and rest[0].kind == "keyword" and rest[0].text.upper() == "SILENT":
                rest = rest[1:]
            endpoints.append(rest[0].text if rest else "")
    if endpoints:
        return tuple(endpoints)
    try:
        _probe_store().query(_SERVICE_WORD.sub(_NOT_SERVICE, sparql))
    except (SyntaxError, OSError, ValueError, TypeError):
        return ("",)
    return ()


def refuse_service_calls(sparql: str, where: str) -> None:
    """Raise ServiceRefusedError when `sparql` has a SERVICE clause; `where` names the store in the message."""
    endpoints = service_calls(sparql)
    if not endpoints:
        return
    named = ", ".join(e for e in endpoints if e)
    raise ServiceRefusedError(
        f"SERVICE {named + ' ' if named else ''}is refused: {where} would send a request to the endpoint a "
        "SERVICE clause names (federated queries are off; open the store with allow_service=True to run them)",
        endpoints,
    )


def ensure_read_only(sparql: str) -> None:
    """Raise ReadOnlyError unless `sparql` is a query (SELECT/ASK/CONSTRUCT/DESCRIBE), QuerySyntaxError when
    it does not parse. Standard Wikidata prefixes (wd:, wdt:, p:, ps:, pq:, rdfs:, schema:, ...) may be used
    without declaring them."""
    prepare_query(sparql)
