"""Every way model output can fail to be a SPARQL-PGMR query, as one exception family.

The parser is the gate in front of retrieval: it raises only these, each naming the problem and where it is.
"""

from __future__ import annotations


class IntermediateQueryError(ValueError):
    """Text that is not a well-formed SPARQL-PGMR query.

    `line` and `column` are 1-based positions in the text given to the parser (None when the problem has no
    single place, e.g. an empty input).
    """

    code = "invalid"

    def __init__(self, message: str, line: int | None = None, column: int | None = None) -> None:
        self.message = message
        self.line = line
        self.column = column
        where = f" (line {line}, column {column})" if line is not None and column is not None else ""
        where = f" (line {line})" if line is not None and column is None else where
        super().__init__(f"{message}{where}")


class EmptyQueryError(IntermediateQueryError):
    code = "empty"


class UnbalancedBracketsError(IntermediateQueryError):
    code = "unbalanced_brackets"


class UnterminatedTokenError(IntermediateQueryError):
    """A string literal or IRI that never closes."""

    code = "unterminated_token"


class MalformedMappingError(IntermediateQueryError):
    """A line in the mapping block that is not `nameN = [TAG] label [/TAG] description`."""

    code = "malformed_mapping"


class EmptyLabelError(IntermediateQueryError):
    code = "empty_label"


class DuplicatePlaceholderError(IntermediateQueryError):
    code = "duplicate_placeholder"


class MissingMappingError(IntermediateQueryError):
    """A placeholder used in the query body with no mapping line."""

    code = "missing_mapping"


class UnusedMappingError(IntermediateQueryError):
    """A mapping line whose placeholder the query body never uses."""

    code = "unused_mapping"


class KindClashError(IntermediateQueryError):
    """An entity where a relation must be (or the reverse): `wdt:entity0`, `relation0 = [ENT] ...`."""

    code = "kind_clash"


class InvalidPlaceholderError(IntermediateQueryError):
    """A Wikidata-prefixed name that is neither a placeholder nor anything else allowed (`wd:Hamburg`)."""

    code = "invalid_placeholder"


class RawIdentifierError(IntermediateQueryError):
    """A real Wikidata ID in the skeleton: IDs must come from the memory, never from the model."""

    code = "raw_identifier"


class InvalidSparqlError(IntermediateQueryError):
    """The skeleton is not a syntactically valid SPARQL 1.1 query (updates are not queries either)."""

    code = "invalid_sparql"


class ReadOnlyQueryError(InvalidSparqlError):
    """SPARQL UPDATE (INSERT, DELETE, LOAD, CLEAR, ...): pgmr only reads knowledge graphs."""

    code = "read_only"
