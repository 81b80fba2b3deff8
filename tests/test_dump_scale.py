"""What the 10M-item measurements rest on: synthetic catalogs written without a dump, memory-mapped Arrow rows,
builds from a catalog directory with an embedding cache and drawn vectors, and the re-ranked IVF-PQ index."""

from __future__ import annotations

import json
import random
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.kg.dump import read_shard, record_from_line
from pgmr.kg.dump.synthetic import SYNTHETIC_BASE, SyntheticDump, load_real
from pgmr.memory import Memory, PgmrMemoryError, read_manifest
from pgmr.memory.cache import EmbeddingCache
from pgmr.memory.dump import ClusterSettings, DumpBuildSettings, build_from_dump
from pgmr.memory.dump.catalog_rows import shard_rows
from pgmr.memory.dump.synthetic_catalog import write_synthetic_catalog
from pgmr.memory.page_cache import files_to_warm
from pgmr.memory.row_table import ArrowRows, ListRows, write_arrow_rows
from pgmr.memory.rows import MemoryRow
from pgmr.resolver import Resolver

DATA_DIR = resolve_data_dir(None)
pytestmark = pytest.mark.slow
if not (DATA_DIR / "memory").is_dir():
    pytest.skip("no ../shared/data", allow_module_level=True)


@pytest.fixture(scope="module")
def real() -> tuple[list, list]:  # type: ignore[type-arg]
    entities, properties = load_real(DATA_DIR)
    return random.Random(2).sample(entities, 300), properties[:80]


@pytest.fixture(scope="module")
def world(real) -> SyntheticDump:  # type: ignore[no-untyped-def]
    return SyntheticDump(*real, 700, seed=5, homonym_rate=0.3)


def test_a_synthetic_record_is_what_parsing_its_dump_line_gives(world: SyntheticDump) -> None:
    for position in range(0, world.total, 7):
        parsed = record_from_line(world.line(position)).record
        assert parsed is not None
        assert world.record(position) == parsed, position


def test_a_synthetic_catalog_resumes_and_refuses_another_dump(
    world: SyntheticDump, real, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    catalog = tmp_path / "catalog"
    shards = write_synthetic_catalog(catalog, world, lines_per_chunk=200, workers=2)
    assert shards == len(list(catalog.glob("shard-*.parquet"))) == -(-world.total // 200)
    ids = [
        i for shard in sorted(catalog.glob("shard-*.parquet")) for i in read_shard(shard)["id"].to_pylist()
    ]
    assert ids == [world.record(p).id for p in range(world.total)]
    # A shard lost (a kill before its ledger line) is written again; the others are kept as they are.
    lost = catalog / "shard-00001.parquet"
    lost.unlink()
    kept = (catalog / "shard-00000.parquet").stat().st_mtime_ns
    write_synthetic_catalog(catalog, world, lines_per_chunk=200)
    assert lost.is_file() and (catalog / "shard-00000.parquet").stat().st_mtime_ns == kept
    other = SyntheticDump(*real, 10, seed=9)
    with pytest.raises(PgmrMemoryError, match="another synthetic dump"):
        write_synthetic_catalog(catalog, other, lines_per_chunk=200)


def _rows() -> list[MemoryRow]:
    rows = []
    for n in (5, 900_000_123, 64, 5, 31, 64):
        wid = f"Q{n}"
        rows.append(MemoryRow(wid, f"label {n}", f"about {n}", f"label {n}, about {n}", False, f"label {n}"))
    rows.append(MemoryRow("Q5", "label 5", "about 5", "human, about 5", True, "human"))
    rows.append(MemoryRow("Q7", "label 7", None, "label 7", False, "label 7"))
    return rows


@pytest.mark.parametrize("resident_rows", [0, 1000], ids=["mapped", "resident"])
def test_arrow_rows_answer_as_rows_in_memory_do(tmp_path: Path, resident_rows: int) -> None:
    rows = _rows()
    path = tmp_path / "entities.rows.arrow"
    write_arrow_rows(path, iter(rows))
    on_disk, in_memory = ArrowRows(path, resident_rows=resident_rows), ListRows(rows)
    assert list(on_disk) == list(in_memory) == rows
    assert [on_disk[i] for i in range(len(rows))] == rows
    assert len(on_disk) == len(in_memory)
    assert on_disk.ids() == in_memory.ids() and on_disk.id_count() == in_memory.id_count() == 5
    for wid in ("Q5", "Q64", "Q900000123", "Q7", "Q8", "P31"):
        assert on_disk.positions(wid) == in_memory.positions(wid), wid
    # Owners are equal exactly for rows of one ID, whatever integers each table uses.
    for owners in (on_disk.owners, in_memory.owners):
        same = owners[:, None] == owners[None, :]
        assert same.tolist() == [[a.id == b.id for b in rows] for a in rows]


@pytest.mark.parametrize("resident_rows", [0, 1000], ids=["mapped", "resident"])
def test_arrow_rows_of_several_letters_keep_ids_that_share_a_number_apart(
    tmp_path: Path, resident_rows: int
) -> None:
    # Keys are ID numbers, so P5 and Q5 share one: a file of one letter skips reading IDs back, this one not.
    rows = [*_rows(), MemoryRow("P5", "p five", None, "p five", False, "p five")]
    path = tmp_path / "mixed.rows.arrow"
    write_arrow_rows(path, iter(rows))
    on_disk, in_memory = ArrowRows(path, resident_rows=resident_rows), ListRows(rows)
    for wid in ("Q5", "P5", "Q64", "P64", "Q7", "X5"):
        assert on_disk.positions(wid) == in_memory.positions(wid), wid
    assert on_disk.positions("P5") == (8,)


def test_a_damaged_arrow_rows_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "entities.rows.arrow"
    write_arrow_rows(path, iter(_rows()))
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(PgmrMemoryError, match="rebuild|unreadable|corrupt"):
        ArrowRows(path)


@pytest.fixture(scope="module")
def catalog(world: SyntheticDump, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("catalog") / "catalog"
    write_synthetic_catalog(path, world, lines_per_chunk=250, workers=1)
    return path


@pytest.fixture(scope="module")
def cache(catalog: Path, encoder, tmp_path_factory: pytest.TempPathFactory) -> Path:  # type: ignore[no-untyped-def]
    """An embedding cache holding the real rows' texts, as a memory built from the data directory leaves one."""
    from pgmr.memory.dump.drawn import real_rows

    directory = tmp_path_factory.mktemp("cache")
    texts = sorted({row.text for row in real_rows(sorted(catalog.glob("shard-*.parquet")))})
    store = EmbeddingCache(directory, encoder.name, encoder.dimension)
    store.put(texts, encoder.encode(texts))
    store.save()
    return directory


def test_a_build_from_a_catalog_with_cache_and_drawn_vectors_encodes_only_namesakes(  # type: ignore[no-untyped-def]
    catalog: Path, cache: Path, world: SyntheticDump, real, tmp_path: Path, encoder
) -> None:
    settings = DumpBuildSettings(
        cluster=ClusterSettings(workers=1), cache_dir=cache, drawn_vectors=True, index_kind="ivfpq-rerank",
        index_options={"nlist": 8, "m": 16, "nprobe": 8},
    )  # fmt: skip
    out = tmp_path / "memory"
    memory, report = build_from_dump(catalog, out, settings)
    assert report.parse.parsed_now == 0 and report.parse.records == world.total
    per_shard = [shard_rows(read_shard(shard)) for shard in sorted(catalog.glob("shard-*.parquet"))]
    rows = [row for shard in per_shard for row in shard]
    real_rows = [r for r in rows if int(r.id[1:]) <= SYNTHETIC_BASE]
    real_surfaces = {(r.surface or r.label).casefold() for r in real_rows}
    real_texts = {r.text for r in real_rows}
    synthetic = [r for r in rows if int(r.id[1:]) > SYNTHETIC_BASE]
    namesakes = {r.text for r in synthetic if (r.surface or r.label).casefold() in real_surfaces}
    drawn = {r.text for r in synthetic} - namesakes
    assert namesakes and drawn
    # Real rows come from the cache; the namesakes are encoded and the rest drawn (each shard on its own).
    assert report.encode.encoded_texts == sum(
        len({r.text for r in shard} & namesakes - real_texts) for shard in per_shard
    )
    assert report.encode.drawn_texts == sum(len({r.text for r in shard} & drawn) for shard in per_shard)
    manifest = read_manifest(out)
    assert manifest.vectors.startswith("drawn") and manifest.dictionaries["entity"].rows_file.endswith(
        ".arrow"
    )
    assert manifest.index_kind == "ivfpq-rerank"
    loaded = Memory.load(out, encoder)
    assert isinstance(loaded.entities.rows, ArrowRows) and len(loaded.entities) == len(memory.entities)
    # Its rows and lexical tier are read into the page cache in the background, and its index files (their
    # re-ranked vectors) where they fit in well under the memory available, as this small one does.
    assert loaded.warming is not None and loaded.warming.wait(60)
    warmed = [out / d.rows_file for d in manifest.dictionaries.values()]
    warmed += [f for d in manifest.lexical.values() for f in (out / d).rglob("*") if f.is_file()]
    indexes = sorted(
        (out / d.index_file for d in manifest.dictionaries.values()), key=lambda f: f.stat().st_size
    )
    assert loaded.warming.bytes_read == sum(f.stat().st_size for f in [*warmed, *indexes])
    assert files_to_warm(out, manifest, available=1 << 40)[-2:] == indexes
    assert not set(files_to_warm(out, manifest, available=1 << 20)) & set(indexes)
    assert Memory.load(out, encoder, warm=False).warming is None
    # A real entity is found by its own label and description through the re-ranked index.
    named = next(e for e in real[0] if e.description)
    hits = loaded.entities.search([f"{named.label}, {named.description}"], k=5)[0]
    assert hits[0].id == named.id
    # A drawn vector is a unit vector stored like an encoded one: searching with it finds its own row first.
    some = next(r for r in synthetic if r.text in drawn)
    position = loaded.entities.rows.positions(some.id)[0]
    vector = loaded.entities.index.reconstruct(np.array([position]))
    assert abs(float(np.linalg.norm(vector[0])) - 1.0) < 1e-2
    scores, found = loaded.entities.index.search(vector, 3)
    assert loaded.entities.rows[int(found[0][0])].text == loaded.entities.rows[position].text
    # Building again from the same work directory encodes nothing.
    _, again = build_from_dump(catalog, out, settings)
    assert again.encode.shards_now == 0
    assert json.loads((out / "manifest.json").read_text())["vectors"] == manifest.vectors
    # Search settings change without a rebuild: the manifest carries them; files and checksums stay as built.
    runner = CliRunner()
    done = runner.invoke(app, ["memory", "tune", str(out), "--nprobe", "6", "--rerank", "40"])
    assert done.exit_code == 0, done.output
    assert "nprobe=6, rerank=40" in done.output
    tuned = Memory.load(out, encoder, verify=True)
    assert (tuned.entities.index.nprobe, tuned.entities.index.rerank) == (6, 40)
    assert tuned.entities.search([f"{named.label}, {named.description}"], k=5)[0][0].id == named.id
    wrong = runner.invoke(app, ["memory", "tune", str(out), "--ef-search", "10"])
    assert wrong.exit_code == 2 and "takes only nprobe, rerank" in wrong.output
    assert read_manifest(out).search_options == {"nprobe": 6, "rerank": 40}
    # The sitelinks prior's shape too (fitted on validation, bench/grown_prior.py).
    shaped = runner.invoke(app, ["memory", "tune", str(out), "--prior-age-share", "0.8"])
    assert shaped.exit_code == 0 and "age share 0.8" in shaped.output, shaped.output
    assert Resolver(Memory.load(out, encoder, verify=True)).prior.age_share == 0.8
    # New 4-bit codes (SIMD-scanned) from the stored vectors, no text encoded again; the old file goes.
    recoded = runner.invoke(app, ["memory", "recode", str(out), "--nbits", "4"])
    assert recoded.exit_code == 0, recoded.output
    manifest = read_manifest(out)
    assert manifest.dictionaries["entity"].index_file == "entities.4bit.faiss"
    assert not (out / "entities.faiss").exists()
    fast = Memory.load(out, encoder, verify=True)
    assert fast.entities.index.options()["nbits"] == 4 and fast.entities.index.nprobe == 6
    assert fast.entities.search([f"{named.label}, {named.description}"], k=5)[0][0].id == named.id
    np.testing.assert_array_equal(
        fast.entities.index.reconstruct(np.array([position])),
        loaded.entities.index.reconstruct(np.array([position])),
    )
    # The stored vectors as sq8 (8 bits a dimension): a smaller file, the same answer.
    before = (out / "entities.4bit.faiss").stat().st_size
    recoded = runner.invoke(app, ["memory", "recode", str(out), "--vectors", "sq8"])
    assert recoded.exit_code == 0, recoded.output
    assert read_manifest(out).dictionaries["entity"].index_file == "entities.4bit.sq8.faiss"
    assert (out / "entities.4bit.sq8.faiss").stat().st_size < 0.7 * before
    small = Memory.load(out, encoder, verify=True)
    assert small.entities.index.options()["vectors"] == "sq8"
    assert small.entities.search([f"{named.label}, {named.description}"], k=5)[0][0].id == named.id
    np.testing.assert_allclose(
        small.entities.index.reconstruct(np.array([position])),
        loaded.entities.index.reconstruct(np.array([position])),
        atol=0.02,
    )
    wrong = runner.invoke(app, ["memory", "recode", str(out), "--vectors", "int4"])
    assert wrong.exit_code == 2 and "one of fp16, sq8" in wrong.output
    misplaced = runner.invoke(app, ["memory", "build", "-o", str(tmp_path / "m"), "--rerank-vectors", "sq8"])
    assert misplaced.exit_code == 2 and "applies to --index ivfpq-rerank" in misplaced.output
    for option, value in (("--nbits", "4"), ("--rerank", "400"), ("--nprobe", "64")):
        misplaced = runner.invoke(app, ["memory", "build", "-o", str(tmp_path / "m"), option, value])
        assert misplaced.exit_code == 2 and f"{option} applies to --index" in misplaced.output
    misplaced = runner.invoke(
        app, ["memory", "build", "-o", str(tmp_path / "m"), "--index", "ivfpq", "--rerank", "9"]
    )
    assert misplaced.exit_code == 2 and "--rerank applies to --index ivfpq-rerank" in misplaced.output
    odd = runner.invoke(
        app, ["memory", "build", "-o", str(tmp_path / "m"), "--index", "ivfpq", "--nbits", "6"]
    )
    assert odd.exit_code == 2 and "--nbits must be 4 or 8" in odd.output


def test_drawn_vectors_are_refused_for_a_dump_file(world: SyntheticDump, tmp_path: Path) -> None:
    """Drawing is for synthetic catalogs (`pgmr memory synthetic-dump --catalog`), not for a real dump."""
    from pgmr.kg.dump.synthetic import write_synthetic_dump

    dump = tmp_path / "latest-all.json.gz"
    write_synthetic_dump(dump, SyntheticDump(world.world.entities[:20], world.world.properties[:5], 5))
    settings = DumpBuildSettings(cluster=ClusterSettings(workers=1), drawn_vectors=True)
    with pytest.raises(PgmrMemoryError, match="needs a catalog"):
        build_from_dump(dump, tmp_path / "memory", settings)
    assert not (tmp_path / "memory").exists()


@pytest.mark.parametrize("kind", ["ivfpq", "ivfpq-rerank"])
def test_lists_grow_with_the_rows_to_come_not_with_the_training_sample(kind: str) -> None:
    """A dump build trains on a 200k-row sample of ~20M rows: lists sized for the sample (~450) would make
    each probe scan ~50k rows at 10M items. They follow the rows to come, as far as the sample can train."""
    from pgmr.memory.index import create_index

    sample = np.random.default_rng(0).standard_normal((4_000, 32)).astype(np.float32)
    sample /= np.linalg.norm(sample, axis=1, keepdims=True)
    alone = create_index(kind, 32, m=8, nbits=4)
    alone.train(sample)  # type: ignore[attr-defined]
    grown = create_index(kind, 32, m=8, nbits=4)
    grown.train(sample, rows=1_000_000)  # type: ignore[attr-defined]
    few = create_index(kind, 32, m=8, nbits=4)
    few.train(sample, rows=4_900)  # type: ignore[attr-defined]
    grown.add(sample)
    alone.add(sample)
    few.add(sample)
    # sqrt(4,000) = 63 lists; sqrt(1M) = 1,000, capped at 4,000 // 39 = 102 trained ones; sqrt(4,900) = 70.
    assert [i.options()["nlist"] for i in (alone, grown, few)] == [63, 102, 70]


def test_saving_a_reranked_index_renames_its_scratch_file_and_it_stays_usable(tmp_path: Path) -> None:
    """At 10M items the float16 vectors are ~17 GB: `save` finishes the scratch file in place instead of copying
    it. The saved file loads; the index keeps searching and can grow and be saved again."""
    from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ

    rng = np.random.default_rng(1)
    vectors = rng.standard_normal((3_000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = RerankedIVFPQ(32, nlist=16, m=8, nbits=6, nprobe=16, rerank=50, scratch_dir=str(tmp_path))
    index.add(vectors[:2_000])
    scratch = {p.name for p in tmp_path.glob("pgmr-vectors-*")}
    assert len(scratch) == 1
    index.save(tmp_path / "first.index")
    assert not list(tmp_path.glob("pgmr-vectors-*"))  # renamed, not copied
    assert oct((tmp_path / "first.index").stat().st_mode & 0o777) == oct(0o644)
    _, found = index.search(vectors[:5], 1)
    assert found[:, 0].tolist() == [0, 1, 2, 3, 4]
    index.add(vectors[2_000:])  # a new scratch file, holding all 3,000 rows
    index.save(tmp_path / "second.index")
    first, second = (
        RerankedIVFPQ.load(tmp_path / "first.index"),
        RerankedIVFPQ.load(tmp_path / "second.index"),
    )
    assert (len(first), len(second)) == (2_000, 3_000)
    np.testing.assert_allclose(second.reconstruct(np.arange(3_000)), vectors, atol=2e-3)
    _, found = second.search(vectors[2_995:], 1)
    assert found[:, 0].tolist() == [2_995, 2_996, 2_997, 2_998, 2_999]


def test_a_scratch_file_on_another_file_system_is_copied(tmp_path: Path) -> None:
    from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ

    other = Path("/dev/shm")
    if not other.is_dir() or other.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("needs a second file system (/dev/shm)")
    scratch = Path(tempfile.mkdtemp(dir=other))
    try:
        vectors = np.random.default_rng(2).standard_normal((1_000, 32)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        index = RerankedIVFPQ(32, nlist=8, m=8, nbits=6, nprobe=8, scratch_dir=str(scratch))
        index.add(vectors)
        index.save(tmp_path / "copied.index")
        assert len(list(scratch.iterdir())) == 1  # the scratch file stays where it was
        loaded = RerankedIVFPQ.load(tmp_path / "copied.index")
        np.testing.assert_allclose(loaded.reconstruct(np.arange(1_000)), vectors, atol=2e-3)
        index.add(vectors[:10])  # and keeps growing after a failed rename
        assert len(index) == 1_010
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def test_an_index_stage_resumed_from_its_parts_gives_the_same_memory(  # type: ignore[no-untyped-def]
    catalog: Path, cache: Path, tmp_path: Path
) -> None:
    """ivfpq-rerank encodes each shard's rows into codes once (a part); a resumed stage redoes only the parts
    without their `done` marker, with the trained state it kept, and assembles the same memory. With sq8
    vectors, whose ranges the trained state carries to every part (`--rerank-vectors sq8`)."""
    from pgmr.memory.dump import work_dir_for

    settings = DumpBuildSettings(
        cluster=ClusterSettings(workers=1), cache_dir=cache, drawn_vectors=True, index_kind="ivfpq-rerank",
        index_options={"nlist": 8, "m": 16, "nprobe": 8, "vectors": "sq8"},
    )  # fmt: skip
    out = tmp_path / "memory"
    build_from_dump(catalog, out, settings)
    first = read_manifest(out)
    assert first.dictionaries["entity"].index_file.endswith(".faiss")
    assert Memory.load(out, warm=False).entities.index.options()["vectors"] == "sq8"
    parts = work_dir_for(out) / "index" / "parts"
    done = sorted(parts.glob("*.done"))
    assert len(done) == len(list(catalog.glob("shard-*.parquet"))) >= 3
    assert (work_dir_for(out) / "index" / "entity.trained").is_file()
    for marker in done[1::2]:  # as if killed with half the parts written
        marker.unlink()
    (parts / done[1].name.replace(".done", ".codes.npy")).write_bytes(b"cut short")
    build_from_dump(catalog, out, settings)
    again = read_manifest(out)
    for kind in ("entity", "relation"):
        assert again.dictionaries[kind].index_sha256 == first.dictionaries[kind].index_sha256
        assert again.dictionaries[kind].rows_sha256 == first.dictionaries[kind].rows_sha256
    # Other index settings start the stage over: their codes would not fit.
    other = DumpBuildSettings(
        cluster=ClusterSettings(workers=1), cache_dir=cache, drawn_vectors=True, index_kind="flat"
    )
    build_from_dump(catalog, out, other)
    assert not (work_dir_for(out) / "index" / "entity.trained").exists()
    assert read_manifest(out).dictionaries["entity"].rows_sha256 == first.dictionaries["entity"].rows_sha256
