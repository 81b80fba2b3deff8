"""SPARQL-PGMR text from an IntermediateQuery: the inverse of `parse` for canonical text."""

from __future__ import annotations

from pgmr.query.model import IntermediateQuery


def to_text(query: IntermediateQuery) -> str:
    return query.to_text()
