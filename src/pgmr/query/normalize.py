"""The normal form of a SPARQL query that Query EM compares, and the Wikidata IDs a query mentions.

Both read the lexer's tokens, so they also work on broken model output; definitions and examples are in
docs/metrics.md.
"""

from __future__ import annotations

from pgmr.kg.ids import WIKIDATA_PREFIXES, iri_to_prefixed
from pgmr.query.errors import UnterminatedTokenError
from pgmr.query.lexer import Token, tokenize

# A '.' before one of these (or right after a '}') ends nothing and may be left out: SPARQL's grammar makes
# it optional there, so `{ ?s ?p ?o . }` and `{ ?s ?p ?o }` normalize alike.
_OPTIONAL_DOT_BEFORE = {"}", "{", "OPTIONAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES"}
_TWO_CHAR_OPERATORS = {"<=", ">=", "!=", "&&", "||", "^^"}


def _lex(text: str) -> list[Token]:
    """Lexer tokens without comments; an unclosed string literal becomes one string token to the end, so
    that broken model output still tokenizes (and its IDs are still counted)."""
    tokens: list[Token] = []
    try:
        tokens.extend(t for t in tokenize(text) if t.kind != "comment")
    except UnterminatedTokenError:
        start = tokens[-1].end if tokens else 0
        quotes = [i for i in (text.find("'", start), text.find('"', start)) if i >= 0]
        begin = min(quotes) if quotes else start
        tokens.append(Token("string", text[begin:], begin, len(text)))
    return tokens


def _quote(literal: str) -> str:
    """'x' -> "x" (same literal) when that needs no escaping; long and double-quoted strings stay."""
    closed = len(literal) >= 2 and literal.endswith("'")  # an unclosed literal of broken output stays as is
    if closed and literal.startswith("'") and not literal.startswith("'''") and '"' not in literal:
        return f'"{literal[1:-1]}"'
    return literal


def sparql_tokens(sparql: str) -> list[str]:
    """Normalized tokens of a SPARQL query (the unit of Query EM and BLEU):

    - comments dropped; PREFIX declarations dropped and every prefixed name with a declared or standard
      Wikidata prefix written as its full IRI `<...>`;
    - keywords and function names upper-cased (not `a`, not language tags, nothing inside literals or IRIs);
    - variables renamed `?v0`, `?v1`, ... in order of first appearance (`$x` and `?x` are one variable);
    - a literal with its language tag (lower-cased) or datatype (expanded) is one token; 'x' becomes "x";
    - decimals (`1.5`) and two-character operators (`<=`, `!=`, `&&`, `^^` ...) are one token;
    - a '.' where the grammar makes it optional (before `}`, `{`, FILTER, OPTIONAL, ...; after `}`; at the
      end) is dropped.
    """
    lexed = _lex(sparql)
    prefixes = dict(WIKIDATA_PREFIXES)
    variables: dict[str, str] = {}
    out: list[str] = []

    def adjacent(i: int) -> bool:
        return i + 1 < len(lexed) and lexed[i].end == lexed[i + 1].start

    def expand(tok: Token) -> str:
        if tok.kind == "pname" and tok.prefix in prefixes:
            return f"<{prefixes[tok.prefix]}{tok.local}>"
        return tok.text

    def emit(text: str) -> None:
        if text == "." and out and out[-1] == "}":
            return
        if text in _OPTIONAL_DOT_BEFORE and out and out[-1] == ".":
            out.pop()
        out.append(text)

    i = 0
    while i < len(lexed):
        tok = lexed[i]
        upper = tok.text.upper()
        if (
            tok.kind == "keyword"
            and upper == "PREFIX"
            and i + 2 < len(lexed)
            and lexed[i + 1].kind == "pname"
            and lexed[i + 1].text.endswith(":")
            and lexed[i + 2].kind == "iri"
        ):
            prefixes[lexed[i + 1].prefix] = lexed[i + 2].text[1:-1]
            i += 3
            continue
        if tok.kind == "string":
            literal = _quote(tok.text)
            i += 1
            if i < len(lexed) and lexed[i].text == "@" and lexed[i - 1].end == lexed[i].start:
                # Language tag: `@en`, `@en-GB` (the lexer splits it at '-'); tags are case-insensitive.
                tag = ""
                while adjacent(i) and (lexed[i + 1].kind == "keyword" or lexed[i + 1].text == "-"):
                    i += 1
                    tag += lexed[i].text
                literal += "@" + tag.lower()
                i += 1
            elif (
                i + 2 < len(lexed)
                and lexed[i].text == "^"
                and adjacent(i)
                and lexed[i + 1].text == "^"
                and lexed[i + 2].kind in ("pname", "iri")
            ):
                literal += "^^" + expand(lexed[i + 2])
                i += 3
            emit(literal)
            continue
        if tok.kind == "other" and tok.text[0] in "?$" and len(tok.text) > 1:
            name = tok.text[1:]
            emit(variables.setdefault(name, f"?v{len(variables)}"))
        elif tok.kind == "keyword" and tok.text[0].isdigit():
            number = tok.text
            # `1.5` arrives as `1` `.` `5`; `1 .` (an integer ending a triple) stays apart.
            if (
                adjacent(i)
                and lexed[i + 1].text == "."
                and adjacent(i + 1)
                and lexed[i + 2].kind == "keyword"
                and lexed[i + 2].text[0].isdigit()
            ):
                number += "." + lexed[i + 2].text
                i += 2
            emit(number)
        elif tok.kind == "keyword":
            emit(tok.text if tok.text == "a" else upper)
        elif tok.kind in ("pname", "iri"):
            emit(expand(tok))
        elif tok.kind == "other" and adjacent(i) and tok.text + lexed[i + 1].text in _TWO_CHAR_OPERATORS:
            emit(tok.text + lexed[i + 1].text)
            i += 1
        else:
            emit(tok.text)
        i += 1
    while out and out[-1] == ".":
        out.pop()
    return out


def normalize_query(sparql: str) -> str:
    """The normalized form compared by Query EM: `sparql_tokens` joined by single spaces."""
    return " ".join(sparql_tokens(sparql))


def query_ids(sparql: str) -> frozenset[str]:
    """The Wikidata IDs a query mentions (Q/P/L numbers under any Wikidata prefix or full IRI), as a set."""
    ids = set()
    for token in sparql_tokens(sparql):
        if token.startswith("<") and token.endswith(">"):
            found = iri_to_prefixed(token[1:-1])
            if found is not None:
                ids.add(found[1])
    return frozenset(ids)
