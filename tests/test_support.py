"""The refusal support model: its signals on a real memory (real encoder, real FAISS), the shipped calibration,
fitting, and the refusal it drives (a placeholder whose best candidate is probably wrong is refused, and why)."""

from __future__ import annotations

import json
import math

import pytest

from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.memory import Memory
from pgmr.query import parse
from pgmr.resolver import Refusal, Resolution, Resolver, ResolverConfig
from pgmr.resolver.fitting import auc, fit_logistic
from pgmr.resolver.support import (
    FEATURES,
    NAMES_FILE,
    Calibration,
    CalibrationError,
    LogisticModel,
    features,
    names_from_json,
    names_to_json,
    question_keys,
    shipped_calibration,
    shipped_threshold,
    word_match,
)
from test_resolver import CATALOG

# Not in the memory; its nearest entries are other lost lands, with large (obscure) IDs as most of the real
# memory's entries have, which is where the support model was fitted.
ATLANTIS = (
    "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
    "entity0 = [ENT] Atlantis [/ENT] legendary sunken island\n"
    "relation0 = [REL] population [/REL] number of people inhabiting the place"
)
LOST_LANDS = [
    CatalogEntry("Q98765432", "Mu", "hypothetical sunken continent in the Pacific"),
    CatalogEntry("Q105432789", "Lemuria", "hypothetical lost land in the Indian Ocean"),
]
HAMBURG = (
    "SELECT ?x WHERE { wd:entity0 wdt:relation0 ?x }\n"
    "entity0 = [ENT] Hamburg [/ENT] city and state in northern Germany\n"
    "relation0 = [REL] population [/REL] number of people inhabiting the place"
)


@pytest.fixture(scope="module")
def memory(encoder) -> Memory:  # type: ignore[no-untyped-def]
    catalog = LabelCatalog([*CATALOG, *LOST_LANDS])
    return Memory.build_in_memory(catalog, encoder, progress=False, prior_counts={"Q167646": 3})


def test_signals_separate_a_spelled_match_from_a_mere_neighbour(memory: Memory) -> None:
    known, unknown = (Resolver(memory).resolve(parse(text)) for text in (HAMBURG, ATLANTIS))
    hamburg = dict(known.evidence[0].support.features)  # type: ignore[union-attr]
    atlantis = dict(unknown.evidence[0].support.features)  # type: ignore[union-attr]
    assert set(hamburg) == set(FEATURES)
    assert hamburg["exact"] == hamburg["own_label"] == 1.0 and hamburg["described"] == 1.0
    assert atlantis["exact"] == 0.0 and atlantis["lexical"] < 0.6
    # The homonym Hamburg (New York) shares the label: a rival, and the margin to it is what the description won.
    assert hamburg["rivals"] == 1.0 and hamburg["margin"] > 0
    assert known.evidence[0].confidence > unknown.evidence[0].confidence  # type: ignore[operator]


def test_the_shipped_threshold_refuses_what_the_memory_lacks_and_says_why(memory: Memory) -> None:
    t = shipped_threshold()
    result = Resolver(memory, ResolverConfig(min_confidence=t)).resolve(parse(ATLANTIS))
    assert isinstance(result, Refusal) and result.unsupported == ("entity0",)
    best = result.evidence[0].best
    assert best is not None
    # The reason names the placeholder, its best candidate and why that was rejected.
    assert f"entity0 'Atlantis': best {best.id} ({best.label}) rejected: confidence" in result.reason
    assert f"< threshold {t:.3f}" in result.reason and "no label or alias of it" in result.reason
    payload = result.to_json()["evidence"][0]
    assert payload["confidence"] < t and payload["min_confidence"] == t and payload["signals"]["exact"] == 0.0
    # With its question, as the pipeline resolves it (this small memory has no prior for P1082, which the
    # support model weighs; the question says the labels are what it names).
    answered = Resolver(memory, ResolverConfig(min_confidence=t)).resolve(
        parse(HAMBURG), "How many people live in Hamburg? What is its population?"
    )
    assert isinstance(answered, Resolution) and answered.mapping_dict()["entity0"] == "Q1055"


def test_refusal_never_changes_the_ranking(memory: Memory) -> None:
    queries = [parse(HAMBURG), parse(ATLANTIS)]
    off = Resolver(memory).resolve_many(queries)
    on = Resolver(memory, ResolverConfig(min_confidence=0.99)).resolve_many(queries)
    for a, b in zip(off, on, strict=True):
        assert [e.candidates for e in a.evidence] == [e.candidates for e in b.evidence]
        assert [e.confidence for e in a.evidence] == [e.confidence for e in b.evidence]
    # Threshold 0 never refuses: the unknown entity gets a real (wrong) ID.
    assert isinstance(off[1], Resolution)


def test_shipped_calibration_is_complete_and_from_validation() -> None:
    calibration = shipped_calibration()
    assert set(calibration.models) == {"entity", "relation"}
    assert 0.0 < calibration.threshold < 1.0
    assert "validation" in str(calibration.provenance["fitted_on"])
    names = names_to_json(calibration.names, {})
    assert Calibration.from_json(json.loads(json.dumps(calibration.to_json())), names) == calibration


def test_bad_calibrations_are_rejected() -> None:
    good = {"features": ["lexical"], "coef": [1.0], "intercept": 0.0, "mean": [0.5], "scale": [0.1]}
    LogisticModel.from_json(good)
    for bad in (
        {**good, "features": ["shoe size"]},
        {**good, "coef": [1.0, 2.0]},
        {**good, "scale": [0.0]},
        {k: v for k, v in good.items() if k != "intercept"},
    ):
        with pytest.raises(CalibrationError):
            LogisticModel.from_json(bad)
    with pytest.raises(CalibrationError):
        Calibration.from_json({"threshold": 1.5, "models": {"entity": good}})
    with pytest.raises(ValueError):
        ResolverConfig(min_confidence=-0.1)


def test_fitting_is_deterministic_and_orders_like_the_signal() -> None:
    rows = [{n: 0.0 for n in FEATURES} | {"lexical": i / 20, "margin": (i % 3) / 10} for i in range(21)]
    labels = [i >= 12 or i == 5 for i in range(21)]
    model = fit_logistic(rows, labels, ["lexical", "margin"])
    assert model == fit_logistic(rows, labels, ["lexical", "margin"])
    p = [model.probability(r) for r in rows]
    assert model.coef[0] > 0 and p[20] > 0.9 > 0.1 > p[0]
    assert auc(p, labels) == auc([r["lexical"] for r in rows], labels) > 0.9
    assert auc([1.0, 1.0], [True, False]) == 0.5 and auc([1.0], [True]) is None


def test_a_placeholder_without_candidates_has_no_support() -> None:
    placeholder = parse(
        "SELECT ?x WHERE { ?x wdt:relation0 ?y }\nrelation0 = [REL] instance of [/REL]"
    ).placeholders[0]
    assert features(placeholder, ()) == dict.fromkeys(FEATURES, 0.0)
    support = shipped_calibration().support(placeholder, ())
    assert support is not None and support.confidence == 0.0 and not math.isnan(support.confidence)


def test_the_question_tells_a_named_but_unknown_entity_from_a_known_one(memory: Memory) -> None:
    # "Paris Hilton" is named in the question, but the memory knows only other Parises: the label is a span of
    # the question that no label or alias of the memory matches. "Hamburg" is named and known.
    hilton = parse(
        "ASK WHERE { wd:entity0 wdt:relation0 wd:entity1 }\n"
        "entity0 = [ENT] Paris Hilton [/ENT]\nrelation0 = [REL] country [/REL]\nentity1 = [ENT] Germany [/ENT]"
    )
    question = "Is Paris Hilton's country Germany?"
    resolver = Resolver(memory)
    asked = resolver.resolve(hilton, question)
    bare = resolver.resolve(hilton)
    signals = {e.placeholder.name: dict(e.support.features) for e in asked.evidence}  # type: ignore[union-attr]
    assert signals["entity0"]["in_question"] == signals["entity0"]["unknown_span"] == 1.0
    assert signals["entity1"]["in_question"] == 1.0 and signals["entity1"]["unknown_span"] == 0.0
    # A relation named verbatim and known to the memory.
    assert signals["relation0"]["in_question"] == 1.0 and signals["relation0"]["unknown_span"] == 0.0
    for e in bare.evidence:
        assert dict(e.support.features)["in_question"] == 0.0  # type: ignore[union-attr]
    # Case, accents, spacing and a possessive do not hide a span.
    keys = question_keys("Where was  ÉMILE Zola's  father born?")
    assert {"emile zola", "father", "where was emile zola"} <= keys
    hamburg = parse(HAMBURG)
    on = resolver.resolve(hamburg, "How many people live in hamburg?")
    assert dict(on.evidence[0].support.features)["unknown_span"] == 0.0  # type: ignore[union-attr]
    assert dict(on.evidence[0].support.features)["in_question"] == 1.0  # type: ignore[union-attr]
    with pytest.raises(ValueError, match="questions"):
        resolver.resolve_many([hamburg], ["one", "two"])


def test_word_match_tells_a_respelling_from_another_name() -> None:
    assert word_match("Anthony Vivaldi", ["Antonio Vivaldi"]) > 0.7
    assert word_match("Tim Burton", ["Richard Burton"]) < 0.3
    # Containment either way, and an alias that fits, count in full; separators and case do not matter.
    assert word_match("Padma Bhushan award", ["Padma Bhushan"]) == 1.0
    assert word_match("Godot", ["Waiting for Godot"]) == 1.0
    assert word_match("Ricky_Martin", ["enrique martin morales", "ricky martin"]) == 1.0
    assert word_match("Walter Cronkite", []) == 0.0
    placeholder = parse(HAMBURG).placeholders[0]
    assert features(placeholder, (), surfaces=["hamburg"])["word_match"] == 0.0


def test_a_name_the_generator_knows_but_the_memory_lacks(memory: Memory) -> None:
    # The generator was trained to write "Atlantis" and "population"; the memory knows "population" only.
    names = {"entity": frozenset({"atlantis", "hamburg"}), "relation": frozenset({"population"})}
    shipped = shipped_calibration()
    calibration = Calibration(shipped.models, shipped.threshold, shipped.provenance, names)
    resolver = Resolver(memory, calibration=calibration)
    lost = {e.placeholder.name: dict(e.support.features) for e in resolver.resolve(parse(ATLANTIS)).evidence}  # type: ignore[union-attr]
    assert lost["entity0"]["named_absent"] == 1.0
    assert lost["relation0"]["named_absent"] == 0.0  # named, and the memory has it
    found = dict(resolver.resolve(parse(HAMBURG)).evidence[0].support.features)  # type: ignore[union-attr]
    assert found["named_absent"] == 0.0
    # A garbled label is no name, and without names the signal is off.
    garbled = ATLANTIS.replace("Atlantis", "Atlantisz")
    assert dict(resolver.resolve(parse(garbled)).evidence[0].support.features)["named_absent"] == 0.0  # type: ignore[union-attr]
    # The refusal says why in words.
    strict = Resolver(memory, ResolverConfig(min_confidence=0.999), calibration=calibration)
    refused = strict.resolve(parse(ATLANTIS))
    assert isinstance(refused, Refusal)
    assert "entity0 'Atlantis'" in refused.reason
    assert "names something the memory has no label or alias for" in refused.reason
    bare = Resolver(memory, calibration=Calibration(shipped.models, shipped.threshold, shipped.provenance))
    assert dict(bare.resolve(parse(ATLANTIS)).evidence[0].support.features)["named_absent"] == 0.0  # type: ignore[union-attr]


def test_names_travel_in_their_own_file_and_bad_ones_are_refused() -> None:
    shipped = shipped_calibration()
    # The shipped names are the training targets' labels: relations the generator writes are among them.
    assert {"place of birth", "country of citizenship"} <= shipped.names["relation"]
    assert len(shipped.names["entity"]) > 10_000
    doc = shipped.to_json()
    assert doc["names"] == NAMES_FILE and "entity" not in doc
    names = {"entity": frozenset({"hamburg"}), "relation": frozenset()}
    back = Calibration.from_json(doc, names_to_json(names, {"what": "test"}))
    assert back.names == names
    # Labels are normalized on reading, so a hand-written "Hamburg" still matches.
    assert names_from_json({"entity": ["Hamburg"], "relation": []})["entity"] == {"hamburg"}
    with pytest.raises(CalibrationError, match="list of strings"):
        names_from_json({"entity": "hamburg", "relation": []})
    with pytest.raises(CalibrationError, match="relation"):
        names_from_json({"entity": []})
