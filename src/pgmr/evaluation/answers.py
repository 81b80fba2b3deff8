"""Answer scores: a store's answers to the predicted query against the gold answers, with QALD's rules."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from pgmr.datasets.records import QARecord, meta_dict
from pgmr.query.errors import UnterminatedTokenError
from pgmr.query.lexer import tokenize
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

    def to_json(self) -> dict[str, Any]: ...


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


# The flag a dataset may carry per question (CK25's questions-dev.jsonl, the TEXT2SPARQL'25 challenge), kept in
# QARecord.meta by the JSONL loader.
ORDER_FLAG = "result_order_matters"


def _outer_order_and_limit(sparql: str) -> bool:
    """Whether the outermost query has both ORDER BY and LIMIT: they sit outside every brace, where a
    sub-select's own modifiers (inside `{ }`) cannot be, and a sub-select's order does not order the result."""
    try:
        tokens = [t for t in tokenize(sparql) if t.kind != "comment"]
    except UnterminatedTokenError:
        return False
    depth, order, limit = 0, False, False
    for i, tok in enumerate(tokens):
        if tok.kind == "open" and tok.text == "{":
            depth += 1
        elif tok.kind == "close" and tok.text == "}":
            depth -= 1
        elif depth == 0 and tok.kind == "keyword":
            word = tok.text.upper()
            following = tokens[i + 1].text.upper() if i + 1 < len(tokens) else ""
            order = order or (word == "ORDER" and following == "BY")
            limit = limit or word == "LIMIT"
    return order and limit


def result_order_matters(record: QARecord) -> bool:
    """Whether the order of a question's answers is part of the answer: the dataset's own flag when it gives
    one (CK25 says false for `ORDER BY ... LIMIT 1`: one row has no order), else whether the gold query ends
    in ORDER BY with LIMIT (a top-k question, whose rows the question ranks). Answer P/R/F1 here stay
    set-based; this is what order-aware scorers (t2s-metrics) are told."""
    flag = meta_dict(record).get(ORDER_FLAG)
    if flag in ("true", "false"):
        return flag == "true"
    return _outer_order_and_limit(record.sparql)


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
    # The store's answer to the predicted query as SPARQL 1.1 JSON results, kept for the QALD export so that
    # it need not run the query again; None when nothing ran or the store failed.
    predicted_result: Mapping[str, Any] | None = field(default=None, compare=False, repr=False)

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


def _run(
    store: Store, sparql: str, timeout: float | None
) -> tuple[frozenset[str], str | None, dict[str, Any] | None]:
    """(answer set, error, SPARQL JSON results) of one query on the store."""
    try:
        result = store.query(with_prefixes(sparql), timeout=timeout)
        answers = result_answers(result)
    except Exception as exc:  # any store failure (timeout, 5xx, syntax) counts as an empty answer
        return frozenset(), f"{type(exc).__name__}: {exc}", None
    try:
        results = result.to_json()
    except Exception:  # the export then lacks these answers; the scores must not depend on it
        results = None
    return answers, None, results


def evaluate_answers(
    predicted_sparql: str | None, record: QARecord, store: Store, *, timeout: float | None = None
) -> AnswerEvaluation:
    gold = gold_answers(record)
    gold_source, gold_error = "dataset", None
    if gold is None:
        gold_source = "store"
        gold, gold_error, _ = _run(store, record.sparql, timeout)
    predicted: frozenset[str]
    error: str | None
    results: dict[str, Any] | None = None
    if predicted_sparql is None:
        predicted, error = frozenset(), "no executable query"
    else:
        predicted, error, results = _run(store, predicted_sparql, timeout)
    if gold_error is not None:
        return AnswerEvaluation(
            None, None, None, len(predicted), None, gold_source, error, gold_error, predicted_result=results
        )
    scores = answer_scores(predicted, gold)
    return AnswerEvaluation(
        scores.precision,
        scores.recall,
        scores.f1,
        len(predicted),
        len(gold),
        gold_source,
        error,
        predicted_result=results,
    )
