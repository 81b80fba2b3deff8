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
from pathlib import Path
from typing import Any, Literal, Protocol, runtime_checkable

from pgmr.kg.ids import WIKIDATA_PREFIXES

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

    from pgmr.kg.stores.oxigraph_store import term_from_oxigraph

    inner = value.strip()
    if inner.startswith("<<(") and inner.endswith(")>>"):
        inner = inner[3:-3]
    (triple,) = [q.triple for q in ox.parse(f"{inner} .", ox.RdfFormat.N_TRIPLES)]
    parts = zip(
        ("subject", "predicate", "object"), (triple.subject, triple.predicate, triple.object), strict=True
    )
    return {name: term_from_oxigraph(t).to_json() for name, t in parts}


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

QueryForm = Literal["select", "ask", "construct", "describe"]
UPDATE_KEYWORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
_QUERY_FORMS = frozenset({"SELECT", "ASK", "CONSTRUCT", "DESCRIBE"})
_OX_POSITION = re.compile(r"error at (\d+):(\d+):?\s*")
_MAX_MESSAGE = 300
# `['0'..='9']`, `['A' ..= 'Z' | ...]`, `[_]`: a bracket of quoted characters, never the token `"["`.
_CHAR_CLASS = re.compile(r",?\s*\[(?:'[^']*'|[^\]'\"])*\]")


@dataclass(frozen=True)
class PreparedQuery:
    """A query that passed the gate: `text` declares the standard prefixes it uses."""

    text: str
    form: QueryForm


@lru_cache(maxsize=1)
def _parser_store() -> Any:
    import pyoxigraph

    return pyoxigraph.Store()


def _tokens(sparql: str) -> list[Any] | None:
    from pgmr.query.errors import IntermediateQueryError
    from pgmr.query.lexer import tokenize

    try:
        return [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError:
        return None


def _leading_keyword(tokens: list[Any] | None, sparql: str) -> tuple[str | None, Any]:
    """The first keyword after the prologue (BASE / PREFIX declarations) and its token."""
    if tokens is None:  # the lexer gave up (e.g. an open string): the first word will do for a verdict
        m = re.search(r"[A-Za-z]+", re.sub(r"#[^\n]*", "", sparql))
        return (m.group().upper() if m else None), None
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        word = tok.text.upper() if tok.kind == "keyword" else None
        if word == "BASE":
            i += 2
        elif word == "PREFIX":
            i += 3
        else:
            return word, tok
    return None, None


def _syntax_error(exc: Exception, shift: int) -> QuerySyntaxError:
    msg = " ".join(str(exc).split())
    m = _OX_POSITION.search(msg)
    line = column = None
    if m:
        line, column = int(m.group(1)) - shift, int(m.group(2))
        msg = _OX_POSITION.sub("", msg, count=1)
    # oxigraph lists the character classes it expected ('A' ..= 'Z' | ...): noise to a reader.
    msg = _CHAR_CLASS.sub("", msg)
    if len(msg) > _MAX_MESSAGE:
        msg = msg[:_MAX_MESSAGE] + " ..."
    where = f" at line {line}, column {column}" if line is not None and line > 0 else ""
    return QuerySyntaxError(f"invalid SPARQL query{where}: {msg}", line, column)


def _without_service_calls(text: str, tokens: list[Any] | None, offset: int) -> str:
    """The text with every `SERVICE [SILENT]` turned into `GRAPH`, padded to the same length: the grammar of
    the two is the same (`VarOrIri GroupGraphPattern`), so it parses alike and positions do not move, but
    evaluating it against an empty store can never call out to a remote endpoint."""
    if tokens is None:  # the lexer gave up; a blunt replacement is good enough for a parse check
        return re.sub(r"(?i)\bSERVICE(\s+SILENT)?\b", lambda m: "GRAPH".ljust(len(m.group())), text)
    chars = list(text)
    for i, tok in enumerate(tokens):
        if tok.kind == "keyword" and tok.text.upper() == "SERVICE":
            chars[offset + tok.start : offset + tok.end] = "GRAPH  "
            nxt = tokens[i + 1] if i + 1 < len(tokens) else None
            if nxt is not None and nxt.kind == "keyword" and nxt.text.upper() == "SILENT":
                chars[offset + nxt.start : offset + nxt.end] = " " * len(nxt.text)
    return "".join(chars)


def prepare_query(sparql: str) -> PreparedQuery:
    """Check that `sparql` is a SPARQL query and declare the standard prefixes it uses.

    Raises ReadOnlyError for SPARQL UPDATE and QuerySyntaxError for anything unparsable. The text is parsed
    by pyoxigraph against an empty private store; oxigraph evaluates while parsing only in part (ASK at once,
    SERVICE calls early), so the parsed copy has its SERVICE clauses turned into GRAPH ones: the check never
    reaches the network.
    """
    if not isinstance(sparql, str) or not sparql.strip():
        raise QuerySyntaxError("empty query: expected SELECT, ASK, CONSTRUCT or DESCRIBE")
    from pgmr.query.sparql import with_prefixes

    tokens = _tokens(sparql)
    keyword, _ = _leading_keyword(tokens, sparql)
    text = with_prefixes(sparql) if tokens is not None else sparql
    shift = text.count("\n") - sparql.count("\n")
    # with_prefixes only ever prepends, so the user's tokens sit at a fixed offset in `text`.
    probe = _without_service_calls(text, tokens, len(text) - len(sparql))
    try:
        result = _parser_store().query(probe)
    except SyntaxError as exc:
        if keyword in UPDATE_KEYWORDS:
            raise read_only_error(keyword) from None
        raise _syntax_error(exc, shift) from None
    except (OSError, ValueError, TypeError) as exc:  # odd inputs (NUL bytes, surrogates) land here
        raise QuerySyntaxError(f"invalid SPARQL query: {exc}") from None
    form: QueryForm
    if type(result).__name__ == "QueryBoolean":
        form = "ask"
    elif type(result).__name__ == "QueryTriples":
        form = "describe" if keyword == "DESCRIBE" else "construct"
    else:
        form = "select"
    return PreparedQuery(text, form)


def read_only_error(keyword: str | None = None) -> ReadOnlyError:
    what = f" ({keyword} is an update operation)" if keyword else ""
    return ReadOnlyError(
        f"SPARQL UPDATE is refused: pgmr only reads knowledge graphs, it never changes them{what}. "
        "Use SELECT, ASK, CONSTRUCT or DESCRIBE."
    )


def ensure_read_only(sparql: str) -> None:
    """Raise ReadOnlyError unless `sparql` is a query (SELECT/ASK/CONSTRUCT/DESCRIBE), QuerySyntaxError when
    it does not parse. Standard Wikidata prefixes (wd:, wdt:, p:, ps:, pq:, rdfs:, schema:, ...) may be used
    without declaring them."""
    prepare_query(sparql)


# --- opening stores -----------------------------------------------------------------------------------------

RDF_SUFFIXES = (".nt", ".ttl", ".nq", ".trig", ".n3", ".rdf", ".owl", ".xml", ".jsonld")


def default_kg_file(data_dir: Path) -> Path:
    """The small N-Triples graph derived from QALD-10 gold answers (196 triples), for end-to-end tests."""
    return Path(data_dir) / "kg" / "qald10_answer_derived.nt"


def is_rdf_file(path: Path) -> bool:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    return bool(suffixes) and suffixes[-1] in RDF_SUFFIXES


def open_store(spec: str | Path, *, timeout: float = 30.0) -> SparqlStore:
    """Open a store from a spec.

    - `http://...` / `https://...`: a SPARQL 1.1 protocol endpoint (HttpSparqlStore);
    - a directory, or `oxigraph:DIR`: an existing on-disk oxigraph store, opened read-only;
    - an RDF file (.nt, .ttl, .nq, ..., optionally .gz): an in-memory oxigraph store loaded from it.
    `timeout` (seconds) becomes the store's default per-query timeout.
    """
    text = str(spec).strip()
    if not text:
        raise StoreError("empty store spec: give an http(s) endpoint URL, a store directory or an RDF file")
    if timeout is None or timeout <= 0:
        raise StoreError(f"timeout must be a positive number of seconds, got {timeout!r}")
    if isinstance(spec, str) and re.match(r"^https?://", text, re.IGNORECASE):
        from pgmr.kg.stores.http_store import HttpSparqlStore

        return HttpSparqlStore(text, timeout=timeout)
    from pgmr.kg.stores.oxigraph_store import OxigraphStore

    if isinstance(spec, str) and text.startswith("oxigraph:"):
        return OxigraphStore.open(
            Path(text[len("oxigraph:") :]).expanduser(), read_only=True, timeout=timeout
        )
    path = Path(text).expanduser()
    if path.is_dir():
        return OxigraphStore.open(path, read_only=True, timeout=timeout)
    if not path.exists():
        raise StoreError(
            f"store {text!r} not found: give an http(s) endpoint URL, an oxigraph store directory "
            "or an RDF file (.nt, .ttl, .nq, optionally .gz)"
        )
    if not is_rdf_file(path):
        raise StoreError(
            f"{path} is not an RDF file pgmr can load (suffixes: {', '.join(RDF_SUFFIXES)}, .gz)"
        )
    return OxigraphStore.from_file(path, timeout=timeout)
