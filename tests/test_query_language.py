from __future__ import annotations

import pytest

from pgmr.query import IntermediateQuery, Placeholder, parse
from pgmr.query import errors as E

CANONICAL = (
    "SELECT ?obj WHERE { wd:entity0 p:relation0 ?s . ?s ps:relation0 ?obj . "
    "?s pq:relation1 ?x filter(contains(YEAR(?x),'2009')) }\n"
    "entity0 = [ENT] Somalia [/ENT] country in the Horn of Africa\n"
    "relation0 = [REL] population [/REL] number of people inhabiting the place\n"
    "relation1 = [REL] point in time [/REL]"
)


def test_parse_gives_typed_placeholders_and_prints_back() -> None:
    q = parse(CANONICAL)
    assert isinstance(q, IntermediateQuery)
    assert q.names == ("entity0", "relation0", "relation1")
    assert q.placeholder("entity0") == Placeholder(
        "entity0", "entity", "Somalia", "country in the Horn of Africa"
    )
    assert q.placeholder("relation1").description == ""
    assert q.to_text() == CANONICAL


def test_multiline_body_and_blank_lines_in_mapping() -> None:
    text = "SELECT ?x WHERE {\n  wd:entity0 wdt:relation0 ?x .\n}\nentity0 = [ENT] Hamburg [/ENT]\n\n" + (
        "relation0 = [REL] twinned administrative body [/REL] twin towns"
    )
    q = parse(text)
    assert q.skeleton == "SELECT ?x WHERE {\n  wd:entity0 wdt:relation0 ?x .\n}"
    assert [p.kind for p in q.placeholders] == ["entity", "relation"]


def test_property_used_as_item_is_a_relation_under_wd() -> None:
    q = parse(
        "SELECT ?x WHERE { ?x wdt:relation0 wd:relation1 }\nrelation0 = [REL] a [/REL]\nrelation1 = [REL] b [/REL]"
    )
    assert q.placeholder("relation1").kind == "relation"


def test_strings_and_comments_are_not_placeholders() -> None:
    q = parse("SELECT ?x WHERE { ?x rdfs:label 'wd:Q42 wd:entity7' } # wd:Q5\n")
    assert q.placeholders == ()


@pytest.mark.parametrize(
    ("text", "error", "line"),
    [
        ("", E.EmptyQueryError, None),
        ("   \n  ", E.EmptyQueryError, None),
        ("entity0 = [ENT] a [/ENT]", E.EmptyQueryError, None),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x \nentity0 = [ENT] a [/ENT]", E.UnbalancedBracketsError, 1),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x ) }\nentity0 = [ENT] a [/ENT]", E.UnbalancedBracketsError, 1),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }", E.MissingMappingError, 1),
        ("SELECT ?x WHERE { ?y ?p ?x }\nentity0 = [ENT] a [/ENT]", E.UnusedMappingError, 2),
        (
            "SELECT ?x WHERE { wd:entity0 ?p ?x }\nrelation0 = [REL] a [/REL]\nentity0 = [ENT] a [/ENT]",
            E.UnusedMappingError,
            2,
        ),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [REL] a [/REL]", E.KindClashError, 2),
        ("SELECT ?x WHERE { ?x wdt:entity0 ?y }\nentity0 = [ENT] a [/ENT]", E.KindClashError, 1),
        (
            "SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a [/ENT]\nentity0 = [ENT] b [/ENT]",
            E.DuplicatePlaceholderError,
            3,
        ),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT]   [/ENT] desc", E.EmptyLabelError, 2),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a [/REL]", E.MalformedMappingError, 2),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a", E.MalformedMappingError, 2),
        (
            "SELECT ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a [/ENT]\nand then some",
            E.MalformedMappingError,
            3,
        ),
        ("SELECT ?x WHERE { wd:entity0 ?p ?x }\nthing0 = [ENT] a [/ENT]", E.MalformedMappingError, 2),
        ("SELECT ?x WHERE { wd:Q42 ?p ?x }", E.RawIdentifierError, 1),
        ("SELECT ?x WHERE { <http://www.wikidata.org/entity/Q42> ?p ?x }", E.RawIdentifierError, 1),
        ("SELECT ?x WHERE { wd:Hamburg ?p ?x }", E.InvalidPlaceholderError, 1),
        ("SELECT ?x WHERE { ex:entity0 ?p ?x }\nentity0 = [ENT] a [/ENT]", E.InvalidPlaceholderError, 1),
        ("SELEC ?x WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a [/ENT]", E.InvalidSparqlError, 1),
        ("DELETE WHERE { wd:entity0 ?p ?x }\nentity0 = [ENT] a [/ENT]", E.InvalidSparqlError, 1),
        ("SELECT ?x WHERE { ?x ?p 'open }", E.UnterminatedTokenError, 1),
        ("garbage", E.InvalidSparqlError, 1),
    ],
)
def test_malformed_output_raises_one_named_error(text: str, error: type, line: int | None) -> None:
    with pytest.raises(error) as info:
        parse(text)
    assert isinstance(info.value, E.IntermediateQueryError)
    assert info.value.line == line


def test_non_text_input_is_a_query_error() -> None:
    with pytest.raises(E.IntermediateQueryError):
        parse(None)
    with pytest.raises(E.IntermediateQueryError):
        parse(b"SELECT")
