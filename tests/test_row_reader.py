"""Scattered row reads from an on-disk array (pgmr.memory.indexes.row_reader), as re-ranking uses them."""

from __future__ import annotations

import numpy as np
import pytest

from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ
from pgmr.memory.indexes.row_reader import RowReader


def _array_file(tmp_path, rows=500, dimension=16):
    vectors = np.random.default_rng(3).standard_normal((rows, dimension)).astype(np.float16)
    path = tmp_path / "vectors.npy"
    np.save(path, vectors)
    with path.open("rb") as handle:
        np.lib.format.read_magic(handle)
        np.lib.format.read_array_header_1_0(handle)
        offset = handle.tell()
    return path, offset, vectors


def test_rows_come_back_in_the_order_asked_with_repeats(tmp_path):
    path, offset, vectors = _array_file(tmp_path)
    reader = RowReader(path, offset, len(vectors), vectors.shape[1], np.float16)
    wanted = np.array([499, 0, 17, 17, 250])
    reader.prefetch(wanted)
    got = reader.read(wanted)
    assert got.dtype == np.float16  # as stored: the index decodes (float16 or sq8)
    np.testing.assert_array_equal(got, vectors[wanted])
    assert reader.read(np.array([], dtype=np.int64)).shape == (0, vectors.shape[1])
    reader.close()


def test_out_of_range_rows_and_a_truncated_file_are_clear_errors(tmp_path):
    path, offset, vectors = _array_file(tmp_path)
    reader = RowReader(path, offset, len(vectors), vectors.shape[1], np.float16)
    with pytest.raises(IndexError, match="out of range"):
        reader.read(np.array([500]))
    with path.open("r+b") as handle:
        handle.truncate(offset + 100 * vectors.shape[1] * 2)
    with pytest.raises(OSError, match="truncated"):
        reader.read(np.array([10, 300]))


def test_a_loaded_reranked_index_reads_its_rows_without_the_memory_map(tmp_path):
    vectors = np.random.default_rng(5).standard_normal((2000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = RerankedIVFPQ(32, nlist=16, m=8, nprobe=16, rerank=50)
    index.add(vectors)
    before = index.search(vectors[:20], 5)
    index.save(tmp_path / "index.faiss")
    loaded = RerankedIVFPQ.load(tmp_path / "index.faiss", resident_max=0)
    assert loaded._reader is not None
    after = loaded.search(vectors[:20], 5)
    np.testing.assert_array_equal(before[1], after[1])
    np.testing.assert_allclose(before[0], after[0], rtol=1e-6)
    np.testing.assert_array_equal(loaded.reconstruct(np.array([7, 3])), vectors[[7, 3]].astype(np.float16))
    # Rows added after loading move to a scratch file: reads go through it, not the saved file.
    loaded.add(vectors[:10])
    assert loaded._reader is None
    assert len(loaded) == 2010


def test_a_small_index_holds_its_vectors_in_ram_and_searches_as_from_disk(tmp_path):
    vectors = np.random.default_rng(6).standard_normal((2000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    index = RerankedIVFPQ(32, nlist=16, m=8, nprobe=16, rerank=300, vectors="sq8")
    index.add(vectors)
    index.save(tmp_path / "index.faiss")
    on_disk = RerankedIVFPQ.load(tmp_path / "index.faiss", resident_max=0)
    resident = RerankedIVFPQ.load(tmp_path / "index.faiss")
    assert on_disk._reader is not None and resident._reader is None
    assert not isinstance(resident._vectors, np.memmap)
    # Deeper than the re-ranking depth too, as a dictionary's fetch of many-alias IDs goes.
    for k in (5, 1200):
        disk_scores, disk_ids = on_disk.search(vectors[:20], k)
        ram_scores, ram_ids = resident.search(vectors[:20], k)
        np.testing.assert_array_equal(disk_ids, ram_ids)
        np.testing.assert_array_equal(disk_scores, ram_scores)
    rows = np.array([1999, 0, 7, 7])
    np.testing.assert_array_equal(on_disk.reconstruct(rows), resident.reconstruct(rows))


def test_fast_scan_codes_added_from_encoded_rows_search_as_added_ones(tmp_path):
    """4-bit (fast-scan) codes: FAISS's block-packed lists take rows only through its own `add`, so codes
    encoded apart (a dump build's parts) go into plain lists, converted before the first search; they must end
    in the same index as adding the vectors, and be saved as fast-scan lists."""
    vectors = np.random.default_rng(9).standard_normal((3000, 32)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    direct = RerankedIVFPQ(32, nlist=16, m=8, nbits=4, nprobe=16, rerank=50)
    direct.train(vectors)
    encoded = RerankedIVFPQ(32, nlist=16, m=8, nbits=4, nprobe=16, rerank=50)
    encoded.restore_trained(direct.trained_state())
    direct.add(vectors)
    for start in (0, 1000, 2000):
        part = vectors[start : start + 1000]
        encoded.add_encoded(encoded.encode_rows(part), part)
    assert encoded.options()["nbits"] == 4
    faiss = pytest.importorskip("faiss")
    assert type(encoded._index) is faiss.IndexIVFPQ  # the parts' own codes, not encoded again
    expected = direct.search(vectors[:30], 5)
    np.testing.assert_array_equal(expected[1], encoded.search(vectors[:30], 5)[1])
    assert isinstance(encoded._index, faiss.IndexIVFPQFastScan)
    encoded.save(tmp_path / "encoded.faiss")
    loaded = RerankedIVFPQ.load(tmp_path / "encoded.faiss")
    assert isinstance(loaded._index, faiss.IndexIVFPQFastScan)
    np.testing.assert_array_equal(expected[1], loaded.search(vectors[:30], 5)[1])
    # Rows added to a loaded fast-scan index go through FAISS's own add.
    loaded.add_encoded(loaded.encode_rows(vectors[:10]), vectors[:10])
    assert len(loaded) == 3010 and loaded.search(vectors[:1], 1)[0][0, 0] > 0.99
