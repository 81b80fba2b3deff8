"""The reranker's `unasked` signal: type triples and qualifiers a question does not ask for."""

from __future__ import annotations

import json
from pathlib import Path

from pgmr.pipeline.asked import unasked_parts
from pgmr.pipeline.rerank import FEATURES, Reranker
from pgmr.query.model import Placeholder
from pgmr.resolver.model import Candidate, PlaceholderEvidence


def evidence(name: str, kind: str, label: str, chosen: str, chosen_label: str) -> PlaceholderEvidence:
    return PlaceholderEvidence(
        Placeholder(name, kind, label),  # type: ignore[arg-type]
        label,
        (Candidate(chosen, chosen_label, None, 0.9, 0.9),),
        0.0,
    )


HUMAN = evidence("entity1", "entity", "human", "Q5", "human")
CITY = evidence("entity1", "entity", "city", "Q515", "city")
POINT_IN_TIME = evidence("relation2", "relation", "point in time", "P585", "point in time")
TYPED = "SELECT DISTINCT ?x WHERE { wd:Q2283 wdt:P112 ?x . ?x wdt:P31 wd:Q5 }"
QUALIFIED = "SELECT ?x WHERE { wd:Q7186 p:P569 ?s . ?s ps:P569 ?x . ?s pq:P585 ?t }"


def test_a_type_the_question_does_not_name_is_unasked() -> None:
    assert unasked_parts("Who founded Microsoft?", TYPED, [HUMAN]) == 1
    assert unasked_parts("Which human founded Microsoft?", TYPED, [HUMAN]) == 0
    typed_city = TYPED.replace("wd:Q5", "wd:Q515")
    assert unasked_parts("Which cities are in Germany?", typed_city, [CITY]) == 0  # plural meets singular
    assert unasked_parts("Who founded Microsoft?", "SELECT ?x WHERE { wd:Q2283 wdt:P112 ?x }", []) == 0


def test_a_qualifier_needs_a_number_or_its_own_word() -> None:
    assert unasked_parts("When was Marie Curie born?", QUALIFIED, [POINT_IN_TIME]) == 1
    assert unasked_parts("What was her birth date in 1867?", QUALIFIED, [POINT_IN_TIME]) == 0
    assert unasked_parts("At what point in time was she born?", QUALIFIED, [POINT_IN_TIME]) == 0


def test_nothing_to_compare_counts_nothing() -> None:
    assert unasked_parts(None, TYPED, [HUMAN]) == 0
    assert unasked_parts("Who founded Microsoft?", None, [HUMAN]) == 0


def test_rerankers_fitted_before_the_signal_weigh_it_zero() -> None:
    shipped = json.loads(Path("models/pgmr-ensemble/reranker.json").read_text())
    assert "unasked" not in shipped["features"]
    reranker = Reranker.from_json(shipped, verifier=object())
    assert all(w["unasked"] == 0.0 for w in reranker.weights.values())
    assert reranker.to_json()["features"] == list(FEATURES)
