"""Generation metrics on hand-checked cases: Query EM, SQM, BLEU, URI EM, hallucination, refusals, answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from pgmr.datasets import QARecord
from pgmr.evaluation.metrics import (
    EvaluationError,
    answer_scores,
    corpus_bleu,
    evaluate,
    normalize_answer,
    normalize_query,
    query_exact_match,
    query_ids,
    semantic_match,
    sparql_tokens,
)
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.query.sparql import same_query

GOLD = "SELECT ?x WHERE { ?x wdt:P31 wd:Q5 . ?x wdt:P106 wd:Q33999 }"
SWAPPED = "SELECT ?x WHERE { ?x wdt:P106 wd:Q33999 . ?x wdt:P31 wd:Q5 }"
RENAMED = "SELECT ?person WHERE { ?person wdt:P31 wd:Q5 . ?person wdt:P106 wd:Q33999 }"
FULL_IRIS = (
    "SELECT ?x WHERE { ?x <http://www.wikidata.org/prop/direct/P31> <http://www.wikidata.org/entity/Q5> . "
    "?x wdt:P106 wd:Q33999 }"
)
OWN_PREFIX = "PREFIX e: <http://www.wikidata.org/entity/>\nSELECT ?x WHERE { ?x wdt:P31 e:Q5 . ?x wdt:P106 e:Q33999 . }"
LOWER_CASE = "select ?x where { ?x wdt:P31 wd:Q5 . ?x wdt:P106 wd:Q33999 }"
OTHER_ID = "SELECT ?x WHERE { ?x wdt:P31 wd:Q5 . ?x wdt:P106 wd:Q36180 }"  # writer, not actor
MADE_UP_ID = "SELECT ?x WHERE { ?x wdt:P31 wd:Q5 . ?x wdt:P106 wd:Q999999999999 }"

CATALOG = LabelCatalog(
    [
        CatalogEntry("Q5", "human"),
        CatalogEntry("Q33999", "actor"),
        CatalogEntry("Q36180", "writer"),
        CatalogEntry("P31", "instance of"),
        CatalogEntry("P106", "occupation"),
    ]
)


def _record(sparql: str, record_id: str = "1", **kwargs) -> QARecord:
    return QARecord(record_id, "a question?", sparql, "test", **kwargs)


def _one(prediction: str, gold: str = GOLD, catalog=CATALOG):
    result = evaluate([{"id": "1", "prediction": prediction}], [_record(gold)], catalog=catalog)
    return result.records[0], result.overall


# --- Query EM and SQM ------------------------------------------------------------------------------------


def test_triple_order_differs_semantically_equal_but_not_exact() -> None:
    record, _ = _one(SWAPPED)
    assert (record.query_em, record.sqm, record.sqm_method) == (False, True, "algebra")
    assert record.uri_em


def test_variable_names_differ_equal_both_ways() -> None:
    assert normalize_query(RENAMED) == normalize_query(GOLD)
    record, _ = _one(RENAMED)
    assert (record.query_em, record.sqm) == (True, True)
    # The semantic comparison itself (not the exact-match shortcut) is also insensitive to names.
    assert same_query(RENAMED, GOLD, canonical=True)
    assert same_query(
        RENAMED.replace("wd:Q33999", "wd:Q33999 ; wdt:P27 ?c"),
        GOLD.replace("wd:Q33999", "wd:Q33999 ; wdt:P27 ?country"),
        canonical=True,
    )


@pytest.mark.parametrize("prediction", [FULL_IRIS, OWN_PREFIX, LOWER_CASE])
def test_prefix_forms_keyword_case_and_trailing_dot_are_equal_both_ways(prediction: str) -> None:
    record, _ = _one(prediction)
    assert (record.query_em, record.sqm) == (True, True)


def test_one_differing_id_in_the_catalog() -> None:
    record, overall = _one(OTHER_ID)
    assert (record.query_em, record.sqm, record.uri_em) == (False, False, False)
    assert record.unknown_ids == ()
    assert record.ids_not_in_gold == ("Q36180",)
    assert overall["hallucination_rate_catalog"] == 0.0
    assert overall["hallucination_rate_gold"] == 1 / 4  # P31, Q5, P106, Q36180


def test_one_made_up_id() -> None:
    record, overall = _one(MADE_UP_ID)
    assert (record.query_em, record.sqm, record.uri_em) == (False, False, False)
    assert record.unknown_ids == ("Q999999999999",)
    assert overall["predicted_ids"] == 4
    assert overall["unknown_ids"] == 1
    assert overall["hallucination_rate_catalog"] == 1 / 4
    assert overall["rows_with_unknown_ids"] == 1.0


def test_without_a_catalog_the_catalog_rate_is_left_out() -> None:
    record, overall = _one(MADE_UP_ID, catalog=None)
    assert record.unknown_ids is None
    assert overall["hallucination_rate_catalog"] is None
    assert overall["hallucination_rate_gold"] == 1 / 4


def test_gold_ids_count_as_known_even_when_the_catalog_lacks_them() -> None:
    gold = GOLD.replace("wd:Q33999", "wd:Q424242")
    record, _ = _one(gold, gold=gold, catalog=LabelCatalog())
    assert record.unknown_ids == ()


def test_ids_come_from_prefixed_names_and_full_iris_never_from_literals() -> None:
    query = (
        "SELECT ?x WHERE { ?x p:P39 ?s . ?s ps:P39 <http://www.wikidata.org/entity/Q11696> ; "
        "pq:P580 ?t . ?x rdfs:label \"wd:Q42 is not an ID here\"@en FILTER(CONTAINS(?l, 'Q7')) } # wd:Q1"
    )
    assert query_ids(query) == {"P39", "Q11696", "P580"}


def test_normalization_keeps_literals_and_iris_untouched() -> None:
    tokens = sparql_tokens(
        "ask { ?X rdfs:label 'select where'@EN-gb ; wdt:P1 \"1.5\"^^xsd:decimal . "
        "filter(?y <= 1.5 && ?z != 3) }"
    )
    assert tokens == [
        "ASK", "{", "?v0", "<http://www.w3.org/2000/01/rdf-schema#label>", '"select where"@en-gb', ";",
        "<http://www.wikidata.org/prop/direct/P1>", '"1.5"^^<http://www.w3.org/2001/XMLSchema#decimal>',
        "FILTER", "(", "?v1", "<=", "1.5", "&&", "?v2", "!=", "3", ")", "}",
    ]  # fmt: skip


def test_literal_case_matters_and_keywords_inside_literals_stay() -> None:
    a = "SELECT ?x WHERE { ?x rdfs:label 'Select' }"
    assert not query_exact_match(a, a.replace("'Select'", "'SELECT'"))
    assert query_exact_match(a, a.replace("SELECT ?x WHERE", "select ?x where"))


def test_broken_output_still_tokenizes() -> None:
    tokens = sparql_tokens("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 ; rdfs:label 'unclosed }")
    assert tokens[-1] == "'unclosed }"
    assert query_ids("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 ; rdfs:label 'unclosed }") == {"P31", "Q5"}


def test_semantic_match_handles_select_star_and_aggregates() -> None:
    assert same_query(
        "SELECT * WHERE { ?a wdt:P31 ?b . ?b wdt:P279 ?c }",
        "SELECT * WHERE { ?z wdt:P279 ?q . ?y wdt:P31 ?z }",
        canonical=True,
    )
    assert not same_query(
        "SELECT * WHERE { ?a wdt:P31 ?b . ?b wdt:P279 ?c }",
        "SELECT * WHERE { ?z wdt:P279 ?q . ?q wdt:P31 ?z }",  # the chain runs the other way
        canonical=True,
    )
    assert same_query(
        "SELECT (COUNT(?x) AS ?c) WHERE { ?x wdt:P31 wd:Q5 }",
        "SELECT (COUNT(?h) AS ?n) WHERE { ?h wdt:P31 wd:Q5 }",
        canonical=True,
    )
    # A filter on a different variable is a different query, even with the same triple patterns.
    assert semantic_match(
        "SELECT ?o WHERE { ?s pq:P585 ?t . wd:Q1045 p:P1082 ?s . ?s ps:P1082 ?o FILTER(YEAR(?s) = 2009) }",
        "SELECT ?obj WHERE { wd:Q1045 p:P1082 ?s . ?s ps:P1082 ?obj . ?s pq:P585 ?x FILTER(YEAR(?x) = 2009) }",
    ) == (False, "algebra")
    assert semantic_match(
        "SELECT ?o WHERE { ?s pq:P585 ?t . wd:Q1045 p:P1082 ?s . ?s ps:P1082 ?o FILTER(YEAR(?t) = 2009) }",
        "SELECT ?obj WHERE { wd:Q1045 p:P1082 ?s . ?s ps:P1082 ?obj . ?s pq:P585 ?x FILTER(YEAR(?x) = 2009) }",
    ) == (True, "algebra")


def test_semantic_match_with_interchangeable_variables() -> None:
    # QALD-10 question 2's shape: ?p1 and ?p2 play the same part, so the naming has a tie to break.
    a = "SELECT ?r WHERE { wd:Q1 wdt:P674 ?r . ?r wdt:P451 ?p1 , ?p2 . FILTER(?p1 != ?p2) }"
    b = "SELECT ?who WHERE { ?who wdt:P451 ?zeta , ?alpha . wd:Q1 wdt:P674 ?who . FILTER(?zeta != ?alpha) }"
    c = "SELECT ?who WHERE { ?who wdt:P451 ?zeta , ?alpha . wd:Q1 wdt:P674 ?zeta . FILTER(?zeta != ?alpha) }"
    assert same_query(a, b, canonical=True)
    assert not same_query(a, c, canonical=True)


def test_default_same_query_still_sees_variable_names() -> None:
    assert not same_query(RENAMED, GOLD)
    assert same_query(RENAMED, GOLD, canonical=True)


# --- BLEU -------------------------------------------------------------------------------------------------


def test_bleu_identical_is_100_and_disjoint_is_0() -> None:
    tokens = sparql_tokens(GOLD)
    assert corpus_bleu([tokens], [tokens]) == pytest.approx(100.0)
    record, overall = _one(RENAMED)
    assert record.bleu == pytest.approx(100.0)
    assert overall["bleu"] == pytest.approx(100.0)
    assert corpus_bleu([["a", "b", "c", "d"]], [["e", "f", "g", "h"]]) == 0.0


def test_bleu_one_wrong_token_of_ten() -> None:
    reference = [f"t{i}" for i in range(10)]
    hypothesis = [*reference[:9], "wrong"]
    # n-gram precisions 9/10, 8/9, 7/8, 6/7, equal lengths: BLEU = (6/10) ** (1/4).
    assert corpus_bleu([hypothesis], [reference]) == pytest.approx(100 * 0.6**0.25, abs=1e-6)


# --- outcomes ---------------------------------------------------------------------------------------------


def test_refused_invalid_and_unparsable_rows() -> None:
    rows = [
        {"id": "1", "prediction": "...", "status": "resolved", "sparql": GOLD},
        {"id": "2", "prediction": "...", "status": "refused", "reason": "entity below threshold"},
        {"id": "3", "prediction": "SELEC", "status": "invalid", "error": {"code": "empty", "message": "m"}},
        {"id": "4", "prediction": "SELECT ?x WHERE { ?x wdt:P31 wd:Q999999999999 "},  # direct, unparsable
    ]
    gold = [_record(GOLD, str(i)) for i in range(1, 5)]
    result = evaluate(rows, gold, catalog=CATALOG)
    outcomes = [r.outcome for r in result.records]
    assert outcomes == ["valid", "refused", "invalid", "invalid"]
    assert [r.query_em for r in result.records] == [True, False, False, False]
    assert [r.sqm for r in result.records] == [True, False, False, False]
    refused, invalid, broken = result.records[1:]
    assert refused.predicted_ids == () and refused.error == "entity below threshold"
    assert invalid.error == "empty: m"
    assert broken.predicted_ids == ("P31", "Q999999999999") and broken.error
    overall = result.overall
    assert overall["refusal_rate"] == 1 / 4
    assert overall["invalid_rate"] == 2 / 4
    assert overall["valid_rate"] == 1 / 4
    assert overall["query_em"] == 1 / 4
    # Denominator: distinct IDs of every predicted query, valid or not: 4 (row 1) + 2 (row 4).
    assert overall["predicted_ids"] == 6
    assert overall["hallucination_rate_catalog"] == 1 / 6
    assert set(result.by_outcome) == {"valid", "refused", "invalid"}
    assert result.by_outcome["invalid"]["n"] == 2


def test_bad_rows_are_clear_errors() -> None:
    gold = [_record(GOLD)]
    with pytest.raises(EvaluationError, match="not in the gold"):
        evaluate([{"id": "2", "prediction": GOLD}], gold)
    with pytest.raises(EvaluationError, match="twice"):
        evaluate([{"id": "1", "prediction": GOLD}, {"id": 1, "prediction": GOLD}], gold)
    with pytest.raises(EvaluationError, match="no 'id'"):
        evaluate([{"prediction": GOLD}], gold)
    with pytest.raises(EvaluationError, match="neither"):
        evaluate([{"id": "1", "question": "?"}], gold)
    with pytest.raises(EvaluationError, match="unknown status"):
        evaluate([{"id": "1", "prediction": GOLD, "status": "maybe"}], gold)


def test_gold_records_without_a_prediction_are_counted_not_scored() -> None:
    result = evaluate([{"id": "1", "prediction": GOLD}], [_record(GOLD, "1"), _record(GOLD, "2")])
    assert result.overall["n"] == 1 and result.gold_without_prediction == 1


def test_by_template_groups_on_the_gold_template_id() -> None:
    gold = [
        _record(GOLD, "1", meta=(("template_id", "T1"),)),
        _record(GOLD, "2", meta=(("template_id", "T1"),)),
        _record(GOLD, "3", meta=(("template_id", "T2"),)),
    ]
    rows = [
        {"id": "1", "prediction": GOLD},
        {"id": "2", "prediction": OTHER_ID},
        {"id": "3", "prediction": GOLD},
    ]
    result = evaluate(rows, gold)
    assert result.by_template["T1"]["query_em"] == 0.5
    assert result.by_template["T2"]["query_em"] == 1.0


# --- answers ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("predicted", "gold", "expected"),
    [
        ({"a", "b"}, {"a", "b"}, (1.0, 1.0, 1.0)),
        ({"a"}, {"a", "b", "c"}, (1.0, 1 / 3, 0.5)),
        ({"a", "x"}, {"a", "b"}, (0.5, 0.5, 0.5)),
        ({"x"}, {"a"}, (0.0, 0.0, 0.0)),
        (set(), set(), (1.0, 1.0, 1.0)),  # QALD: both empty
        (set(), {"a"}, (1.0, 0.0, 0.0)),  # QALD: nothing answered
        ({"a"}, set(), (0.0, 0.0, 0.0)),  # answers where there are none
    ],
)
def test_answer_scores_follow_qald_rules(predicted: set, gold: set, expected: tuple) -> None:
    scores = answer_scores(predicted, gold)
    assert (scores.precision, scores.recall, scores.f1) == pytest.approx(expected)


KG = """\
<http://www.wikidata.org/entity/Q1> <http://www.wikidata.org/prop/direct/P2> <http://www.wikidata.org/entity/Q10> .
<http://www.wikidata.org/entity/Q1> <http://www.wikidata.org/prop/direct/P2> <http://www.wikidata.org/entity/Q11> .
<http://www.wikidata.org/entity/Q1> <http://www.wikidata.org/prop/direct/P2> <http://www.wikidata.org/entity/Q12> .
<http://www.wikidata.org/entity/Q2> <http://www.wikidata.org/prop/direct/P2> <http://www.wikidata.org/entity/Q10> .
<http://www.wikidata.org/entity/Q2> <http://www.wikidata.org/prop/direct/P3> "7"^^<http://www.w3.org/2001/XMLSchema#integer> .
<http://www.wikidata.org/entity/Q283> <http://www.wikidata.org/prop/direct/P2102> "100"^^<http://www.w3.org/2001/XMLSchema#decimal> .
"""
Q1_ANSWERS = tuple(f"http://www.wikidata.org/entity/Q{n}" for n in (10, 11, 12))


@pytest.fixture(scope="module")
def kg_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("kg") / "kg.nt"
    path.write_text(KG)
    return path


def test_answers_from_a_real_store(kg_file: Path) -> None:
    from pgmr.stores import open_store

    gold = [
        _record("SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }", "1", answers=Q1_ANSWERS),
        _record("SELECT ?x WHERE { wd:Q3 wdt:P2 ?x }", "2", answers=()),
        _record("SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }", "3", answers=Q1_ANSWERS),
        _record("ASK { wd:Q1 wdt:P2 wd:Q10 }", "4", boolean=True),
        _record("SELECT ?n WHERE { wd:Q2 wdt:P3 ?n }", "5"),  # no dataset answers: run the gold query
        _record("SELECT ?x WHERE { wd:Q3 wdt:P2 ?x }", "6", answers=()),
    ]
    rows = [
        {"id": "1", "prediction": "SELECT ?x WHERE { wd:Q2 wdt:P2 ?x }"},  # {Q10}: P=1, R=1/3
        {"id": "2", "prediction": "SELECT ?y WHERE { wd:Q4 wdt:P2 ?y }"},  # both empty: 1/1/1
        {"id": "3", "prediction": "x", "status": "refused", "reason": "r"},  # nothing: P=1, R=0
        {"id": "4", "prediction": "ASK { wd:Q1 wdt:P2 ?o }"},  # true = true
        {"id": "5", "prediction": "SELECT ?m WHERE { ?s wdt:P3 ?m }"},  # "7" = "7"
        {"id": "6", "prediction": "SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }"},  # answers where gold has none
    ]
    store = open_store(kg_file)
    try:
        result = evaluate(rows, gold, store=store, timeout=10)
    finally:
        store.close()
    scores = [(a.precision, a.recall, a.f1) for a in (r.answers for r in result.records) if a is not None]
    expected = [(1, 1 / 3, 0.5), (1, 1, 1), (1, 0, 0), (1, 1, 1), (1, 1, 1), (0, 0, 0)]
    assert [pytest.approx(s) for s in scores] == expected
    assert result.records[4].answers is not None and result.records[4].answers.gold_source == "store"
    assert result.records[2].answers is not None and result.records[2].answers.error == "no executable query"
    overall = result.overall
    assert overall["answer_precision"] == pytest.approx(5 / 6)
    assert overall["answer_recall"] == pytest.approx(5 / 9)
    assert overall["answer_f1"] == pytest.approx(3.5 / 6)
    assert overall["answer_qald_f1"] == pytest.approx(2 / 3)  # F of macro P and macro R
    assert overall["answer_scored"] == 6 and overall["answer_prediction_errors"] == 0


def test_numbers_compare_by_value(kg_file: Path) -> None:
    from pgmr.stores import open_store

    # QALD-10 question 8 gives "+100" (xsd:decimal); the store returns the same number as "100".
    gold = [_record("SELECT ?t WHERE { wd:Q283 wdt:P2102 ?t }", "8", answers=("+100",))]
    store = open_store(kg_file)
    try:
        result = evaluate([{"id": "8", "prediction": gold[0].sparql}], gold, store=store)
    finally:
        store.close()
    answers = result.records[0].answers
    assert answers is not None and answers.f1 == 1.0
    assert [normalize_answer(x) for x in ("+100", "100.0", "1E2", "-0", "Q100", "2009")] == [
        "100",
        "100",
        "100",
        "0",
        "Q100",
        "2009",
    ]


def test_store_errors_count_as_empty_answers(kg_file: Path) -> None:
    from pgmr.stores.http_store import HttpSparqlStore
    from sparql_server import FaultProxy, OxigraphServer

    gold = [
        _record("SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }", "1", answers=Q1_ANSWERS),
        _record("SELECT ?x WHERE { wd:Q1 wdt:P2 ?x }", "2"),  # gold query run on the store
    ]
    rows = [{"id": "1", "prediction": gold[0].sparql}, {"id": "2", "prediction": gold[1].sparql}]
    with OxigraphServer(kg_file) as server, FaultProxy(server.query_url) as endpoint:
        store = HttpSparqlStore(endpoint.url, timeout=5, retries=0)
        endpoint.fail(503, times=3)  # the prediction of row 1, then gold and prediction of row 2
        result = evaluate(rows, gold, store=store)
        store.close()
    first, second = (r.answers for r in result.records)
    assert first is not None and second is not None
    assert (first.precision, first.recall, first.f1) == (1.0, 0.0, 0.0)
    assert first.error is not None and "503" in first.error
    assert second.gold_error is not None and second.f1 is None  # unknown gold: not scored
    assert result.overall["answer_scored"] == 1
    assert result.overall["answer_gold_errors"] == 1
    assert result.overall["answer_prediction_errors"] == 2
