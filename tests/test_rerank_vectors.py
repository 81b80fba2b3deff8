"""How an ivfpq-rerank index stores the vectors it re-ranks from (pgmr.memory.indexes.vector_codec): float16,
or sq8 (8 bits a dimension), through save, load, recode, a dump build's trained state and the page cache."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from pgmr.memory.errors import IndexTrainingError
from pgmr.memory.indexes.recode import recode
from pgmr.memory.indexes.reranked_ivfpq import RerankedIVFPQ
from pgmr.memory.indexes.vector_codec import VectorCodec


def _unit(rows: int, dimension: int = 32, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((rows, dimension)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def test_sq8_rows_come_back_within_half_a_step_and_outliers_are_clipped() -> None:
    sample = _unit(2_000)
    codec = VectorCodec.fit("sq8", sample)
    assert codec.encode(sample).dtype == np.uint8
    assert codec.low is not None and codec.step is not None
    error = np.abs(codec.decode(codec.encode(sample)) - sample)
    assert (error <= codec.step / 2 + 1e-6).all()
    far = np.full((1, 32), 5.0, dtype=np.float32)  # beyond any unit vector's range
    assert codec.encode(far).max() == 255
    with pytest.raises(ValueError, match="one of fp16, sq8"):
        VectorCodec("int4")
    with pytest.raises(ValueError, match="non-empty"):
        VectorCodec.fit("sq8", np.zeros((0, 32), dtype=np.float32))


def test_an_sq8_index_is_half_the_size_and_finds_what_a_float16_one_finds(tmp_path: Path) -> None:
    vectors = _unit(3_000, seed=1)
    saved = {}
    for kind in ("fp16", "sq8"):
        index = RerankedIVFPQ(32, nlist=16, m=8, nbits=4, nprobe=16, rerank=60, vectors=kind)
        index.add(vectors)
        index.save(tmp_path / f"{kind}.index")
        saved[kind] = RerankedIVFPQ.load(tmp_path / f"{kind}.index")
    fp16, sq8 = saved["fp16"], saved["sq8"]
    assert (sq8.options()["vectors"], fp16.options()["vectors"]) == ("sq8", "fp16")
    sizes = {k: (tmp_path / f"{k}.index").stat().st_size for k in saved}
    assert sizes["sq8"] < 0.6 * sizes["fp16"]
    # Rows find themselves first, and the top 10 mostly agree with float16 re-ranking.
    _, first = sq8.search(vectors[:200], 10)
    assert (first[:, 0] == np.arange(200)).mean() >= 0.99
    _, reference = fp16.search(vectors[:200], 10)
    agreement = np.mean([len(set(a) & set(b)) / 10 for a, b in zip(first, reference, strict=True)])
    assert agreement >= 0.9, agreement
    np.testing.assert_allclose(sq8.reconstruct(np.arange(50)), vectors[:50], atol=0.02)


def test_a_damaged_range_block_is_refused_with_the_reason(tmp_path: Path) -> None:
    index = RerankedIVFPQ(32, nlist=8, m=8, nprobe=8, vectors="sq8")
    index.add(_unit(1_000, seed=2))
    path = tmp_path / "index.faiss"
    index.save(path)
    rows_end = 128 + 1_000 * 32  # .npy header, then one byte a dimension
    with path.open("r+b") as handle:
        handle.seek(rows_end + 32 * 4)  # the first steps
        handle.write(np.full(4, -1.0, dtype="<f4").tobytes())
    with pytest.raises(ValueError, match="damaged ivfpq-rerank index .*sq8 ranges"):
        RerankedIVFPQ.load(path)


def test_a_dump_builds_trained_state_carries_the_ranges() -> None:
    """The index stage trains once and encodes shards in other processes: they must store rows alike."""
    vectors = _unit(2_000, seed=3)
    trained = RerankedIVFPQ(32, nlist=16, m=8, nbits=4, nprobe=16, rerank=50, vectors="sq8")
    trained.train(vectors)
    state = trained.trained_state()
    elsewhere = RerankedIVFPQ(32, nlist=16, m=8, nbits=4, nprobe=16, rerank=50, vectors="sq8")
    elsewhere.restore_trained(state)
    for start in (0, 1_000):
        part = vectors[start : start + 1_000]
        elsewhere.add_encoded(elsewhere.encode_rows(part), part)
    trained.add(vectors)
    np.testing.assert_array_equal(
        trained.reconstruct(np.arange(2_000)), elsewhere.reconstruct(np.arange(2_000))
    )
    with pytest.raises(IndexTrainingError, match="with fp16 vectors"):
        RerankedIVFPQ(32, nlist=16, m=8, nbits=4).restore_trained(state)
    with pytest.raises(IndexTrainingError, match="not the trained state"):
        RerankedIVFPQ(32, vectors="sq8").restore_trained(b"junk")
    with pytest.raises(IndexTrainingError, match="before adding encoded rows"):
        RerankedIVFPQ(32, vectors="sq8").add_encoded(
            np.zeros((0, 9), np.uint8), np.zeros((0, 32), np.float32)
        )


def test_recoding_turns_float16_vectors_into_sq8_ones() -> None:
    vectors = _unit(3_000, seed=4)
    source = RerankedIVFPQ(32, nlist=16, m=8, nprobe=16, rerank=60)
    source.add(vectors)
    target = recode(source, nbits=4, vectors="sq8")
    assert target.options()["vectors"] == "sq8" and target.options()["nbits"] == 4
    np.testing.assert_allclose(target.reconstruct(np.arange(3_000)), vectors, atol=0.02)
    _, found = target.search(vectors[:100], 1)
    assert (found[:, 0] == np.arange(100)).mean() >= 0.99
    # The same format again copies the stored rows as they are (no second rounding).
    again = recode(target, nbits=4)
    np.testing.assert_array_equal(again.reconstruct(np.arange(3_000)), target.reconstruct(np.arange(3_000)))
