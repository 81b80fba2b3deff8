"""The unknown-URI split of LC-QuAD 2.0: test questions none of whose entities occur in any training question.

LC-QuAD 2.0's own split shares most entities between train and test, so a generator can memorise the IDs it
needs. Here LC-QuAD 2.0 train and test (converted records) are pooled and re-split so that **no entity ID of
a test record occurs in any training record**:

- records are linked when they share an entity ID (union-find over all entity IDs, Q... and L...), and each
  connected component goes whole to one side, so the property holds by construction (and is checked);
- relations (P...) are left out of the linking: the relation inventory is small and shared by nearly every
  question (P31 alone links thousands), and the generator must learn the relations it writes; test records
  may use relations seen in training (how many do not is reported);
- frequent entities (Q5 "human" and the like) link most of the pool into one giant component, which cannot
  leave training; the test part is drawn from the other components, in a seeded random order, until the
  target size is reached (components larger than the remaining room are passed over). The test part is
  therefore biased towards questions about rarer entities; that is what "unknown URI" means here;
- records without any entity ID test nothing about unknown entities and stay in training.

Pooled record ids are prefixed with their origin (`lcquad2-train:...`, `lcquad2-test:...`), since the two
files may reuse ids.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pgmr.conversion.convert import ConvertedRecord
from pgmr.kg.ids import id_kind

TRAIN_PREFIX = "lcquad2-train"
TEST_PREFIX = "lcquad2-test"


def entity_ids(record: ConvertedRecord) -> frozenset[str]:
    """The entity IDs (items and lexemes, not properties) of a converted record's gold query."""
    return frozenset(wid for _, wid in record.mapping if id_kind(wid) == "entity")


def relation_ids(record: ConvertedRecord) -> frozenset[str]:
    return frozenset(wid for _, wid in record.mapping if id_kind(wid) == "relation")


@dataclass(frozen=True)
class UnknownUriSplit:
    train: tuple[ConvertedRecord, ...]
    test: tuple[ConvertedRecord, ...]
    stats: Mapping[str, Any]

    def test_ids(self) -> list[str]:
        return [r.id for r in self.test]


class _UnionFind:
    def __init__(self, n: int) -> None:
        self.parent = list(range(n))

    def find(self, i: int) -> int:
        root = i
        while self.parent[root] != root:
            root = self.parent[root]
        while self.parent[i] != root:  # path compression
            self.parent[i], i = root, self.parent[i]
        return root

    def union(self, a: int, b: int) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def _pool(
    train_records: Iterable[ConvertedRecord], test_records: Iterable[ConvertedRecord]
) -> list[ConvertedRecord]:
    pool = [replace(r, id=f"{TRAIN_PREFIX}:{r.id}") for r in train_records]
    pool += [replace(r, id=f"{TEST_PREFIX}:{r.id}") for r in test_records]
    seen: set[str] = set()
    for record in pool:
        if record.id in seen:
            raise ValueError(f"record id {record.id!r} appears twice in one input")
        seen.add(record.id)
    return pool


def components(records: Sequence[ConvertedRecord]) -> list[list[int]]:
    """Positions of records grouped by shared entity IDs (records without entities are not grouped)."""
    forest = _UnionFind(len(records))
    first_with: dict[str, int] = {}
    for i, record in enumerate(records):
        for wid in entity_ids(record):
            if wid in first_with:
                forest.union(first_with[wid], i)
            else:
                first_with[wid] = i
    groups: dict[int, list[int]] = {}
    for i, record in enumerate(records):
        if entity_ids(record):
            groups.setdefault(forest.find(i), []).append(i)
    return list(groups.values())


def build_split(
    train_records: Sequence[ConvertedRecord],
    test_records: Sequence[ConvertedRecord],
    *,
    test_size: int | None = None,
    test_share: float = 0.1,
    seed: int = 0,
) -> UnknownUriSplit:
    """Pool both inputs and re-split them (see the module docstring). The test part gets `test_size` records
    (default: `test_share` of the pooled records that mention an entity) or as many as the components allow.

    Raises ValueError for an empty pool or a size/share out of range."""
    if not 0.0 < test_share < 1.0:
        raise ValueError(f"test_share must be in (0, 1), got {test_share}")
    if test_size is not None and test_size < 1:
        raise ValueError(f"test_size must be positive, got {test_size}")
    pool = _pool(train_records, test_records)
    groups = components(pool)
    with_entities = sum(len(g) for g in groups)
    if not with_entities:
        raise ValueError("no record mentions an entity: nothing can be held out")
    target = test_size if test_size is not None else max(1, round(test_share * with_entities))
    # Sorted before shuffling so that the order (and the split) depends only on the records and the seed.
    groups.sort(key=lambda g: min(g))
    order = list(range(len(groups)))
    random.Random(seed).shuffle(order)
    chosen: set[int] = set()
    room = target
    for g in order:
        if room == 0:
            break
        if len(groups[g]) <= room:
            chosen.update(groups[g])
            room -= len(groups[g])
    train = tuple(r for i, r in enumerate(pool) if i not in chosen)
    test = tuple(r for i, r in enumerate(pool) if i in chosen)
    train_entities = {wid for r in train for wid in entity_ids(r)}
    leaked = sorted({wid for r in test for wid in entity_ids(r)} & train_entities)
    if leaked:  # cannot happen: whole components move; a failure here is a bug, never bad input
        raise RuntimeError(f"unknown-URI split leaks test entities into training: {leaked[:5]}")
    return UnknownUriSplit(train, test, _stats(pool, groups, train, test, target, seed))


def _stats(
    pool: Sequence[ConvertedRecord],
    groups: Sequence[Sequence[int]],
    train: Sequence[ConvertedRecord],
    test: Sequence[ConvertedRecord],
    target: int,
    seed: int,
) -> dict[str, Any]:
    sizes = sorted((len(g) for g in groups), reverse=True)
    train_relations = {wid for r in train for wid in relation_ids(r)}
    train_entities = {wid for r in train for wid in entity_ids(r)}
    test_entities = {wid for r in test for wid in entity_ids(r)}
    origin = Counter(r.id.split(":", 1)[0] for r in test)
    return {
        "pooled_records": len(pool),
        "records_with_entities": sum(sizes),
        "records_without_entities": len(pool) - sum(sizes),
        "components": len(sizes),
        "largest_components": sizes[:5],
        "singleton_components": sum(1 for s in sizes if s == 1),
        "target_test_size": target,
        "train_records": len(train),
        "test_records": len(test),
        "test_from": {TRAIN_PREFIX: origin.get(TRAIN_PREFIX, 0), TEST_PREFIX: origin.get(TEST_PREFIX, 0)},
        "train_entity_ids": len(train_entities),
        "test_entity_ids": len(test_entities),
        "test_entity_ids_in_train": len(test_entities & train_entities),
        "test_records_with_a_relation_unseen_in_train": sum(
            1 for r in test if relation_ids(r) - train_relations
        ),
        "seed": seed,
    }


__all__ = ["UnknownUriSplit", "build_split", "components", "entity_ids", "relation_ids"]
