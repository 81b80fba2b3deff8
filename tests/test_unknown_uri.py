"""The unknown-URI split: whole groups of records that share entities move together, so no entity ID of a
test record occurs in any training record (handmade records, and all of real LC-QuAD 2.0)."""

from __future__ import annotations

import pytest

from pgmr.conversion import ConversionError, ConvertedRecord, to_skeleton
from pgmr.conversion.unknown_uri import build_split, components, entity_ids
from pgmr.evaluation.metrics import query_ids
from pgmr.kg.ids import id_kind


def _record(uid: str, sparql: str) -> ConvertedRecord:
    skeleton, mapping = to_skeleton(sparql)
    return ConvertedRecord(uid, f"question {uid}", sparql, skeleton, tuple(mapping.items()), "lcquad2")


def _entities_by_query_ids(record: ConvertedRecord) -> set[str]:
    """Entity IDs read from the SPARQL by the metrics' tokenizer: a second opinion on `entity_ids`."""
    return {wid for wid in query_ids(record.sparql) if id_kind(wid) == "entity"}


def _no_leak(split) -> None:  # type: ignore[no-untyped-def]
    train_entities = {wid for r in split.train for wid in _entities_by_query_ids(r)}
    for record in split.test:
        assert _entities_by_query_ids(record), record.id  # every test record mentions an entity
        assert not (_entities_by_query_ids(record) & train_entities), record.id


TRAIN = [
    _record("a", "SELECT ?x WHERE { wd:Q1 wdt:P31 ?x . wd:Q2 wdt:P17 ?x }"),
    _record("b", "ASK { wd:Q2 wdt:P31 wd:Q3 }"),  # shares Q2 with a
    _record("c", "SELECT ?x WHERE { wd:Q4 wdt:P31 ?x }"),
    _record("d", "SELECT ?x WHERE { ?x wdt:P31 ?y }"),  # no entity: always training
    _record("e", "SELECT ?x WHERE { wd:Q5 wdt:P999 ?x }"),
]
TEST = [
    _record("a", "SELECT ?x WHERE { wd:Q5 wdt:P31 ?x }"),  # same id as a training record; shares Q5 with e
    _record("f", "SELECT ?x WHERE { wd:Q6 wdt:P31 ?x }"),
    _record("g", "SELECT ?x WHERE { wd:Q7 wdt:P31 wd:Q8 }"),
    _record("h", "SELECT ?x WHERE { wd:L9 wdt:P31 ?x }"),  # a lexeme is an entity too
]


def test_components_link_records_sharing_entities_and_ignore_relations() -> None:
    pool = [*TRAIN, *TEST]
    groups = sorted(sorted(pool[i].id + str(i) for i in g) for g in components(pool))
    # a+b (Q2), e+test a (Q5); P31 links nothing; d has no entity and no group.
    assert groups == [["a0", "b1"], ["a5", "e4"], ["c2"], ["f6"], ["g7"], ["h8"]]
    assert entity_ids(TEST[3]) == {"L9"} and entity_ids(TRAIN[3]) == frozenset()


@pytest.mark.parametrize("seed", range(8))
def test_split_moves_whole_groups_and_leaks_nothing(seed: int) -> None:
    split = build_split(TRAIN, TEST, test_size=3, seed=seed)
    ids = {r.id for r in split.test}
    assert len(split.train) + len(split.test) == len(TRAIN) + len(TEST)
    assert 1 <= len(split.test) <= 3 and split.stats["test_records"] == len(split.test)
    # Origins are kept apart even though both inputs have an "a".
    assert ("lcquad2-train:a" in ids) == ("lcquad2-train:b" in ids)
    assert ("lcquad2-train:e" in ids) == ("lcquad2-test:a" in ids)
    assert "lcquad2-train:d" not in ids
    _no_leak(split)
    again = build_split(TRAIN, TEST, test_size=3, seed=seed)
    assert again.test_ids() == split.test_ids()  # deterministic for a seed


def test_seeds_draw_different_splits_and_relations_may_be_shared() -> None:
    splits = {tuple(build_split(TRAIN, TEST, test_size=2, seed=s).test_ids()) for s in range(10)}
    assert len(splits) > 1
    split = build_split(TRAIN, TEST, test_size=6, seed=0)
    # P31 is in test and training alike; only a's P17 and e's P999 can be unseen in training.
    unseen = split.stats["test_records_with_a_relation_unseen_in_train"]
    assert unseen == sum(f"lcquad2-train:{uid}" in split.test_ids() for uid in ("a", "e"))
    assert any("P31" in dict(r.mapping).values() for r in split.test)  # a shared relation is no obstacle


def test_bad_arguments_are_clear_errors() -> None:
    with pytest.raises(ValueError, match="test_share"):
        build_split(TRAIN, TEST, test_share=1.0)
    with pytest.raises(ValueError, match="test_size"):
        build_split(TRAIN, TEST, test_size=0)
    with pytest.raises(ValueError, match="no record mentions an entity"):
        build_split([TRAIN[3]], [])
    with pytest.raises(ValueError, match="twice"):
        build_split([TRAIN[0], TRAIN[0]], [])


@pytest.mark.slow
def test_real_lcquad2_split_has_no_test_entity_in_training() -> None:
    """All of LC-QuAD 2.0 train + test, pooled and re-split at the default 10%."""
    from pgmr.config import resolve_data_dir
    from pgmr.datasets import load_named

    data_dir = resolve_data_dir(None)
    converted: dict[str, list[ConvertedRecord]] = {}
    for name in ("lcquad2-train", "lcquad2-test"):
        converted[name] = []
        for r in load_named(name, data_dir).records:
            try:
                converted[name].append(_record(r.id, r.sparql))
            except ConversionError:
                continue
    split = build_split(converted["lcquad2-train"], converted["lcquad2-test"], seed=0)
    stats = split.stats
    pooled = len(converted["lcquad2-train"]) + len(converted["lcquad2-test"])
    assert stats["pooled_records"] == pooled == len(split.train) + len(split.test) > 25_000
    # The frequent entities bind most of the pool into one component that stays in training...
    assert stats["largest_components"][0] > stats["target_test_size"]
    # ...and the rest still fills (nearly) the whole 10% target, from both original splits.
    assert len(split.test) >= 0.95 * stats["target_test_size"]
    assert min(stats["test_from"].values()) > 0
    assert stats["test_entity_ids_in_train"] == 0 and stats["test_entity_ids"] > 1000
    _no_leak(split)
