"""The behaviour every `SparqlStore` backend owes its callers, as a reusable pytest class.

A backend's test class inherits `StoreContract` and provides one fixture, `store`: a store holding exactly
`CONTRACT_NT` (the class-scoped `contract_file` fixture writes it to a file to load). Nothing here knows
which backend it runs on::

    class TestMyStore(StoreContract):
        @pytest.fixture(scope="class")
        @classmethod
        def store(cls, contract_file: Path) -> Iterator[SparqlStore]:
            with MyStore.from_file(contract_file) as store:
                yield store
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from pgmr.stores import (
    QueryResult,
    QuerySyntaxError,
    ReadOnlyError,
    SparqlStore,
    StoreTimeout,
    Term,
)

WD = "http://www.wikidata.org/entity/"
WDT = "http://www.wikidata.org/prop/direct/"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
SCHEMA_DESCRIPTION = "http://schema.org/description"
XSD = "http://www.w3.org/2001/XMLSchema#"

CONTRACT_NT = f"""\
<{WD}Q64> <{RDFS_LABEL}> "Berlin"@en .
<{WD}Q64> <{RDFS_LABEL}> "Berlin"@de .
<{WD}Q64> <{SCHEMA_DESCRIPTION}> "capital and largest city of Germany" .
<{WD}Q64> <{WDT}P31> <{WD}Q515> .
<{WD}Q64> <{WDT}P1082> "3755251"^^<{XSD}decimal> .
<{WD}Q64> <{WDT}P571> "1237-01-01T00:00:00Z"^^<{XSD}dateTime> .
<{WD}Q1055> <{RDFS_LABEL}> "Hamburg"@en .
<{WD}Q1055> <{RDFS_LABEL}> "Hambourg"@fr .
<{WD}Q1055> <{WDT}P31> <{WD}Q515> .
<{WD}Q1055> <{WDT}P1082> "1841179"^^<{XSD}integer> .
<{WD}Q1055> <http://example.org/note> _:note1 .
_:note1 <{RDFS_LABEL}> "a note on \\"Hamburg\\"\\nsecond line" .
<{WD}Q515> <{RDFS_LABEL}> "city"@en .
<{WD}Q183> <{WDT}P36> <{WD}Q64> .
"""
CONTRACT_TRIPLES = CONTRACT_NT.count(" .\n")

# A cartesian product over the whole graph that streams rows for a very long time (14^7 rows).
SLOW_QUERY = "SELECT ?a WHERE { ?a ?b ?c . ?d ?e ?f . ?g ?h ?i . ?j ?k ?l . ?m ?n ?o . ?p ?q ?r . ?s ?t ?u }"

UPDATES = [
    "INSERT DATA { wd:Q64 wdt:P31 wd:Q5 }",
    "DELETE DATA { wd:Q64 wdt:P31 wd:Q515 }",
    "DELETE WHERE { ?s ?p ?o }",
    "PREFIX ex: <http://example.org/>\n# a comment first\ndelete { ?s ?p ?o } insert { ?s ex:p 1 } where { ?s ?p ?o }",
    "WITH <http://example.org/g> DELETE { ?s ?p ?o } WHERE { ?s ?p ?o }",
    "LOAD <http://example.org/data.nt>",
    "CLEAR ALL",
    "CLEAR DEFAULT",
    "DROP ALL",
    "CREATE GRAPH <http://example.org/g>",
    "COPY DEFAULT TO <http://example.org/g>",
    "ADD DEFAULT TO <http://example.org/g>",
    "MOVE DEFAULT TO <http://example.org/g>",
]


__all__ = [
    "CONTRACT_NT",
    "CONTRACT_TRIPLES",
    "RDFS_LABEL",
    "SCHEMA_DESCRIPTION",
    "SLOW_QUERY",
    "UPDATES",
    "WD",
    "WDT",
    "XSD",
    "StoreContract",
]


def _count(store: SparqlStore) -> int:
    result = store.query("SELECT (COUNT(*) AS ?n) WHERE { ?s ?p ?o }")
    return int(result.rows[0]["n"].value)


class StoreContract:
    """Inherit and provide a `store` fixture (holding CONTRACT_NT)."""

    @pytest.fixture(scope="class")
    @classmethod
    def contract_file(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        path = tmp_path_factory.mktemp("contract") / "contract.nt"
        path.write_text(CONTRACT_NT, encoding="utf-8")
        return path

    def test_is_a_sparql_store(self, store: SparqlStore) -> None:
        assert isinstance(store, SparqlStore)

    def test_holds_the_contract_graph(self, store: SparqlStore) -> None:
        assert _count(store) == CONTRACT_TRIPLES

    def test_select_iris_with_undeclared_wikidata_prefixes(self, store: SparqlStore) -> None:
        result = store.query("SELECT ?city WHERE { ?city wdt:P31 wd:Q515 } ORDER BY ?city")
        assert result.kind == "bindings"
        assert result.variables == ("city",)
        assert [row["city"] for row in result.rows] == [Term.iri(WD + "Q1055"), Term.iri(WD + "Q64")]

    def test_declared_prefixes_are_kept(self, store: SparqlStore) -> None:
        result = store.query("PREFIX wd: <http://www.wikidata.org/entity/> ASK { wd:Q183 wdt:P36 wd:Q64 }")
        assert result.boolean is True

    def test_typed_literals(self, store: SparqlStore) -> None:
        result = store.query("SELECT ?pop ?inception WHERE { wd:Q64 wdt:P1082 ?pop ; wdt:P571 ?inception }")
        (row,) = result.rows
        assert row["pop"] == Term("literal", "3755251", XSD + "decimal")
        assert row["inception"] == Term("literal", "1237-01-01T00:00:00Z", XSD + "dateTime")
        count = store.query("SELECT (COUNT(?c) AS ?n) WHERE { ?c wdt:P31 wd:Q515 }").rows[0]["n"]
        assert count == Term("literal", "2", XSD + "integer")

    def test_language_tags(self, store: SparqlStore) -> None:
        result = store.query("SELECT ?label WHERE { wd:Q64 rdfs:label ?label }")
        labels = {(t.value, t.language, t.datatype) for t in result.values()}
        assert labels == {("Berlin", "en", None), ("Berlin", "de", None)}
        result = store.query('SELECT ?x WHERE { ?x rdfs:label "Hambourg"@fr }')
        assert result.values() == [Term.iri(WD + "Q1055")]

    def test_simple_literal_has_no_datatype(self, store: SparqlStore) -> None:
        (term,) = store.query("SELECT ?d WHERE { wd:Q64 schema:description ?d }").values()
        assert term == Term("literal", "capital and largest city of Germany")
        assert term.datatype is None and term.language is None

    def test_escaped_characters_and_blank_nodes(self, store: SparqlStore) -> None:
        result = store.query(
            "SELECT ?n ?text WHERE { wd:Q1055 <http://example.org/note> ?n . ?n rdfs:label ?text }"
        )
        (row,) = result.rows
        assert row["n"].kind == "bnode" and row["n"].value
        assert row["text"].value == 'a note on "Hamburg"\nsecond line'

    def test_unbound_variables_are_absent_and_values_keep_order(self, store: SparqlStore) -> None:
        result = store.query(
            "SELECT ?city ?capitalOf WHERE { ?city wdt:P31 wd:Q515 OPTIONAL { ?capitalOf wdt:P36 ?city } } "
            "ORDER BY ?city"
        )
        assert result.variables == ("city", "capitalOf")
        hamburg, berlin = result.rows
        assert "capitalOf" not in hamburg
        assert berlin["capitalOf"] == Term.iri(WD + "Q183")
        assert result.values() == [Term.iri(WD + "Q1055"), Term.iri(WD + "Q64"), Term.iri(WD + "Q183")]

    def test_empty_result(self, store: SparqlStore) -> None:
        result = store.query("SELECT ?x WHERE { ?x wdt:P31 wd:Q5 }")
        assert result.kind == "bindings" and result.rows == () and result.values() == []

    def test_ask(self, store: SparqlStore) -> None:
        assert store.query("ASK { wd:Q183 wdt:P36 wd:Q64 }") == QueryResult("boolean", boolean=True)
        assert store.query("ASK { wd:Q183 wdt:P36 wd:Q1055 }") == QueryResult("boolean", boolean=False)

    def test_construct_gives_graph_rows(self, store: SparqlStore) -> None:
        result = store.query("CONSTRUCT { ?c rdfs:label ?l } WHERE { ?c wdt:P31 wd:Q515 ; rdfs:label ?l }")
        assert result.kind == "graph" and result.variables == ("s", "p", "o")
        triples = {(r["s"].value, r["p"].value, r["o"].value, r["o"].language) for r in result.rows}
        assert triples == {
            (WD + "Q64", RDFS_LABEL, "Berlin", "en"),
            (WD + "Q64", RDFS_LABEL, "Berlin", "de"),
            (WD + "Q1055", RDFS_LABEL, "Hamburg", "en"),
            (WD + "Q1055", RDFS_LABEL, "Hambourg", "fr"),
        }

    def test_results_round_trip_through_sparql_json(self, store: SparqlStore) -> None:
        for query in (
            "SELECT ?c ?l WHERE { ?c wdt:P31 wd:Q515 OPTIONAL { ?c rdfs:label ?l } }",
            "ASK { wd:Q183 wdt:P36 wd:Q64 }",
        ):
            result = store.query(query)
            assert QueryResult.from_json(result.to_json()) == result

    def test_concurrent_queries_get_their_own_answers(self, store: SparqlStore) -> None:
        # The pipeline runs store queries from many threads at once (the service's request threads).
        queries = {
            "SELECT ?x WHERE { wd:Q183 wdt:P36 ?x }": [Term.iri(WD + "Q64")],
            "SELECT ?x WHERE { ?x rdfs:label 'Hambourg'@fr }": [Term.iri(WD + "Q1055")],
            "SELECT ?x WHERE { wd:Q64 wdt:P31 ?x }": [Term.iri(WD + "Q515")],
        }
        work = list(queries) * 8
        with ThreadPoolExecutor(max_workers=8) as pool:
            answers = list(pool.map(lambda q: store.query(q).values(), work))
        assert answers == [queries[q] for q in work]

    @pytest.mark.parametrize("update", UPDATES)
    def test_updates_are_refused_and_change_nothing(self, store: SparqlStore, update: str) -> None:
        before = _count(store)
        with pytest.raises(ReadOnlyError, match="SPARQL UPDATE is refused") as info:
            store.query(update)
        assert info.value.code == "read_only"
        assert _count(store) == before == CONTRACT_TRIPLES

    @pytest.mark.parametrize(
        "bad",
        [
            "SELECT ?x WHERE { ?x wdt:P31 ",
            "SELECT ?x WHERE { ?x undeclared:P31 ?y }",
            "SELEC ?x WHERE { ?x ?p ?o }",
            "ASK { ?x ?p 'open string }",
            "   ",
        ],
    )
    def test_malformed_queries_raise_query_syntax_error(self, store: SparqlStore, bad: str) -> None:
        with pytest.raises(QuerySyntaxError) as info:
            store.query(bad)
        assert info.value.code == "syntax" and str(info.value)

    def test_timeout_raises_store_timeout_and_store_stays_usable(self, store: SparqlStore) -> None:
        started = time.monotonic()
        with pytest.raises(StoreTimeout):
            store.query(SLOW_QUERY, timeout=0.3)
        assert time.monotonic() - started < 3.0
        assert store.query("ASK { wd:Q183 wdt:P36 wd:Q64 }").boolean is True
