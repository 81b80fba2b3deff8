"""A small SPARQL lexer: finds prefixed names, IRIs and brackets outside strings and comments.

It does not validate SPARQL (a real parser does that); it only locates the pieces that carry Wikidata IDs
or placeholders, so that replacing them never touches a string literal or a comment.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from pgmr.query.errors import UnbalancedBracketsError, UnterminatedTokenError

TokenKind = Literal["pname", "iri", "string", "comment", "open", "close", "keyword", "other"]

# IRIREF per the SPARQL 1.1 grammar; anything else starting with '<' is the less-than operator.
_IRI = re.compile(r'<[^<>"{}|^`\\\x00-\x20]*>')
# PNAME_NS / PNAME_LN, simplified to ASCII-plus-unicode word characters; `?x:` never occurs.
_PNAME = re.compile(r"(?:[^\W\d_][\w\-.]*?)?:(?:[\w\-](?:[\w\-.]*[\w\-])?)?", re.UNICODE)
_WORD = re.compile(r"[^\W_][\w]*", re.UNICODE)
_VAR = re.compile(r"[?$][\w]+", re.UNICODE)
_PAIRS = {"{": "}", "(": ")", "[": "]"}
_CLOSERS = {v: k for k, v in _PAIRS.items()}


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str
    start: int
    end: int

    @property
    def prefix(self) -> str:
        return self.text.split(":", 1)[0]

    @property
    def local(self) -> str:
        return self.text.split(":", 1)[1]


def position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset."""
    line = text.count("\n", 0, offset) + 1
    column = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return line, column


def _string_end(text: str, start: int) -> int:
    quote = text[start]
    long = text.startswith(quote * 3, start)
    delim = quote * 3 if long else quote
    i = start + len(delim)
    while i < len(text):
        ch = text[i]
        if ch == "\\":
            i += 2
            continue
        if not long and ch in "\r\n":
            break
        if text.startswith(delim, i):
            return i + len(delim)
        i += 1
    line, column = position(text, start)
    raise UnterminatedTokenError("string literal is never closed", line, column)


def tokenize(text: str) -> Iterator[Token]:
    """Yield tokens; whitespace is skipped. Raises UnterminatedTokenError for open strings."""
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
        elif ch == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            yield Token("comment", text[i:end], i, end)
            i = end
        elif ch in "'\"":
            end = _string_end(text, i)
            yield Token("string", text[i:end], i, end)
            i = end
        elif ch == "<" and (m := _IRI.match(text, i)):
            yield Token("iri", m.group(), i, m.end())
            i = m.end()
        elif ch in "?$" and (m := _VAR.match(text, i)):
            yield Token("other", m.group(), i, m.end())
            i = m.end()
        elif ch in _PAIRS:
            yield Token("open", ch, i, i + 1)
            i += 1
        elif ch in _CLOSERS:
            yield Token("close", ch, i, i + 1)
            i += 1
        elif m := _PNAME.match(text, i):
            yield Token("pname", m.group(), i, m.end())
            i = m.end()
        elif m := _WORD.match(text, i):
            yield Token("keyword", m.group(), i, m.end())
            i = m.end()
        else:
            yield Token("other", ch, i, i + 1)
            i += 1


def check_brackets(text: str, tokens: list[Token]) -> None:
    """Raise UnbalancedBracketsError at the first bracket that does not pair up."""
    stack: list[Token] = []
    for tok in tokens:
        if tok.kind == "open":
            stack.append(tok)
        elif tok.kind == "close":
            if not stack or _PAIRS[stack[-1].text] != tok.text:
                line, column = position(text, tok.start)
                expected = f"'{_PAIRS[stack[-1].text]}'" if stack else "nothing"
                raise UnbalancedBracketsError(f"unexpected '{tok.text}' (expected {expected})", line, column)
            stack.pop()
    if stack:
        line, column = position(text, stack[-1].start)
        raise UnbalancedBracketsError(f"'{stack[-1].text}' is never closed", line, column)


def compact(text: str) -> str:
    """Collapse whitespace between tokens to single spaces and drop comments; strings stay untouched."""
    pieces: list[str] = []
    last_end = 0
    for tok in tokenize(text):
        gap = text[last_end : tok.start]
        if pieces and gap:
            pieces.append(" ")
        if tok.kind != "comment":
            pieces.append(tok.text)
        last_end = tok.end
    return "".join(pieces).strip()
