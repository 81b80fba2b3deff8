"""Entity-label grounding against the question (pgmr.generators.grounding)."""

from __future__ import annotations

import pytest

from pgmr.generators.grounding import GroundingConfig, ground_labels, question_spans
from pgmr.query import parse

QUERY = (
    "ASK WHERE { wd:entity0 wdt:relation0 wd:entity1 }\n"
    "entity0 = [ENT] Roman Poly Poli [/ENT]\n"
    "relation0 = [REL] place of birth [/REL]\n"
    "entity1 = [ENT] Paris [/ENT]"
)


def test_a_misspelt_copy_snaps_to_the_question_span() -> None:
    grounded, snaps = ground_labels(parse(QUERY), "Was Roman Polanski born in Paris?")
    assert grounded.placeholder("entity0").label == "Roman Polanski"
    assert [(s.placeholder, s.generated, s.grounded) for s in snaps] == [
        ("entity0", "Roman Poly Poli", "Roman Polanski")
    ]
    # The skeleton, the relation and a label already in the question are untouched.
    assert grounded.skeleton == parse(QUERY).skeleton
    assert grounded.placeholder("relation0").label == "place of birth"
    assert grounded.placeholder("entity1").label == "Paris"


def test_labels_far_from_every_span_stay_as_generated() -> None:
    query = parse(QUERY.replace("Roman Poly Poli", "United States of America"))
    # Every span of this question is under 0.5 from both entity labels. (At 0.5 a short label can still
    # snap to an unrelated short word: "Paris" vs "Was" is exactly 0.5; docs/generators.md.)
    grounded, snaps = ground_labels(query, "Did Roman Polanski come from the USA?")
    assert snaps == () and grounded == query


def test_relation_labels_are_never_snapped() -> None:
    query = parse(QUERY.replace("place of birth", "born i"))
    grounded, _ = ground_labels(query, "Was Roman Polanski born in Paris?")
    assert grounded.placeholder("relation0").label == "born i"


def test_threshold_one_only_accepts_exact_spans_and_possessives_are_trimmed() -> None:
    query = parse(QUERY.replace("Roman Poly Poli", "Napoleo"))
    strict, snaps = ground_labels(query, "What was Napoleon's religion?", GroundingConfig(min_similarity=1.0))
    assert snaps == () and strict.placeholder("entity0").label == "Napoleo"
    loose, _ = ground_labels(query, "What was Napoleon's religion?")
    assert loose.placeholder("entity0").label == "Napoleon"
    assert "Napoleon" in question_spans("What was Napoleon's religion?")


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        GroundingConfig(min_similarity=1.5)
    with pytest.raises(ValueError):
        GroundingConfig(max_span_words=0)
