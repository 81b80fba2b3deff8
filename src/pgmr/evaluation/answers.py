"""Answer scores: a store's answers to the predicted query against the gold answers, with QALD's rules."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, Protocol

from pgmr.datasets.records import QARecord
from pgmr.query.sparql import with_prefixes


@dataclass(frozen=True)
class AnswerScores:
    precision: float
    recall: float
    f1: float


def answer_scores(predicted: Iterable[str], gold: Iterable[str]) -> AnswerScores:
    """Per-question precision/recall/F1 of answer sets, with QALD's rules for empty sets:
    both empty -> 1/1/1; empty prediction, non-empty gold -> P=1, R=0, F1=0; non-empty prediction, empty
    gold -> 0/0/0."""
    pred, ref = set(predicted), set(gold)
    if not ref:
        return AnswerScores(1.0, 1.0, 1.0) if not pred else AnswerScores(0.0, 0.0, 0.0)
    if not pred:
        return AnswerScores(1.0, 0.0, 0.0)
    hits = len(pred & ref)
    precision, recall = hits / len(pred), hits / len(ref)
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return AnswerScores(precision, recall, f1)


class _QueryResult(Protocol):
    kind: str
    boolean: bool | None

    def values(self) -> list[Any]: ...


class Store(Protocol):
    """What `evaluate` needs of `pgmr.stores.SparqlStore`."""

    def query(self, sparql: str, *, timeout: float | None = None) -> _QueryResult: ...


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


def normalize_answer(value: str) -> str:
    """Numbers compare by value: QALD's file writes `+100` where a store returns `100` (both xsd:decimal),
    and `100.0` or `1E2` are the same number too. Everything else (IRIs, strings, dates) compares as is."""
    text = value.strip()
    if _NUMBER.fullmatch(text):
        number = Decimal(text)
        if abs(number.adjusted()) > 60:  # written out, 1E999999 would be a million digits
            return format(number.normalize(), "E")
        return "0" if number == 0 else format(number.normalize(), "f")
    return value


def result_answers(result: _QueryResult) -> frozenset[str]:
    """A query result as an answer set: the value (IRI or lexical form, numbers normalized) of every bound
    term; an ASK result is {"true"} or {"false"}, as QALD writes boolean answers."""
    if result.kind == "boolean":
        return frozenset({"true" if result.boolean else "false"})
    return frozenset(normalize_answer(term.value) for term in result.values())


def gold_answers(record: QARecord) -> frozenset[str] | None:
    """The answers the dataset gives (QALD), numbers normalized; None when it gives none."""
    if record.boolean is not None:
        return frozenset({"true" if record.boolean else "false"})
    if record.answers is not None:
        return frozenset(normalize_answer(value) for value in record.answers)
    return None


@dataclass(frozen=True)
class AnswerEvaluation:
    precision: float | None  # None: the gold answers are unknown (gold query failed), question not scored
    recall: float | None
    f1: float | None
    n_predicted: int
    n_gold: int | None
    gold_source: str  # "dataset" | "store"
    error: str | None = None  # why the prediction has no answers (store error, no query)
    gold_error: str | None = None

    @property
    def scored(self) -> bool:
        return self.f1 is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "recall": self.recall,
            "f1": self.f1,
            "n_predicted": self.n_predicted,
            "n_gold": self.n_gold,
            "gold_source": self.gold_source,
            "error": self.error,
            "gold_error": self.gold_error,
        }


def _run(store: Store, sparql: str, timeout: float | None) -> tuple[frozenset[str], str | None]:
    try:
        return result_answers(store.query(with_prefixes(sparql), timeout=timeout)), None
    except Exception as exc:  # any store failure (timeout, 5xx, syntax) counts as an empty answer
        return frozenset(), f"{type(exc).__name__}: {exc}"


def evaluate_answers(
    predicted_sparql: str | None, record: QARecord, store: Store, *, timeout: float | None = None
) -> AnswerEvaluation:
    gold = gold_answers(record)
    gold_source, gold_error = "dataset", None
    if gold is None:
        gold_source = "store"
        gold, gold_error = _run(store, record.sparql, timeout)
    predicted: frozenset[str]
    error: str | None
    if predicted_sparql is None:
        predicted, error = frozenset(), "no executable query"
    else:
        predicted, error = _run(store, predicted_sparql, timeout)
    if gold_error is not None:
        return AnswerEvaluation(None, None, None, len(predicted), None, gold_source, error, gold_error)
    scores = answer_scores(predicted, gold)
    return AnswerEvaluation(
        scores.precision, scores.recall, scores.f1, len(predicted), len(gold), gold_source, error
    )
