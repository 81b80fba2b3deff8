"""An experiment's workspace: its settings, the memory and catalog (each loaded once, on first use), the
resolution settings every system is resolved with, and sub-memories."""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import replace
from datetime import UTC, datetime
from functools import cached_property, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from pgmr.datasets import QARecord
from pgmr.experiments.reporting import QUIET, Reporter
from pgmr.experiments.settings import ExperimentError, ExperimentSettings
from pgmr.pipeline import StageConfig, shipped_resolver
from pgmr.precision import DEFAULT_PRECISION

if TYPE_CHECKING:
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Encoder, Memory
    from pgmr.resolver import Prior, Resolver
    from pgmr.resolver.facts import TrainingFacts


@lru_cache(maxsize=2)
def shared_encoder(name: str, precision: str = DEFAULT_PRECISION) -> Encoder:
    """One encoder per name, precision and process: experiments run one after another in one process (the
    tests, a notebook) need not load the same model again each time. Experiments encode queries with it, never
    memory rows (sub-memories reuse the stored vectors), so it takes the pipeline's precision."""
    from pgmr.memory import load_encoder

    return load_encoder(name, precision=precision)


class Workspace:
    """Settings plus the memory and catalog, each loaded once, on first use; `reporter` shows the progress."""

    def __init__(self, settings: ExperimentSettings, reporter: Reporter = QUIET) -> None:
        self.settings = settings
        self.reporter = reporter
        self.started = time.monotonic()
        self.started_at = datetime.now(UTC).isoformat(timespec="seconds")

    @property
    def out_dir(self) -> Path:
        return self.settings.out_dir

    @cached_property
    def memory(self) -> Memory:
        from pgmr.config import default_memory_dir
        from pgmr.memory import Memory, PgmrMemoryError, read_manifest

        path = self.settings.memory_dir or default_memory_dir()
        with self.reporter.status(f"loading the memory from {path}"):
            try:
                return Memory.load(
                    path, encoder=shared_encoder(read_manifest(path).encoder, self.settings.precision)
                )
            except PgmrMemoryError as exc:
                raise ExperimentError(str(exc)) from None

    @cached_property
    def catalog(self) -> LabelCatalog:
        from pgmr.kg.catalog import CatalogError, LabelCatalog

        with self.reporter.status("loading the label catalog"):
            try:
                return LabelCatalog.from_data_dir(self.settings.data_dir)
            except (CatalogError, FileNotFoundError) as exc:
                raise ExperimentError(f"cannot load the label catalog: {exc}") from None

    def stages(self, **resolver_changes: Any) -> StageConfig:
        """The stage settings the systems are resolved with: `pgmr ask`'s defaults, with the experiment's
        thresholds (and `resolver_changes` for a sweep that needs others)."""
        return StageConfig(
            resolver=shipped_resolver(
                **{
                    "entity_threshold": self.settings.entity_threshold,
                    "relation_threshold": self.settings.relation_threshold,
                    "min_confidence": self.settings.min_confidence,
                    **resolver_changes,
                }
            )
        )

    def resolver(
        self,
        memory: Memory | None = None,
        *,
        prior: Prior | None = None,
        facts: TrainingFacts | None = None,
        **resolver_changes: Any,
    ) -> Resolver:
        from pgmr.resolver import Resolver

        return Resolver(
            memory or self.memory, self.stages(**resolver_changes).resolver, prior=prior, facts=facts
        )

    def load_test(self, name: str) -> list[QARecord]:
        """The first `limit` records of a named dataset."""
        from pgmr.datasets import DatasetError, load_named

        try:
            records = list(load_named(name, self.settings.data_dir).records)
        except DatasetError as exc:
            raise ExperimentError(str(exc)) from None
        return records[: self.settings.limit] if self.settings.limit else records

    def wall_seconds(self) -> float:
        return round(time.monotonic() - self.started, 1)


def sub_memory(
    memory: Memory,
    keep_entities: Collection[str] | None,
    *,
    keep_relations: Collection[str] | None = None,
    chunk: int = 50_000,
) -> Memory:
    """`memory` with only the entities in `keep_entities` and the relations in `keep_relations` (None keeps
    all of a kind), from the memory's own stored vectors: nothing is re-encoded. A reduced index is rebuilt
    flat (exact); vectors of an ivfpq memory are its PQ approximations."""
    from pgmr.memory import Memory

    dictionaries = dict(memory.manifest.dictionaries)
    reduced = {}
    for kind, keep in (("entity", keep_entities), ("relation", keep_relations)):
        source = memory.dictionary(kind)  # type: ignore[arg-type]
        if keep is None:
            reduced[kind] = source
            continue
        reduced[kind] = _sub_dictionary(source, set(keep), memory, chunk)
        dictionaries[kind] = replace(dictionaries[kind], ids=len(reduced[kind]), rows=len(reduced[kind].rows))
    manifest = replace(memory.manifest, dictionaries=dictionaries)
    return Memory(
        reduced["entity"], reduced["relation"], memory.encoder, manifest, prior_counts=memory.prior_counts
    )


def _sub_dictionary(source: Any, keep: set[str], memory: Memory, chunk: int) -> Any:
    from pgmr.memory import MemoryDictionary, create_index

    positions = np.array([i for i, row in enumerate(source.rows) if row.id in keep], dtype=np.int64)
    index = create_index("flat", memory.encoder.dimension)
    for start in range(0, len(positions), chunk):
        index.add(source.index.reconstruct(positions[start : start + chunk]))
    return MemoryDictionary(source.kind, [source.rows[i] for i in positions.tolist()], index, memory.encoder)


__all__ = ["Workspace", "shared_encoder", "sub_memory"]
