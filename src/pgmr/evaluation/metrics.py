"""Generation metrics: Query EM, SQM, BLEU, URI EM, URI hallucination, refusals and QALD answer scores.

Every definition here is spelled out, with examples, in docs/metrics.md. `evaluate` scores prediction rows
(as written by `pgmr generate`) against gold records and is what `pgmr eval` calls.
"""

from __future__ import annotations

from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pgmr.datasets.records import QARecord, meta_dict
from pgmr.evaluation.answers import (
    AnswerEvaluation,
    AnswerScores,
    Store,
    answer_scores,
    evaluate_answers,
    gold_answers,
    normalize_answer,
    result_answers,
    result_order_matters,
)
from pgmr.evaluation.bleu import corpus_bleu, sentence_bleu
from pgmr.query.errors import InvalidSparqlError
from pgmr.query.gate import check_query
from pgmr.query.normalize import normalize_query, query_ids, sparql_tokens
from pgmr.query.sparql import query_algebra

OUTCOMES = ("valid", "invalid", "refused")
PRIMARY_METRIC = "query_em"


class EvaluationError(ValueError):
    """Prediction rows or gold records that cannot be evaluated (missing fields, unknown ids)."""


# --- query match ------------------------------------------------------------------------------------------


def query_exact_match(predicted: str | None, gold: str) -> bool:
    return predicted is not None and normalize_query(predicted) == normalize_query(gold)


def semantic_match(predicted: str | None, gold: str) -> tuple[bool, str]:
    """(SQM, method). Method "exact": Query EM holds, which implies SQM. Method "algebra": both canonical
    rdflib algebras compared (triple-pattern order inside a BGP, variable names and prefix forms do not
    matter). Method "fallback": rdflib could not parse one of the two, so SQM is Query EM (False here).
    A missing prediction is (False, "algebra")."""
    if predicted is None:
        return False, "algebra"
    if query_exact_match(predicted, gold):
        # Query EM's normalization only rewrites what has no meaning (names, case, prefixes, optional dots),
        # so an exact match is a semantic match; this also skips rdflib's slow parser for most good rows.
        return True, "exact"
    try:
        gold_form = query_algebra(gold, canonical=True)
    except InvalidSparqlError:
        return False, "fallback"
    try:
        predicted_form = query_algebra(predicted, canonical=True)
    except InvalidSparqlError:
        return False, "fallback"
    return predicted_form == gold_form, "algebra"


# --- per record -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordEvaluation:
    id: str
    outcome: str  # "valid" (parses as SPARQL) | "invalid" (unparsable, or pgmr status invalid) | "refused"
    predicted_sparql: str | None  # the final query, None when refused or when there is none
    gold_sparql: str
    query_em: bool
    sqm: bool
    sqm_method: str  # "exact" | "algebra" | "fallback" (rdflib could not parse one side)
    bleu: float  # sentence BLEU, 0-100
    uri_em: bool
    predicted_ids: tuple[str, ...]
    gold_ids: tuple[str, ...]
    unknown_ids: tuple[str, ...] | None  # predicted IDs not in the catalog; None without a catalog
    ids_not_in_gold: tuple[str, ...]
    template_id: str | None = None
    error: str | None = None  # why the row is invalid or refused
    answers: AnswerEvaluation | None = None
    tokens: tuple[str, ...] = field(default=(), repr=False)  # normalized predicted tokens (for BLEU)
    gold_tokens: tuple[str, ...] = field(default=(), repr=False)
    # The gold record's question and whether its answer order counts: what the standard exports need
    # (pgmr.evaluation.exports) besides the queries.
    question: str = field(default="", repr=False)
    order_matters: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "outcome": self.outcome,
            "query_em": self.query_em,
            "sqm": self.sqm,
            "sqm_method": self.sqm_method,
            "bleu": round(self.bleu, 2),
            "uri_em": self.uri_em,
            "predicted_ids": list(self.predicted_ids),
            "gold_ids": list(self.gold_ids),
            "unknown_ids": list(self.unknown_ids) if self.unknown_ids is not None else None,
            "ids_not_in_gold": list(self.ids_not_in_gold),
        }
        if self.template_id is not None:
            data["template_id"] = self.template_id
        if self.error is not None:
            data["error"] = self.error
        if self.answers is not None:
            data["answers"] = self.answers.to_json()
        return data


def _text(row: Mapping[str, Any], key: str) -> str | None:
    value = row.get(key)
    return value if isinstance(value, str) and value.strip() else None


def final_query(row: Mapping[str, Any]) -> tuple[str, str | None, str | None]:
    """(outcome before parsing, final query, reason) of a prediction row.

    pgmr rows resolved by `pgmr generate --resolve` carry `status`: only "resolved" rows have a final query
    (`sparql`). Other rows: `sparql` if present, else `prediction` (direct and rag modes output SPARQL)."""
    status = row.get("status")
    if status is not None:
        if status == "resolved":
            sparql = _text(row, "sparql")
            return ("valid", sparql, None) if sparql else ("invalid", None, "resolved row without 'sparql'")
        if status == "refused":
            return "refused", None, _reason(row.get("reason"))
        if status == "invalid":
            return "invalid", None, _reason(row.get("error"))
        raise EvaluationError(f"row {row.get('id')!r}: unknown status {status!r} (resolved|refused|invalid)")
    sparql = _text(row, "sparql") or _text(row, "prediction")
    if sparql is None:
        if "sparql" not in row and "prediction" not in row:
            raise EvaluationError(f"row {row.get('id')!r} has neither 'prediction' nor 'sparql'")
        return "invalid", None, "empty prediction"
    return "valid", sparql, None


def _reason(value: object) -> str | None:
    if isinstance(value, Mapping):
        code, message = value.get("code"), value.get("message")
        return ": ".join(str(x) for x in (code, message) if x) or None
    return str(value) if value else None


def evaluate_record(
    row: Mapping[str, Any],
    gold: QARecord,
    *,
    catalog: Container[str] | None = None,
    store: Store | None = None,
    timeout: float | None = None,
) -> RecordEvaluation:
    outcome, sparql, error = final_query(row)
    if sparql is not None:
        try:
            check_query(sparql)
        except InvalidSparqlError as exc:
            outcome, error = "invalid", exc.message
    gold_tokens = sparql_tokens(gold.sparql)
    tokens = sparql_tokens(sparql) if sparql is not None else []
    predicted_ids = query_ids(sparql) if sparql is not None else frozenset()
    gold_ids = query_ids(gold.sparql)
    sqm, method = semantic_match(sparql if outcome == "valid" else None, gold.sparql)
    answers = None
    if store is not None:
        answers = evaluate_answers(sparql if outcome == "valid" else None, gold, store, timeout=timeout)
    return RecordEvaluation(
        id=gold.id,
        outcome=outcome,
        predicted_sparql=sparql,
        gold_sparql=gold.sparql,
        query_em=sparql is not None and tokens == gold_tokens,
        sqm=sqm,
        sqm_method=method,
        bleu=sentence_bleu(tokens, gold_tokens) if tokens else 0.0,
        uri_em=sparql is not None and predicted_ids == gold_ids,
        predicted_ids=tuple(sorted(predicted_ids)),
        gold_ids=tuple(sorted(gold_ids)),
        unknown_ids=tuple(sorted(i for i in predicted_ids if i not in catalog))
        if catalog is not None
        else None,
        ids_not_in_gold=tuple(sorted(predicted_ids - gold_ids)),
        template_id=meta_dict(gold).get("template_id"),
        error=error,
        answers=answers,
        tokens=tuple(tokens),
        gold_tokens=tuple(gold_tokens),
        question=gold.question,
        order_matters=result_order_matters(gold),
    )


# --- overall ----------------------------------------------------------------------------------------------


def _rate(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator else None


def aggregate(records: Sequence[RecordEvaluation]) -> dict[str, Any]:
    """Overall metrics of a list of record evaluations (rates in [0, 1], BLEU in [0, 100])."""
    n = len(records)
    n_ids = sum(len(r.predicted_ids) for r in records)
    with_catalog = [r for r in records if r.unknown_ids is not None]
    n_unknown = sum(len(r.unknown_ids or ()) for r in with_catalog)
    n_not_gold = sum(len(r.ids_not_in_gold) for r in records)
    overall: dict[str, Any] = {
        "n": n,
        "query_em": _rate(sum(r.query_em for r in records), n),
        "sqm": _rate(sum(r.sqm for r in records), n),
        "bleu": corpus_bleu([r.tokens for r in records], [r.gold_tokens for r in records]) if n else None,
        "uri_em": _rate(sum(r.uri_em for r in records), n),
        "valid_rate": _rate(sum(r.outcome == "valid" for r in records), n),
        "invalid_rate": _rate(sum(r.outcome == "invalid" for r in records), n),
        "refusal_rate": _rate(sum(r.outcome == "refused" for r in records), n),
        "predicted_ids": n_ids,
        "unknown_ids": n_unknown if with_catalog else None,
        "hallucination_rate_catalog": _rate(n_unknown, n_ids) if with_catalog else None,
        "rows_with_unknown_ids": _rate(sum(bool(r.unknown_ids) for r in with_catalog), n)
        if with_catalog
        else None,
        "ids_not_in_gold": n_not_gold,
        "hallucination_rate_gold": _rate(n_not_gold, n_ids),
        "sqm_fallbacks": sum(r.sqm_method == "fallback" for r in records),
    }
    answered = [r.answers for r in records if r.answers is not None]
    if answered:
        scored = [a for a in answered if a.scored]
        p = _rate(sum(a.precision or 0.0 for a in scored), len(scored))
        r_ = _rate(sum(a.recall or 0.0 for a in scored), len(scored))
        overall.update(
            {
                "answer_precision": p,
                "answer_recall": r_,
                "answer_f1": _rate(sum(a.f1 or 0.0 for a in scored), len(scored)),
                "answer_qald_f1": (2 * p * r_ / (p + r_) if p and r_ else 0.0) if p is not None else None,
                "answer_scored": len(scored),
                "answer_gold_errors": len(answered) - len(scored),
                "answer_prediction_errors": sum(
                    1 for a in answered if a.error is not None and a.error != "no executable query"
                ),
            }
        )
    return overall


@dataclass(frozen=True)
class EvaluationResult:
    records: tuple[RecordEvaluation, ...]
    overall: Mapping[str, Any]
    by_outcome: Mapping[str, Mapping[str, Any]]
    by_template: Mapping[str, Mapping[str, Any]]  # empty when no gold record has a template_id
    gold_without_prediction: int  # gold records no row predicts (not scored)

    @property
    def primary(self) -> float | None:
        return self.overall.get(PRIMARY_METRIC)


def evaluate(
    rows: Sequence[Mapping[str, Any]],
    gold_records: Iterable[QARecord],
    *,
    catalog: Container[str] | None = None,
    store: Store | None = None,
    timeout: float | None = None,
    progress: Callable[[int], None] | None = None,
) -> EvaluationResult:
    """Score prediction rows against gold records matched by `id`.

    `catalog`: known Wikidata IDs (a `LabelCatalog` or any container); the gold records' own IDs are added.
    None leaves the catalog hallucination rate out. `store`: executes predicted (and, without dataset answers,
    gold) queries for answer P/R/F1, each with `timeout` seconds. `progress(k)` is called after k more
    records are scored. Raises EvaluationError for rows without an id, duplicate ids, ids not in
    the gold records, or rows with nothing to evaluate."""
    gold_by_id = {record.id: record for record in gold_records}
    seen: set[str] = set()
    matched: list[tuple[Mapping[str, Any], QARecord]] = []
    unmatched: list[str] = []
    for index, row in enumerate(rows, 1):
        row_id = row.get("id")
        if row_id is None or isinstance(row_id, bool) or not isinstance(row_id, str | int):
            raise EvaluationError(f"prediction row {index} has no 'id' (string or integer)")
        key = str(row_id)
        if key in seen:
            raise EvaluationError(f"prediction id {key!r} appears twice")
        seen.add(key)
        if key not in gold_by_id:
            unmatched.append(key)
            continue
        matched.append((row, gold_by_id[key]))
    if unmatched:
        examples = ", ".join(repr(x) for x in unmatched[:5])
        raise EvaluationError(
            f"{len(unmatched)} prediction ids are not in the gold records (e.g. {examples})"
        )
    if not matched:
        raise EvaluationError("no prediction rows to evaluate")
    known = _KnownIds(catalog, gold_by_id.values()) if catalog is not None else None
    scored = []
    for row, gold in matched:
        scored.append(evaluate_record(row, gold, catalog=known, store=store, timeout=timeout))
        if progress is not None:
            progress(1)
    records = tuple(scored)
    by_outcome = {
        outcome: aggregate([r for r in records if r.outcome == outcome])
        for outcome in OUTCOMES
        if any(r.outcome == outcome for r in records)
    }
    templates = sorted({r.template_id for r in records if r.template_id is not None})
    by_template = {t: aggregate([r for r in records if r.template_id == t]) for t in templates}
    return EvaluationResult(
        records=records,
        overall=aggregate(records),
        by_outcome=by_outcome,
        by_template=by_template,
        gold_without_prediction=len(gold_by_id) - len(records),
    )


class _KnownIds:
    """The catalog's IDs plus every ID of the gold dataset (gold queries may use IDs the memory lacks)."""

    def __init__(self, catalog: Container[str], gold: Iterable[QARecord]) -> None:
        self._catalog = catalog
        self._gold = {wid for record in gold for wid in query_ids(record.sparql)}

    def __contains__(self, wikidata_id: object) -> bool:
        return wikidata_id in self._gold or wikidata_id in self._catalog


__all__ = [
    "OUTCOMES",
    "PRIMARY_METRIC",
    "AnswerEvaluation",
    "AnswerScores",
    "EvaluationError",
    "EvaluationResult",
    "RecordEvaluation",
    "Store",
    "aggregate",
    "answer_scores",
    "corpus_bleu",
    "evaluate",
    "evaluate_answers",
    "evaluate_record",
    "final_query",
    "gold_answers",
    "normalize_answer",
    "normalize_query",
    "query_exact_match",
    "query_ids",
    "result_answers",
    "semantic_match",
    "sentence_bleu",
    "sparql_tokens",
]
