"""Order-aware answer scores, for questions whose answer is a ranking (CK25's `result_order_matters`).

Set precision/recall/F1 (pgmr.evaluation.answers) cannot tell a ranking from its reverse. Here a prediction's
values in the order its rows came (each value at its first occurrence) are compared with the gold ranking by
their longest common subsequence L: precision L / |predicted|, recall L / |gold|. With the same order it is
the set score; every value out of place costs what a missing one does. The gold ranking is the gold query's
own result on the store: a published answer list is a set (CK25's lists are sorted by value, not by rank).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pgmr.evaluation.answers import AnswerScores, answer_scores, normalize_answer

# Past this many value pairs the quadratic subsequence would take seconds: the set score stands in.
MAX_PAIRS = 4_000_000


def ranked_values(rows: Iterable[Iterable[str]]) -> list[str]:
    """Result rows (each its bound values in variable order) -> the values in order, each once, normalized
    as answers are."""
    seen: dict[str, None] = {}
    for row in rows:
        for value in row:
            seen.setdefault(normalize_answer(value), None)
    return list(seen)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    previous = [0] * (len(b) + 1)
    for x in a:
        current = [0]
        for j, y in enumerate(b):
            current.append(previous[j] + 1 if x == y else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def ordered_answer_scores(predicted: Sequence[str], gold: Sequence[str]) -> AnswerScores:
    """P/R/F1 by longest common subsequence; empty sides follow QALD's rules, as `answer_scores` does."""
    if not predicted or not gold or len(predicted) * len(gold) > MAX_PAIRS:
        return answer_scores(predicted, gold)
    common = _lcs(predicted, gold)
    if not common:
        return AnswerScores(0.0, 0.0, 0.0)
    precision, recall = common / len(predicted), common / len(gold)
    return AnswerScores(precision, recall, 2 * precision * recall / (precision + recall))


__all__ = ["MAX_PAIRS", "ordered_answer_scores", "ranked_values"]
