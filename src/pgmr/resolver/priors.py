"""Prominence counts for the resolver's prior: how often each ID occurs in training gold queries."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pgmr.conversion import to_skeleton
from pgmr.datasets import load_any


def counts_from_sparql(queries: list[str]) -> dict[str, int]:
    counts: Counter[str] = Counter()
    for sparql in queries:
        try:
            counts.update(set(to_skeleton(sparql)[1].values()))
        except ValueError:
            continue
    return dict(counts)


def counts_from_dataset(name_or_path: str, data_dir: Path) -> dict[str, int]:
    loaded = load_any(name_or_path, data_dir)
    return counts_from_sparql([r.sparql for r in loaded.records])
