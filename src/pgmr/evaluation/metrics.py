"""Generation metrics: Query EM, SQM, BLEU, URI EM, URI hallucination, refusals and QALD answer scores.

Every definition here is spelled out, with examples, in docs/metrics.md. `evaluate` scores prediction rows
(as written by `pgmr generate`) against gold records and is what `pgmr eval` calls.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from functools import lru_cache
from typing import Any, Protocol

from pgmr.datasets.records import QARecord, meta_dict
from pgmr.kg.ids import WIKIDATA_PREFIXES, iri_to_prefixed
from pgmr.query.errors import InvalidSparqlError, UnterminatedTokenError
from pgmr.query.gate import check_query
from pgmr.query.lexer import Token, tokenize
from pgmr.query.sparql import query_algebra, with_prefixes

OUTCOMES = ("valid", "invalid", "refused")
PRIMARY_METRIC = "query_em"

# A '.' before one of these (or right after a '}') ends nothing and may be left out: SPARQL's grammar makes
# it optional there, so `{ ?s ?p ?o . }` and `{ ?s ?p ?o }` normalize alike.
_OPTIONAL_DOT_BEFORE = {"}", "{", "OPTIONAL", "MINUS", "GRAPH", "SERVICE", "FILTER", "BIND", "VALUES"}
_TWO_CHAR_OPERATORS = {"<=", ">=", "!=", "&&", "||", "^^"}


class EvaluationError(ValueError):
    """Prediction rows or gold records that cannot be evaluated (missing fields, unknown ids)."""


# --- SPARQL tokens --------------------------------------------------------------------------------------


def _lex(text: str) -> list[Token]:
    """Lexer tokens without comments; an unclosed string literal becomes one string token to the end, so
    that broken model output still tokenizes (and its IDs are still counted)."""
    tokens: list[Token] = []
    try:
        tokens.extend(t for t in tokenize(text) if t.kind != "comment")
    except UnterminatedTokenError:
        start = tokens[-1].end if tokens else 0
        quotes = [i for i in (text.find("'", start), text.find('"', start)) if i >= 0]
        begin = min(quotes) if quotes else start
        tokens.append(Token("string", text[begin:], begin, len(text)))
    return tokens


def _quote(literal: str) -> str:
    """'x' -> "x" (same literal) when that needs no escaping; long and double-quoted strings stay."""
    closed = len(literal) >= 2 and literal.endswith("'")  # an unclosed literal of broken output stays as is
    if closed and literal.startswith("'") and not literal.startswith("'''") and '"' not in literal:
        return f'"{literal[1:-1]}"'
    return literal


def sparql_tokens(sparql: str) -> list[str]:
    """Normalized tokens of a SPARQL query (the unit of Query EM and BLEU):

    - comments dropped; PREFIX declarations dropped and every prefixed name with a declared or standard
      Wikidata prefix written as its full IRI `<...>`;
    - keywords and function names upper-cased (not `a`, not language tags, nothing inside literals or IRIs);
    - variables renamed `?v0`, `?v1`, ... in order of first appearance (`$x` and `?x` are one variable);
    - a literal with its language tag (lower-cased) or datatype (expanded) is one token; 'x' becomes "x";
    - decimals (`1.5`) and two-character operators (`<=`, `!=`, `&&`, `^^` ...) are one token;
    - a '.' where the grammar makes it optional (before `}`, `{`, FILTER, OPTIONAL, ...; after `}`; at the
      end) is dropped.
    """
    lexed = _lex(sparql)
    prefixes = dict(WIKIDATA_PREFIXES)
    variables: dict[str, str] = {}
    out: list[str] = []

    def adjacent(i: int) -> bool:
        return i + 1 < len(lexed) and lexed[i].end == lexed[i + 1].start

    def expand(tok: Token) -> str:
        if tok.kind == "pname" and tok.prefix in prefixes:
            return f"<{prefixes[tok.prefix]}{tok.local}>"
        return tok.text

    def emit(text: str) -> None:
        if text == "." and out and out[-1] == "}":
            return
        if text in _OPTIONAL_DOT_BEFORE and out and out[-1] == ".":
            out.pop()
        out.append(text)

    i = 0
    while i < len(lexed):
        tok = lexed[i]
        upper = tok.text.upper()
        if (
            tok.kind == "keyword"
            and upper == "PREFIX"
            and i + 2 < len(lexed)
            and lexed[i + 1].kind == "pname"
            and lexed[i + 1].text.endswith(":")
            and lexed[i + 2].kind == "iri"
        ):
            prefixes[lexed[i + 1].prefix] = lexed[i + 2].text[1:-1]
            i += 3
            continue
        if tok.kind == "string":
            literal = _quote(tok.text)
            i += 1
            if i < len(lexed) and lexed[i].text == "@" and lexed[i - 1].end == lexed[i].start:
                # Language tag: `@en`, `@en-GB` (the lexer splits it at '-'); tags are case-insensitive.
                tag = ""
                while adjacent(i) and (lexed[i + 1].kind == "keyword" or lexed[i + 1].text == "-"):
                    i += 1
                    tag += lexed[i].text
                literal += "@" + tag.lower()
                i += 1
            elif (
                i + 2 < len(lexed)
                and lexed[i].text == "^"
                and adjacent(i)
                and lexed[i + 1].text == "^"
                and lexed[i + 2].kind in ("pname", "iri")
            ):
                literal += "^^" + expand(lexed[i + 2])
                i += 3
            emit(literal)
            continue
        if tok.kind == "other" and tok.text[0] in "?$" and len(tok.text) > 1:
            name = tok.text[1:]
            emit(variables.setdefault(name, f"?v{len(variables)}"))
        elif tok.kind == "keyword" and tok.text[0].isdigit():
            number = tok.text
            # `1.5` arrives as `1` `.` `5`; `1 .` (an integer ending a triple) stays apart.
            if (
                adjacent(i)
                and lexed[i + 1].text == "."
                and adjacent(i + 1)
                and lexed[i + 2].kind == "keyword"
                and lexed[i + 2].text[0].isdigit()
            ):
                number += "." + lexed[i + 2].text
                i += 2
            emit(number)
        elif tok.kind == "keyword":
            emit(tok.text if tok.text == "a" else upper)
        elif tok.kind in ("pname", "iri"):
            emit(expand(tok))
        elif tok.kind == "other" and adjacent(i) and tok.text + lexed[i + 1].text in _TWO_CHAR_OPERATORS:
            emit(tok.text + lexed[i + 1].text)
            i += 1
        else:
            emit(tok.text)
        i += 1
    while out and out[-1] == ".":
        out.pop()
    return out


def normalize_query(sparql: str) -> str:
    """The normalized form compared by Query EM: `sparql_tokens` joined by single spaces."""
    return " ".join(sparql_tokens(sparql))


def query_exact_match(predicted: str | None, gold: str) -> bool:
    return predicted is not None and normalize_query(predicted) == normalize_query(gold)


def query_ids(sparql: str) -> frozenset[str]:
    """The Wikidata IDs a query mentions (Q/P/L numbers under any Wikidata prefix or full IRI), as a set."""
    ids = set()
    for token in sparql_tokens(sparql):
        if token.startswith("<") and token.endswith(">"):
            found = iri_to_prefixed(token[1:-1])
            if found is not None:
                ids.add(found[1])
    return frozenset(ids)


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


# --- BLEU -------------------------------------------------------------------------------------------------


def corpus_bleu(hypotheses: Sequence[Sequence[str]], references: Sequence[Sequence[str]]) -> float:
    """Corpus BLEU (0-100) of token lists, with sacrebleu's defaults (4-grams, exponential smoothing off for
    the corpus score) and no tokenization of its own: tokens are joined by spaces and split back."""
    import sacrebleu

    if not hypotheses:
        return 0.0
    hyps = [" ".join(h) for h in hypotheses]
    refs = [" ".join(r) for r in references]
    return float(sacrebleu.corpus_bleu(hyps, [refs], tokenize="none").score)


@lru_cache(maxsize=1)
def _sentence_scorer() -> Any:
    from sacrebleu.metrics import BLEU

    return BLEU(tokenize="none", effective_order=True)


def sentence_bleu(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """Sentence BLEU (0-100; sacrebleu's sentence defaults: exponential smoothing, effective n-gram order),
    for per-record inspection only."""
    return float(_sentence_scorer().sentence_score(" ".join(hypothesis), [" ".join(reference)]).score)


# --- answers ----------------------------------------------------------------------------------------------


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
