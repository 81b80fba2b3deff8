"""The one SPARQL gate: every SPARQL text pgmr checks, parses or sends to a store passes `prepare_query`.

It declares the standard Wikidata prefixes a text uses, refuses SPARQL UPDATE (pgmr only reads), and checks
that the rest parses as a SPARQL 1.1 query, returning its form. The text is parsed by pyoxigraph against an
empty private store; oxigraph evaluates while parsing only in part (ASK at once, SERVICE calls early), so the
parsed copy has its SERVICE clauses turned into GRAPH ones: the gate never reaches the network, whatever a
model wrote.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from pgmr.query.errors import IntermediateQueryError, InvalidSparqlError, ReadOnlyQueryError
from pgmr.query.lexer import Token, tokenize
from pgmr.query.sparql import with_prefixes

QueryForm = Literal["select", "ask", "construct", "describe"]
UPDATE_KEYWORDS = frozenset(
    {"INSERT", "DELETE", "LOAD", "CLEAR", "DROP", "CREATE", "ADD", "MOVE", "COPY", "WITH"}
)
_OX_POSITION = re.compile(r"error at (\d+):(\d+):?\s*")
_MAX_MESSAGE = 300
# `['0'..='9']`, `['A' ..= 'Z' | ...]`, `[_]`: a bracket of quoted characters, never the token `"["`.
_CHAR_CLASS = re.compile(r",?\s*\[(?:'[^']*'|[^\]'\"])*\]")
_READ_ONLY = (
    "SPARQL UPDATE is refused: pgmr only reads knowledge graphs, it never changes them{what}. "
    "Use SELECT, ASK, CONSTRUCT or DESCRIBE."
)


@dataclass(frozen=True)
class PreparedQuery:
    """A query that passed the gate: `text` declares the standard prefixes it uses."""

    text: str
    form: QueryForm


@lru_cache(maxsize=1)
def _parser_store() -> Any:
    import pyoxigraph

    return pyoxigraph.Store()


def _tokens(sparql: str) -> list[Token] | None:
    try:
        return [t for t in tokenize(sparql) if t.kind != "comment"]
    except IntermediateQueryError:
        return None


def _leading_keyword(tokens: list[Token] | None, sparql: str) -> tuple[str | None, int | None]:
    """The first keyword after the prologue (BASE / PREFIX declarations), and where it starts."""
    if tokens is None:  # the lexer gave up (e.g. an open string): the first word will do for a verdict
        m = re.search(r"[A-Za-z]+", re.sub(r"#[^\n]*", "", sparql))
        return (m.group().upper(), None) if m else (None, None)
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        word = tok.text.upper() if tok.kind == "keyword" else None
        if word == "BASE":
            i += 2
        elif word == "PREFIX":
            i += 3
        else:
            return word, tok.start
    return None, None


def _syntax_error(exc: Exception, shift: int) -> InvalidSparqlError:
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
    return _invalid(msg, line if line is not None and line > 0 else None, column)


def _invalid(detail: str, line: int | None = None, column: int | None = None) -> InvalidSparqlError:
    error = InvalidSparqlError(f"invalid SPARQL query: {detail}", line, column)
    error.detail = detail  # type: ignore[attr-defined]
    return error


def detail_of(error: InvalidSparqlError) -> str:
    """What the parser said, without the "invalid SPARQL query" lead (stores add their own)."""
    return str(getattr(error, "detail", error.message))


def _without_service_calls(text: str, tokens: list[Token] | None, offset: int) -> str:
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


def read_only_error(
    keyword: str | None = None, sparql: str = "", offset: int | None = None
) -> ReadOnlyQueryError:
    """The refusal of an UPDATE; `offset` (of the keyword in `sparql`) gives it a 1-based line and column."""
    what = f" ({keyword} is an update operation)" if keyword else ""
    line = column = None
    if offset is not None:
        line = sparql.count("\n", 0, offset) + 1
        column = offset - (sparql.rfind("\n", 0, offset) + 1) + 1
    return ReadOnlyQueryError(_READ_ONLY.format(what=what), line, column)


_CUSTOM_FUNCTION = re.compile(r"custom function <([^>]*)> is not supported")
_MAX_CUSTOM_FUNCTIONS = 64


def _evaluate_on_empty_store(probe: str) -> Any:
    """Run the probe on the empty parser store. A call to an extension function (`FILTER wd:(?x)`,
    `geof:distance(...)`) is valid SPARQL that oxigraph parses and then refuses to evaluate; such a function is
    declared as one that returns nothing, so the check is about syntax, as it should be, and the query form is
    still read from oxigraph's result."""
    import pyoxigraph

    functions: dict[Any, Any] = {}
    while True:
        try:
            return _parser_store().query(probe, custom_functions=functions or None)
        except RuntimeError as exc:
            m = _CUSTOM_FUNCTION.search(str(exc))
            if m is None or len(functions) >= _MAX_CUSTOM_FUNCTIONS:
                raise ValueError(str(exc)) from None
            name = pyoxigraph.NamedNode(m.group(1))
            if name in functions:
                raise ValueError(str(exc)) from None
            functions[name] = lambda *args: None


def prepare_query(sparql: str) -> PreparedQuery:
    """Check that `sparql` is a read-only SPARQL query and declare the standard prefixes it uses.

    Raises ReadOnlyQueryError for SPARQL UPDATE and InvalidSparqlError for anything unparsable.
    """
    if not isinstance(sparql, str) or not sparql.strip():
        raise _invalid("empty query: expected SELECT, ASK, CONSTRUCT or DESCRIBE")
    tokens = _tokens(sparql)
    keyword, offset = _leading_keyword(tokens, sparql)
    text = with_prefixes(sparql) if tokens is not None else sparql
    shift = text.count("\n") - sparql.count("\n")
    # with_prefixes only ever prepends, so the user's tokens sit at a fixed offset in `text`.
    probe = _without_service_calls(text, tokens, len(text) - len(sparql))
    # The lexer can be misled (it reads an escaped `\#` in a name as a comment): no "service" in any case that
    # it missed may reach the parser, where a real keyword would be a network call. Elsewhere, same length.
    probe = re.sub(r"service", "zzzzzzz", probe, flags=re.IGNORECASE | re.ASCII)
    try:
        result = _evaluate_on_empty_store(probe)
    except SyntaxError as exc:
        if keyword in UPDATE_KEYWORDS:
            raise read_only_error(keyword, sparql, offset) from None
        raise _syntax_error(exc, shift) from None
    except (OSError, ValueError, TypeError) as exc:  # odd inputs (NUL bytes, surrogates) land here
        raise _invalid(str(exc)) from None
    form: QueryForm
    if type(result).__name__ == "QueryBoolean":
        form = "ask"
    elif type(result).__name__ == "QueryTriples":
        form = "describe" if keyword == "DESCRIBE" else "construct"
    else:
        form = "select"
    return PreparedQuery(text, form)


def check_query(sparql: str) -> None:
    """Raise InvalidSparqlError unless `sparql` parses as a SPARQL 1.1 query (standard prefixes predeclared);
    an UPDATE is not a query, so it fails too (as ReadOnlyQueryError, an InvalidSparqlError)."""
    prepare_query(sparql)


def is_valid_query(sparql: str) -> bool:
    try:
        prepare_query(sparql)
    except InvalidSparqlError:
        return False
    return True


__all__ = [
    "UPDATE_KEYWORDS",
    "PreparedQuery",
    "QueryForm",
    "check_query",
    "detail_of",
    "is_valid_query",
    "prepare_query",
    "read_only_error",
]
