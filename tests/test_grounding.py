"""Entity-label grounding against the question (pgmr.resolver.grounding)."""

from __future__ import annotations

import pytest

from pgmr.query import parse, to_text
from pgmr.resolver.grounding import (
    LITERAL,
    GroundingConfig,
    ground,
    ground_labels,
    ground_literals,
    question_spans,
)

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


# -- with the memory's labels -------------------------------------------------------------------------------------

MEMORY_LABELS = {
    "entity": {"roman polanski", "paris", "ivory coast", "babe ruth", "robert"},
    "relation": {"place of birth", "mia constituent id", "population"},
}


def known(kind: str, text: str) -> bool:
    return text.casefold() in MEMORY_LABELS[kind]


def test_a_memory_label_is_kept_and_a_memory_span_is_preferred() -> None:
    query = parse(QUERY.replace("Roman Poly Poli", "Babe Ruth").replace("Paris", "The Ivroy Coast"))
    question = "Was Babe_Ruth born in the Ivory Coast?"
    # Without the memory both labels follow the question's spelling, the article included.
    _, plain = ground_labels(query, question)
    assert [(s.placeholder, s.grounded) for s in plain] == [
        ("entity0", "Babe_Ruth"),
        ("entity1", "the Ivory Coast"),
    ]
    grounded, snaps = ground_labels(query, question, known=known)
    assert grounded.placeholder("entity0").label == "Babe Ruth"  # a memory label: not re-spelt
    assert [(s.placeholder, s.generated, s.grounded) for s in snaps] == [
        ("entity1", "The Ivroy Coast", "Ivory Coast")
    ]


def test_a_memory_label_that_is_only_a_fragment_of_a_closer_span_does_not_win() -> None:
    """The memory knows "class" and "bell" but not the names they are part of: an entity the memory lacks.
    Snapping to the fragment would resolve it with full support; the closer full span keeps it unsupported."""
    fragments = {"entity": {"class", "bell", "ivory coast"}, "relation": set()}

    def knows(kind: str, text: str) -> bool:
        return text.casefold() in fragments[kind]

    for generated, question, expected in [
        ("CFR/22 class", "Is the quantity of the CFR DE 241 class more than 0.8?", "CFR DE 241 class"),
        ("Bell Jelly", "Who is the author of The Bell Jar", "Bell Jar"),
        # Extra function words do not make a fragment: the memory label still wins.
        ("The Ivroy Coast", "Was Roman Polanski born in the Ivory Coast?", "Ivory Coast"),
    ]:
        query = parse(QUERY.replace("Paris", generated))
        grounded, _ = ground_labels(query, question, known=knows)
        assert grounded.placeholder("entity1").label == expected, generated
    # A closer span that does not hold the memory label as words ("Bellas" is not "Bell" plus a word): the memory
    # label wins, as before.
    query = parse(QUERY.replace("Paris", "Bellax"))
    grounded, _ = ground_labels(query, "Is Bell near Bellas?", known=knows)
    assert grounded.placeholder("entity1").label == "Bell"


def test_an_entity_falls_back_to_the_closest_span_when_no_memory_span_is_close() -> None:
    query = parse(QUERY.replace("Roman Poly Poli", "Jonathan Swiff"))
    grounded, _ = ground_labels(query, "Was Jonathan Swift born in Paris?", known=known)
    assert grounded.placeholder("entity0").label == "Jonathan Swift"


def test_an_unknown_relation_snaps_only_to_a_relation_label_of_the_memory() -> None:
    query = parse(
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
        "entity0 = [ENT] Roman Polanski [/ENT]\nrelation0 = [REL] Miastituent ID [/REL]"
    )
    grounded, snaps = ground_labels(query, "What is the MIA constituent ID of Roman Polanski?", known=known)
    assert grounded.placeholder("relation0").label == "MIA constituent ID"
    assert [s.placeholder for s in snaps] == ["relation0"]
    # A paraphrase the memory does not know, and no relation span close to it: untouched, as without memory.
    para = parse(QUERY.replace("place of birth", "born i"))
    grounded, _ = ground_labels(para, "Was Roman Polanski born in Paris?", known=known)
    assert grounded.placeholder("relation0").label == "born i"
    # A relation label the memory knows is not touched, however close a span is (identifiers aside: below).
    grounded, snaps = ground_labels(parse(QUERY), "Was Roman Polanski's place of birthh Paris?", known=known)
    assert grounded.placeholder("relation0").label == "place of birth"
    # use_memory=False is the plain grounding, whatever `known` says.
    _, off = ground(
        query, "What is the MIA constituent ID of Roman Polanski?", GroundingConfig(use_memory=False), known
    )
    assert off == ()


def test_a_longer_name_the_memory_knows_wins_over_a_copied_part() -> None:
    names = {"entity": {"salta", "salta province", "west wing", "the west wing", "rudolf", "rudolf steiner"}}

    def knows(kind: str, text: str) -> bool:
        return text.casefold() in names.get(kind, set())

    skeleton = "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\nrelation0 = [REL] population [/REL]\n"
    query = parse(skeleton + "entity0 = [ENT] Salta [/ENT] city in Argentina")
    grounded, snaps = ground_labels(query, "What is the population of the Salta Province?", known=knows)
    assert grounded.placeholder("entity0").label == "Salta Province"
    assert grounded.placeholder("entity0").description == "city in Argentina"  # the generator's, kept
    assert [(s.placeholder, s.generated, s.grounded) for s in snaps] == [
        ("entity0", "Salta", "Salta Province")
    ]
    # Only function words more ("The West Wing" over "West Wing"): kept. Without the memory: kept.
    west = parse(skeleton + "entity0 = [ENT] West Wing [/ENT]")
    assert ground_labels(west, "What is the population of The West Wing?", known=knows)[1] == ()
    assert ground_labels(query, "What is the population of the Salta Province?")[1] == ()
    # The longer span is another entity of the query: both keep their names.
    two = parse(
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 wd:entity1 }\nrelation0 = [REL] given name [/REL]\n"
        "entity0 = [ENT] Rudolf Steiner [/ENT]\nentity1 = [ENT] Rudolf [/ENT]"
    )
    assert ground_labels(two, "Was Rudolf Steiner known as Rudolf?", known=knows)[1] == ()


def test_an_identifier_the_question_names_replaces_another_identifier_the_model_named() -> None:
    """Both IDs are memory labels: the one the question names wins, and the description (which described the
    model's choice) goes with the old label."""
    ids = {
        "entity": {"rinus michels"},
        "relation": {"wereld van oranje id", "nihon tarento meikan id", "id", "oranje id", "award received"},
    }

    def knows(kind: str, text: str) -> bool:
        return text.casefold() in ids[kind]

    query = parse(
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
        "entity0 = [ENT] Rinus Michels [/ENT]\n"
        "relation0 = [REL] Nihon Tarento Meikan ID [/REL] identifier of a Japanese talent database"
    )
    question = "What is Wereld van Oranje ID of Rinus Michels?"
    grounded, snaps = ground_labels(query, question, known=knows)
    # "Oranje ID" and "ID" are known spans too, but nested in the longer one.
    assert grounded.placeholder("relation0").label == "Wereld van Oranje ID"
    assert grounded.placeholder("relation0").description == ""
    assert [(s.placeholder, s.generated, s.grounded) for s in snaps] == [
        ("relation0", "Nihon Tarento Meikan ID", "Wereld van Oranje ID")
    ]
    # A label without an identifier word gives way too when it is the query's only relation label that is not
    # in the question; with two such labels, neither does (which one the question's ID replaces is unclear).
    one = parse(query.to_text().replace("Nihon Tarento Meikan ID", "award received"))
    grounded, _ = ground_labels(one, question, known=knows)
    assert grounded.placeholder("relation0").label == "Wereld van Oranje ID"
    two = parse(
        "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?y . ?y wdt:relation1 ?x }\n"
        "entity0 = [ENT] Rinus Michels [/ENT]\n"
        "relation0 = [REL] award received [/REL]\nrelation1 = [REL] winner [/REL]"
    )
    assert not [
        s for s in ground_labels(two, question, known=knows)[1] if s.placeholder.startswith("relation")
    ]
    # Kept: a question naming no identifier but the bare "ID", or two identifiers side by side; an identifier
    # another relation of the query already names; without memory.
    for other in [
        "What is the ID of Rinus Michels?",
        "Is the Wereld van Oranje ID or the Nihon Tarento Meikan ID of Rinus Michels longer?",
    ]:
        assert not [s for s in ground_labels(query, other, known=knows)[1] if s.placeholder == "relation0"]
    both = parse(
        "SELECT ?x ?y WHERE { wd:entity0 wdt:relation0 ?x . wd:entity0 wdt:relation1 ?y }\n"
        "entity0 = [ENT] Rinus Michels [/ENT]\n"
        "relation0 = [REL] Nihon Tarento Meikan ID [/REL]\nrelation1 = [REL] Wereld van Oranje ID [/REL]"
    )
    assert ground_labels(both, question, known=knows)[1] == ()
    # Two identifier labels the question does not name, one identifier it does: only the first takes it.
    two_ids = parse(both.to_text().replace("Wereld van Oranje ID", "Kino-teatr.ua person ID"))
    grounded, snaps = ground_labels(
        two_ids, question, known=lambda kind, text: knows(kind, text) or "kino" in text.casefold()
    )
    assert [s.placeholder for s in snaps] == ["relation0"]
    assert grounded.placeholder("relation1").label == "Kino-teatr.ua person ID"
    assert not [s for s in ground_labels(query, question)[1] if s.placeholder == "relation0"]


def test_config_is_validated() -> None:
    with pytest.raises(ValueError):
        GroundingConfig(min_similarity=1.5)
    with pytest.raises(ValueError):
        GroundingConfig(max_span_words=0)


# -- literals ---------------------------------------------------------------------------------------------------

LABEL_FILTER = (
    "SELECT DISTINCT ?sbj ?sbj_label WHERE { ?sbj wdt:relation0 wd:entity0 . ?sbj rdfs:label ?sbj_label . "
    "FILTER(CONTAINS(lcase(?sbj_label), '{word}')) . FILTER (lang(?sbj_label) = 'en') } LIMIT 25\n"
    "relation0 = [REL] instance of [/REL]\n"
    "entity0 = [ENT] famine [/ENT]"
)


def _literal(skeleton: str, *labels: str) -> str:
    lines = [skeleton] + [f"entity{i} = [ENT] {label} [/ENT]" for i, label in enumerate(labels)]
    return "\n".join(lines + ["relation0 = [REL] population [/REL]"])


def test_a_garbled_number_takes_the_question_number_in_the_models_format() -> None:
    query = parse(
        _literal(
            "SELECT ?value WHERE { wd:entity0 p:relation0 ?s . ?s ps:relation0 ?x filter(contains(?x,'36936.0')) }",
            "Phuket",
        )
    )
    grounded, snaps = ground_literals(query, "When did Phuket have a population of 394,169?")
    # Thousands separator dropped, the model's trailing ".0" kept (LC-QuAD writes such values so).
    assert "filter(contains(?x,'394169.0'))" in grounded.skeleton
    assert [(s.placeholder, s.generated, s.grounded) for s in snaps] == [(LITERAL, "'36936.0'", "'394169.0'")]
    assert grounded.placeholders == query.placeholders


def test_bare_comparison_numbers_are_grounded_but_limits_and_variables_are_not() -> None:
    query = parse(
        _literal(
            "ASK WHERE { wd:entity0 wdt:relation0 ?value1 filter(?value1 = 539000) } LIMIT 5", "Afghanistan"
        )
    )
    grounded, snaps = ground_literals(query, "Is the population of Afghanistan equal to 53,390,000?")
    assert (
        grounded.skeleton
        == "ASK WHERE { wd:entity0 wdt:relation0 ?value1 filter(?value1 = 53390000) } LIMIT 5"
    )
    assert len(snaps) == 1
    signed = parse(
        _literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(?x < -26.89189) }", "Santa Catarina")
    )
    assert (
        "filter(?x < -26.8989)"
        in ground_literals(signed, "Is the latitude of Santa Catarina below -26.8989?")[0].skeleton
    )


def test_two_garbled_numbers_go_to_different_question_numbers() -> None:
    query = parse(
        _literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(?x > 10) filter(?x < 21) }", "Chad")
    )
    grounded, snaps = ground_literals(query, "Is the population of Chad between 10 and 20?")
    assert "filter(?x > 10) filter(?x < 20)" in grounded.skeleton and len(snaps) == 1


def test_literals_in_the_question_and_questions_without_numbers_are_left_alone() -> None:
    query = parse(
        _literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(contains(YEAR(?x),'2007')) }", "Al Franken")
    )
    assert ground_literals(query, "What position did Al Franken hold on July 7, 2007?") == (query, ())
    # 1882, 7 and 3 are the question's numbers: the model's 1882 stays.
    year = parse(
        _literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(contains(YEAR(?x),'1882')) }", "Kafka")
    )
    assert ground_literals(year, "Where did Kafka live in 1882-7-3?") == (year, ())
    # "zero" is no digit string: nothing to snap to.
    zero = parse(_literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(?x = 0) }", "Mikko Lehtonen"))
    assert ground_literals(zero, "Did Mikko Lehtonen have zero career penalty minutes?") == (zero, ())


def test_a_garbled_word_takes_the_content_word_no_label_uses() -> None:
    query = parse(LABEL_FILTER.replace("{word}", "kinson"))
    grounded, snaps = ground_literals(query, "Tell me famine whose name has the word Turnip in it.")
    # "famine" is the entity's label, "Tell", "name", "word", "whose", "has", "in", "it" template words:
    # "Turnip" is what is left, lower-cased as the model wrote its literal.
    assert "CONTAINS(lcase(?sbj_label), 'turnip')" in grounded.skeleton
    assert "(lang(?sbj_label) = 'en')" in grounded.skeleton  # language tags are never literals to ground
    assert [(s.generated, s.grounded) for s in snaps] == [("'kinson'", "'turnip'")]
    kept = parse(LABEL_FILTER.replace("{word}", "turnip"))
    assert ground_literals(kept, "Tell me famine whose name has the word turnip in it.") == (kept, ())


def test_ground_runs_labels_then_literals_and_each_can_be_off() -> None:
    text = _literal("ASK WHERE { wd:entity0 wdt:relation0 ?x filter(?x = 552) }", "Dubay")
    question = "Is the population of Dubai equal to 540?"
    grounded, snaps = ground(parse(text), question)
    assert grounded.placeholder("entity0").label == "Dubai" and "filter(?x = 540)" in grounded.skeleton
    assert [s.placeholder for s in snaps] == ["entity0", LITERAL]
    labels_only, _ = ground(parse(text), question, GroundingConfig(literals=False))
    assert "filter(?x = 552)" in labels_only.skeleton and labels_only.placeholder("entity0").label == "Dubai"
    literals_only, _ = ground(parse(text), question, GroundingConfig(min_similarity=1.0))
    assert (
        "filter(?x = 540)" in literals_only.skeleton and literals_only.placeholder("entity0").label == "Dubay"
    )


def test_a_question_word_with_a_quote_is_escaped_and_the_query_still_parses() -> None:
    # Found on the unknown-URI test split: "d'Arc" went in unescaped and the resolver met an unclosed string.
    text = (
        "SELECT DISTINCT ?sbj WHERE { ?sbj wdt:relation0 wd:entity0 . ?sbj rdfs:label ?l . "
        "FILTER(CONTAINS(lcase(?l), 'darc')) . FILTER (lang(?l) = 'en') } LIMIT 25\n"
        "relation0 = [REL] instance of [/REL]\nentity0 = [ENT] human [/ENT]"
    )
    grounded, snaps = ground_literals(parse(text), "Which human has the word d'Arc in their name?")
    assert [(s.generated, s.grounded) for s in snaps] == [("'darc'", "'d\\'arc'")]
    assert "CONTAINS(lcase(?l), 'd\\'arc')" in grounded.skeleton
    assert parse(to_text(grounded)) == grounded  # it lexes and round-trips
