"""The SPARQL-PGMR intermediate query language: model, parser, printer and SPARQL helpers."""

from __future__ import annotations

from pgmr.query.errors import IntermediateQueryError
from pgmr.query.model import IntermediateQuery, Placeholder, placeholder_kind
from pgmr.query.parser import parse
from pgmr.query.printer import to_text

__all__ = [
    "IntermediateQuery",
    "IntermediateQueryError",
    "Placeholder",
    "parse",
    "placeholder_kind",
    "to_text",
]
