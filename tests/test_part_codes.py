"""The index stage's parts encoded on a Dask cluster (pgmr.memory.dump.part_codes): the same parts as encoded
in one process, and a worker's failure a clear error that keeps the parts already written."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from pgmr.config import resolve_data_dir
from pgmr.kg.dump.synthetic import SyntheticDump, load_real
from pgmr.memory import PgmrMemoryError
from pgmr.memory.dump import ClusterSettings, DumpBuildSettings, build_from_dump, work_dir_for
from pgmr.memory.dump.cluster import dask_client
from pgmr.memory.dump.index_parts import Parts, first_occurrences
from pgmr.memory.dump.part_codes import TrainedIndex, write_parts
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.dump.synthetic_catalog import write_synthetic_catalog
from pgmr.memory.index import create_index

DATA_DIR = resolve_data_dir(None)
pytestmark = pytest.mark.slow
if not (DATA_DIR / "memory").is_dir():
    pytest.skip("no ../shared/data", allow_module_level=True)

OPTIONS = {"nlist": 8, "m": 16, "nprobe": 8}


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A catalog of 4 shards and an ivfpq-rerank memory built from it on a cluster of two workers."""
    entities, properties = load_real(DATA_DIR)
    world = SyntheticDump(random.Random(3).sample(entities, 150), properties[:40], 250, seed=9)
    root = tmp_path_factory.mktemp("parts")
    catalog = root / "catalog"
    write_synthetic_catalog(catalog, world, lines_per_chunk=120, workers=1)
    settings = DumpBuildSettings(
        cluster=ClusterSettings(workers=2), index_kind="ivfpq-rerank", index_options=OPTIONS
    )
    build_from_dump(catalog, root / "memory", settings)
    return catalog, root / "memory"


def _trained(index_dir: Path):  # type: ignore[no-untyped-def]
    index = create_index("ivfpq-rerank", 384, "faiss", **OPTIONS)
    index.restore_trained((index_dir / "entity.trained").read_bytes())  # type: ignore[attr-defined]
    return index


def test_parts_encoded_on_two_workers_are_the_parts_encoded_here(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    catalog, memory = built
    work = WorkDir(work_dir_for(memory), catalog=catalog)
    index_dir = work.path / "index"
    shards = work.catalog_shards()
    assert len(shards) >= 3
    here = Parts(tmp_path)
    here.dir.mkdir()
    index = _trained(index_dir)
    for shard, kept in zip(shards, first_occurrences(shards), strict=True):
        here.write(shard, kept, work.vector_file(shard), 384, index)
    there = Parts(index_dir)
    for shard in shards:
        assert there.done(shard)
        for what in ("codes.npy", "entity.arrow", "relation.arrow", "entity.rows.npy", "prior.arrow"):
            assert there.path(shard, what).read_bytes() == here.path(shard, what).read_bytes(), (shard, what)
        assert len(there.codes(shard)) == there.rows(shard, "entity")[0].num_rows > 0


def test_a_failing_worker_is_a_clear_error_and_keeps_the_parts_written(built, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    catalog, memory = built
    work = WorkDir(work_dir_for(memory), catalog=catalog)
    shards = work.catalog_shards()
    parts = Parts(tmp_path)
    parts.dir.mkdir()
    todo = list(zip(shards, first_occurrences(shards), strict=True))
    good = (work.path / "index" / "entity.trained").read_bytes()
    with dask_client(ClusterSettings(workers=1)) as client:
        spec = TrainedIndex.of("ivfpq-rerank", 384, "faiss", OPTIONS, good)
        written = write_parts(client, parts, todo[:1], work.vector_file, spec, good)
        assert written > 0 and parts.done(shards[0])
        # A state the workers cannot restore (a damaged file, another build's index): every task fails.
        bad = good[: len(good) // 2]
        spec = TrainedIndex.of("ivfpq-rerank", 384, "faiss", OPTIONS, bad)
        with pytest.raises(PgmrMemoryError, match=r"encoding the index part of shard-\d+\S* failed"):
            write_parts(client, parts, todo[1:], work.vector_file, spec, bad)
    assert parts.done(shards[0])
    assert not any(parts.done(s) for s in shards[1:])
    assert np.array_equal(parts.codes(shards[0]), Parts(work.path / "index").codes(shards[0]))
