"""Training data made from the graph itself: questions a benchmark's templates do not ask (issue 46)."""

from pgmr.synthesis.plain_questions import Fact, facts_from_queries, plain_questions

__all__ = ["Fact", "facts_from_queries", "plain_questions"]
