"""The behaviour every `Encoder` and `VectorIndex` backend owes the memory, as reusable pytest classes.

    class TestMyEncoder(EncoderContract):
        @pytest.fixture(scope="class")
        @classmethod
        def encoder(cls) -> Encoder:
            return MyEncoder()

    class TestMyIndex(VectorIndexContract):
        @pytest.fixture(scope="class")
        @classmethod
        def make_index(cls) -> Callable[[int], VectorIndex]:
            return lambda dimension: MyIndex(dimension)      # a new, empty index

        @pytest.fixture(scope="class")
        @classmethod
        def load_index(cls) -> Callable[[Path], VectorIndex]:
            return MyIndex.load

An approximate index sets `exact = False` (its own vectors need only be found most of the time, and a
search need not reach every row); a lossy one sets `reconstruct_atol` to how far a stored vector may come
back from what was added; one that trains on its first `add` sets `min_rows` to what it needs.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from pgmr.memory.encoder import Encoder, normalize_rows
from pgmr.memory.index import VectorIndex

__all__ = ["CONTRACT_TEXTS", "EncoderContract", "VectorIndexContract", "unit_vectors"]

CONTRACT_TEXTS: tuple[str, ...] = (
    "Berlin",
    "capital and largest city of Germany",
    "Paris",
    "son of Priam, king of Troy",
    "Zürich — 東京 — Αθήνα",
    "a",
)
_UNIT = 1e-4  # how far from 1 a unit row's norm may be (float32 arithmetic)


def unit_vectors(rows: int, dimension: int, seed: int = 0) -> np.ndarray:
    """Random float32 rows of length 1, as an encoder makes them."""
    return normalize_rows(np.random.default_rng(seed).standard_normal((rows, dimension)))


class EncoderContract:
    """Inherit and provide an `encoder` fixture. Vectors are compared with `atol` (batching may pad)."""

    texts: tuple[str, ...] = CONTRACT_TEXTS
    atol: float = 1e-4

    def test_is_an_encoder(self, encoder: Encoder) -> None:
        assert isinstance(encoder, Encoder)

    def test_name_is_a_stable_non_empty_string(self, encoder: Encoder) -> None:
        # A memory records the name and refuses vectors of another: it must not change between reads.
        assert isinstance(encoder.name, str) and encoder.name.strip()
        assert encoder.name == encoder.name

    def test_dimension_is_a_positive_int(self, encoder: Encoder) -> None:
        assert isinstance(encoder.dimension, int) and encoder.dimension > 0

    def test_vectors_are_float32_rows_of_the_dimension(self, encoder: Encoder) -> None:
        vectors = encoder.encode(list(self.texts))
        assert isinstance(vectors, np.ndarray)
        assert vectors.dtype == np.float32
        assert vectors.shape == (len(self.texts), encoder.dimension)

    def test_rows_are_unit_length_so_inner_product_is_cosine(self, encoder: Encoder) -> None:
        vectors = encoder.encode(list(self.texts))
        assert np.isfinite(vectors).all()
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=_UNIT)

    def test_a_text_is_most_similar_to_itself(self, encoder: Encoder) -> None:
        vectors = encoder.encode(list(self.texts) + [self.texts[0]])
        similarities = vectors @ vectors.T
        assert similarities[0, -1] == pytest.approx(1.0, abs=self.atol)
        distinct = similarities[: len(self.texts), : len(self.texts)] - np.eye(len(self.texts))
        assert distinct.max() < 0.99, "different texts must not collapse onto one vector"

    def test_encoding_is_deterministic(self, encoder: Encoder) -> None:
        np.testing.assert_allclose(
            encoder.encode(list(self.texts)), encoder.encode(list(self.texts)), atol=1e-6
        )

    def test_a_text_gets_the_same_vector_alone_and_in_any_batch(self, encoder: Encoder) -> None:
        together = encoder.encode(list(self.texts))
        alone = np.vstack([encoder.encode([t]) for t in self.texts])
        np.testing.assert_allclose(alone, together, atol=self.atol)
        np.testing.assert_allclose(encoder.encode(list(self.texts), batch_size=2), together, atol=self.atol)
        reversed_order = encoder.encode(list(reversed(self.texts)))
        np.testing.assert_allclose(reversed_order[::-1], together, atol=self.atol)

    def test_any_sequence_of_texts(self, encoder: Encoder) -> None:
        np.testing.assert_allclose(
            encoder.encode(tuple(self.texts)), encoder.encode(list(self.texts)), atol=1e-6
        )

    def test_no_texts_give_an_empty_matrix(self, encoder: Encoder) -> None:
        vectors = encoder.encode([])
        assert vectors.shape == (0, encoder.dimension) and vectors.dtype == np.float32

    def test_empty_and_very_long_texts_are_encoded(self, encoder: Encoder) -> None:
        # The memory encodes whatever labels and descriptions a catalog holds: some are empty, a few long.
        vectors = encoder.encode(["", "word " * 5000])
        assert vectors.shape == (2, encoder.dimension) and np.isfinite(vectors).all()
        norms = np.linalg.norm(vectors, axis=1)
        assert ((np.abs(norms - 1.0) < _UNIT) | (norms == 0.0)).all()
        assert np.linalg.norm(vectors[1]) == pytest.approx(1.0, abs=_UNIT)

    def test_progress_counts_the_texts_done(self, encoder: Encoder) -> None:
        reports: list[tuple[int, int]] = []
        texts = list(self.texts)
        encoder.encode(texts, batch_size=4, progress=lambda done, total: reports.append((done, total)))
        assert reports and reports[-1] == (len(texts), len(texts))
        done = [d for d, _ in reports]
        assert all(total == len(texts) for _, total in reports) and done == sorted(done) and done[0] >= 0

    def test_batch_size_must_be_positive(self, encoder: Encoder) -> None:
        with pytest.raises(ValueError, match="batch_size"):
            encoder.encode(list(self.texts), batch_size=0)


class VectorIndexContract:
    """Inherit and provide `make_index` (dimension -> new empty index) and `load_index` (path -> index), both
    class-scoped: one filled index serves the checks that only read it."""

    dimension: int = 16
    exact: bool = True
    reconstruct_atol: float = 1e-5
    min_rows: int = 1
    rows: int = 300

    # -- helpers -----------------------------------------------------------------------------------------------

    @classmethod
    def _vectors(cls, seed: int = 0) -> np.ndarray:
        return unit_vectors(max(cls.rows, cls.min_rows), cls.dimension, seed)

    @classmethod
    def _fill(cls, make_index: Callable[[int], VectorIndex]) -> tuple[VectorIndex, np.ndarray]:
        index = make_index(cls.dimension)
        vectors = cls._vectors()
        index.add(vectors)
        return index, vectors

    @pytest.fixture(scope="class")
    @classmethod
    def filled(cls, make_index: Callable[[int], VectorIndex]) -> tuple[VectorIndex, np.ndarray]:
        """An index holding `_vectors()`, shared by the checks that do not change it."""
        return cls._fill(make_index)

    @staticmethod
    def _check_result(scores: np.ndarray, row_ids: np.ndarray, queries: int, k: int, rows: int) -> None:
        assert scores.shape == row_ids.shape == (queries, k)
        assert np.issubdtype(scores.dtype, np.floating) and np.issubdtype(row_ids.dtype, np.integer)
        missing = row_ids < 0
        assert (row_ids[missing] == -1).all() and (row_ids < rows).all()
        assert np.isneginf(scores[missing]).all() and np.isfinite(scores[~missing]).all()
        for ids, row_scores, found in zip(row_ids, scores, ~missing, strict=True):
            # Rows found come first, best first, each at most once; then the empty slots.
            count = int(found.sum())
            assert found[:count].all(), f"empty slots before found rows: {ids.tolist()}"
            assert len(set(ids[:count].tolist())) == count, f"a row found twice: {ids.tolist()}"
            assert (np.diff(row_scores[:count]) <= 1e-6).all(), f"not best first: {row_scores.tolist()}"

    # -- the checks --------------------------------------------------------------------------------------------

    def test_a_new_index_is_empty_and_says_what_it_is(self, make_index: Callable[[int], VectorIndex]) -> None:
        index = make_index(self.dimension)
        assert isinstance(index, VectorIndex)
        assert isinstance(index.kind, str) and index.kind
        assert index.dimension == self.dimension
        assert len(index) == 0

    def test_searching_an_empty_index_finds_nothing(self, make_index: Callable[[int], VectorIndex]) -> None:
        scores, row_ids = make_index(self.dimension).search(unit_vectors(3, self.dimension), 4)
        self._check_result(scores, row_ids, 3, 4, 0)
        assert (row_ids == -1).all() and np.isneginf(scores).all()

    def test_rows_are_numbered_in_insertion_order(self, make_index: Callable[[int], VectorIndex]) -> None:
        index, vectors = self._fill(make_index)
        assert len(index) == len(vectors)
        more = unit_vectors(5, self.dimension, seed=1)
        index.add(more)
        assert len(index) == len(vectors) + 5
        added = np.arange(len(vectors), len(vectors) + 5)
        np.testing.assert_allclose(index.reconstruct(added), more, atol=self.reconstruct_atol)
        np.testing.assert_allclose(index.reconstruct(np.arange(5)), vectors[:5], atol=self.reconstruct_atol)
        if self.exact:
            assert index.search(more, 1)[1][:, 0].tolist() == added.tolist()

    def test_each_stored_vector_finds_its_own_row(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        scores, row_ids = index.search(vectors, 3)
        self._check_result(scores, row_ids, len(vectors), 3, len(vectors))
        hits = (row_ids[:, 0] == np.arange(len(vectors))).mean()
        assert hits == 1.0 if self.exact else hits >= 0.9, f"{hits:.1%} of rows found themselves first"

    def test_scores_are_inner_products_best_first(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        queries = unit_vectors(7, self.dimension, seed=2)
        scores, row_ids = index.search(queries, 10)
        self._check_result(scores, row_ids, 7, 10, len(vectors))
        found = row_ids >= 0
        stored = index.reconstruct(row_ids[found])
        inner = np.einsum("nd,nd->n", np.repeat(queries, found.sum(axis=1), axis=0), stored)
        np.testing.assert_allclose(scores[found], inner, atol=1e-3)
        if self.exact:
            expected = np.argsort(-(queries @ vectors.T), axis=1, kind="stable")[:, :10]
            assert row_ids.tolist() == expected.tolist()

    def test_k_beyond_the_rows_pads_with_minus_one(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        k = len(vectors) + 7
        scores, row_ids = index.search(vectors[:2], k)
        self._check_result(scores, row_ids, 2, k, len(vectors))
        assert (row_ids[:, len(vectors) :] == -1).all()
        if self.exact:
            assert all(sorted(ids[: len(vectors)].tolist()) == list(range(len(vectors))) for ids in row_ids)

    def test_no_queries_give_empty_results(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        scores, row_ids = filled[0].search(np.zeros((0, self.dimension), np.float32), 5)
        assert scores.shape == row_ids.shape == (0, 5)

    def test_any_float_array_is_taken(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        # float64 and non-contiguous views are what numpy code hands over without thinking about it.
        as_float32 = index.search(vectors[:4], 3)
        as_float64 = index.search(vectors[:4].astype(np.float64), 3)
        strided = index.search(np.asfortranarray(vectors[:4]), 3)
        for other in (as_float64, strided):
            assert other[1].tolist() == as_float32[1].tolist()
            np.testing.assert_allclose(other[0], as_float32[0], atol=1e-6)

    def test_wrong_shapes_and_k_are_value_errors(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        with pytest.raises(ValueError):
            index.add(unit_vectors(3, self.dimension + 1))
        with pytest.raises(ValueError):
            index.search(vectors[0], 3)  # one vector, not a (1, dimension) matrix
        with pytest.raises(ValueError):
            index.search(unit_vectors(1, self.dimension - 1), 3)
        with pytest.raises(ValueError):
            index.search(vectors[:1], 0)
        assert len(index) == len(vectors)

    def test_adding_no_rows_changes_nothing(self, make_index: Callable[[int], VectorIndex]) -> None:
        index = make_index(self.dimension)
        index.add(np.zeros((0, self.dimension), np.float32))
        assert len(index) == 0
        index.add(self._vectors())
        index.add(np.zeros((0, self.dimension), np.float32))
        assert len(index) == len(self._vectors())

    def test_reconstruct_gives_back_the_stored_vectors(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        index, vectors = filled
        ids = np.array([0, len(vectors) - 1, 3, 3])
        back = index.reconstruct(ids)
        assert back.shape == (4, self.dimension) and back.dtype == np.float32
        np.testing.assert_allclose(back, vectors[ids], atol=self.reconstruct_atol)
        assert index.reconstruct(np.array([], dtype=np.int64)).shape == (0, self.dimension)
        for bad in ([len(vectors)], [-1]):
            with pytest.raises(IndexError):
                index.reconstruct(np.array(bad))

    def test_options_are_json_scalars(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        options = filled[0].options()
        assert isinstance(options, dict)
        assert all(isinstance(k, str) and isinstance(v, int | str) for k, v in options.items())
        assert json.loads(json.dumps(options)) == options  # a memory's manifest records them

    def test_concurrent_searches_match_sequential_ones(self, filled: tuple[VectorIndex, np.ndarray]) -> None:
        # The service searches from many request threads at once.
        index, vectors = filled
        expected = [index.search(vectors[i : i + 3], 5)[1].tolist() for i in range(0, 24, 3)]
        results: dict[int, list[list[int]]] = {}
        errors: list[BaseException] = []

        def search(i: int) -> None:
            try:
                for _ in range(5):
                    results[i] = index.search(vectors[i * 3 : i * 3 + 3], 5)[1].tolist()
            except BaseException as exc:  # reported below, in the test's thread
                errors.append(exc)

        threads = [threading.Thread(target=search, args=(i,)) for i in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not errors
        assert [results[i] for i in range(8)] == expected

    def test_save_and_load_round_trip(
        self,
        filled: tuple[VectorIndex, np.ndarray],
        load_index: Callable[[Path], VectorIndex],
        tmp_path: Path,
    ) -> None:
        index, vectors = filled
        path = tmp_path / "index.bin"
        index.save(path)
        loaded = load_index(path)
        assert isinstance(loaded, VectorIndex)
        assert (loaded.kind, loaded.dimension, len(loaded)) == (index.kind, index.dimension, len(index))
        assert loaded.options() == index.options()
        queries = unit_vectors(5, self.dimension, seed=3)
        (scores, row_ids), (loaded_scores, loaded_ids) = index.search(queries, 8), loaded.search(queries, 8)
        assert loaded_ids.tolist() == row_ids.tolist()
        np.testing.assert_allclose(loaded_scores, scores, atol=1e-6)
        loaded.add(unit_vectors(2, self.dimension, seed=4))  # a loaded index is a working one
        assert len(loaded) == len(vectors) + 2

    def test_save_replaces_a_file_and_leaves_nothing_else(
        self,
        make_index: Callable[[int], VectorIndex],
        load_index: Callable[[Path], VectorIndex],
        tmp_path: Path,
    ) -> None:
        index, vectors = self._fill(make_index)
        path = tmp_path / "index.bin"
        path.write_bytes(b"an older file")
        index.save(path)
        index.add(unit_vectors(1, self.dimension, seed=5))
        index.save(path)
        assert [p.name for p in tmp_path.iterdir()] == ["index.bin"]
        assert len(load_index(path)) == len(vectors) + 1

    @pytest.mark.parametrize("damage", ["garbage", "truncated", "empty"])
    def test_a_damaged_file_is_a_clear_error(
        self,
        filled: tuple[VectorIndex, np.ndarray],
        load_index: Callable[[Path], VectorIndex],
        tmp_path: Path,
        damage: str,
    ) -> None:
        # RuntimeError and ValueError are what a memory turns into MemoryCorruptError ("rebuild the memory").
        path = tmp_path / "index.bin"
        filled[0].save(path)
        data = path.read_bytes()
        damaged = {
            "garbage": b"not an index at all " * 10,
            "truncated": data[: len(data) // 2],
            "empty": b"",
        }[damage]
        path.write_bytes(damaged)
        with pytest.raises((RuntimeError, ValueError)) as info:
            load_index(path)
        assert str(info.value).strip()

    def test_a_missing_file_is_an_error(
        self, load_index: Callable[[Path], VectorIndex], tmp_path: Path
    ) -> None:
        with pytest.raises((OSError, RuntimeError, ValueError)):
            load_index(tmp_path / "nothing-here.bin")
