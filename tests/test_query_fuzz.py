"""Property-based: >= 10,000 generated and mutated inputs, the parser raises only IntermediateQueryError."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pgmr.query import IntermediateQuery, IntermediateQueryError, parse
from query_strategies import mutated, valid_queries


def _parse_or_query_error(text: str) -> IntermediateQuery | None:
    try:
        return parse(text)
    except IntermediateQueryError as exc:
        assert str(exc)
        return None


@settings(max_examples=2_000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(valid_queries())
def test_generated_queries_parse_and_print_back(text: str) -> None:
    query = parse(text)
    assert query.to_text() == text


@settings(max_examples=6_000, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(mutated())
def test_mutated_queries_only_raise_query_errors(text: str) -> None:
    result = _parse_or_query_error(text)
    if result is not None:
        assert parse(result.to_text()) == result


@settings(max_examples=2_500, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.text(max_size=200))
def test_arbitrary_text_only_raises_query_errors(text: str) -> None:
    _parse_or_query_error(text)
