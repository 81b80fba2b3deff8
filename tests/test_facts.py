"""Role facts from training gold queries, and the triples they turn round (pgmr.resolver.facts)."""

from __future__ import annotations

import json

import pytest

from pgmr.config import resolve_data_dir
from pgmr.datasets import load_named
from pgmr.resolver.facts import FactsError, TrainingFacts, shipped_facts, triples

TRAINING = [
    # Q90 is the object of P36 (capital); things of class Q6256 are its subjects.
    "SELECT ?c WHERE { ?c wdt:P36 wd:Q90 . ?c wdt:P31 wd:Q6256 }",
    # Q1 is a subject of P50 (author), named on both sides of a yes/no question.
    "ASK WHERE { wd:Q1 wdt:P50 wd:Q2 }",
    # A statement: Q3 is a subject of P39, Q4 an object.
    "SELECT ?v WHERE { wd:Q3 p:P39 ?s . ?s ps:P39 wd:Q4 . ?s pq:P580 ?v }",
    # Continued with ';': not a stand-alone triple, so no fact.
    "SELECT ?x WHERE { ?x wdt:P17 wd:Q183 ; wdt:P31 wd:Q515 }",
]


@pytest.fixture(scope="module")
def facts() -> TrainingFacts:
    return TrainingFacts.from_sparql(TRAINING, {"dataset": "four queries"})


def test_facts_hold_each_side_of_each_property(facts: TrainingFacts) -> None:
    assert facts.entities["object"]["P36"] == {"Q90"}
    assert "P36" not in facts.entities["subject"]
    assert facts.classes["subject"]["P36"] == {"Q6256"}
    # The class constraint itself is no fact about P31.
    assert "P31" not in facts.entities["object"]
    assert facts.entities["subject"]["P50"] == {"Q1"} and facts.entities["object"]["P50"] == {"Q2"}
    assert facts.entities["subject"]["P39"] == {"Q3"} and facts.entities["object"]["P39"] == {"Q4"}
    assert "P17" not in facts.entities["object"]
    assert facts.support("P36", "Q90", "object", None) == 1
    assert facts.support("P36", "Q90", "object", "Q6256") == 2
    assert facts.support("P36", "Q90", "subject", None) == 0


def test_a_backwards_triple_is_turned_round_with_a_note(facts: TrainingFacts) -> None:
    skeleton = "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }"
    turned, notes = facts.turned(skeleton, {"entity0": "Q90", "relation0": "P36"})
    assert turned == "SELECT ?x WHERE { ?x wdt:relation0 wd:entity0 }"
    assert len(notes) == 1 and "Q90" in notes[0] and "object of P36" in notes[0]


def test_the_variables_class_alone_can_turn_a_triple(facts: TrainingFacts) -> None:
    # Q183 has no fact for P36, but the variable is a Q6256 and those are subjects of P36.
    skeleton = "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x . ?x wdt:relation1 wd:entity1 }"
    mapping = {"entity0": "Q183", "relation0": "P36", "relation1": "P31", "entity1": "Q6256"}
    turned, notes = facts.turned(skeleton, mapping)
    assert turned == "SELECT ?x WHERE { ?x wdt:relation0 wd:entity0 . ?x wdt:relation1 wd:entity1 }"
    assert "things of class Q6256 as its subject" in notes[0] and "Q183" not in notes[0]


@pytest.mark.parametrize(
    ("skeleton", "mapping"),
    [
        # Already the way round the facts show.
        ("SELECT ?x WHERE { ?x wdt:relation0 wd:entity0 }", {"entity0": "Q90", "relation0": "P36"}),
        # No fact about this entity and property: no evidence, no change.
        ("SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }", {"entity0": "Q64", "relation0": "P36"}),
        # Facts both ways round.
        ("SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }", {"entity0": "Q7", "relation0": "P36"}),
        # A class constraint is never turned, nor a triple between two entities.
        ("SELECT ?x WHERE { ?x wdt:relation0 wd:entity0 }", {"entity0": "Q90", "relation0": "P31"}),
        (
            "ASK WHERE { wd:entity0 wdt:relation0 wd:entity1 }",
            {"entity0": "Q90", "relation0": "P36", "entity1": "Q2"},
        ),
        # Continued with ';': turning it would change the next pattern's subject.
        (
            "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x ; wdt:relation0 ?y }",
            {"entity0": "Q90", "relation0": "P36"},
        ),
    ],
)
def test_no_evidence_against_a_triple_leaves_it_as_generated(skeleton: str, mapping: dict[str, str]) -> None:
    facts = TrainingFacts.from_sparql(
        [*TRAINING, "ASK { wd:Q7 wdt:P36 wd:Q8 }", "ASK { wd:Q9 wdt:P36 wd:Q7 }"]
    )
    assert facts.turned(skeleton, mapping) == (skeleton, ())


def test_triples_skips_what_the_lexer_cannot_read() -> None:
    assert triples('SELECT ?x WHERE { ?x wdt:P1 "never closed }') == []
    assert [
        t.predicate.text for t in triples("SELECT * { ?a wdt:P1 ?b . ?b rdfs:label ?l . ?b p:P2 ?s }")
    ] == ["wdt:P1"]


def test_facts_survive_json_and_reject_a_bad_file(facts: TrainingFacts) -> None:
    again = TrainingFacts.from_json(json.loads(json.dumps(facts.to_json())))
    assert again.to_json() == facts.to_json()
    assert again.provenance == {"dataset": "four queries"}
    with pytest.raises(FactsError, match="entities"):
        TrainingFacts.from_json({"classes": {"subject": {}, "object": {}}})
    with pytest.raises(FactsError, match="lists of IDs"):
        TrainingFacts.from_json(
            {"entities": {"subject": {"P1": "Q1"}, "object": {}}, "classes": {"subject": {}, "object": {}}}
        )


@pytest.mark.slow
def test_shipped_facts_are_the_training_parts_and_leave_validation_out() -> None:
    """The shipped file is what scripts/build_facts.py writes from LC-QuAD 2.0 train without the validation
    carve, so the rule's validation figures never saw the answers."""
    try:
        data_dir = resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no ../shared/data")
    train = load_named("lcquad2-train-part", data_dir).records
    rebuilt = TrainingFacts.from_sparql(r.sparql for r in train)
    shipped = shipped_facts()
    assert shipped.provenance["records"] == len(train)
    assert shipped.to_json()["entities"] == rebuilt.to_json()["entities"]
    assert shipped.to_json()["classes"] == rebuilt.to_json()["classes"]
