"""New PQ codes (and stored vectors) for a built ivfpq-rerank index, from its own vectors: no texts encoded again.

At 10M items, scanning 8-bit codes for 128 of 4,500 lists is most of a question's resolve time (a single query:
42 ms on one core). 4-bit codes are scanned with SIMD table lookups (FAISS fast-scan) and take half the RAM.
Re-coding keeps the coarse quantizer (so every row goes to the list it was in), trains the new product quantizer
on a sample of the stored vectors, and adds the rows in file order, slice by slice; the stored vectors are
copied into the new file, or turned into another format (`vectors`: float16 to sq8 halves the file, so that the
page cache holds it at 10M items). Rows are assigned to their lists again (FAISS's fast-scan lists are written
only by its own `add`), which is most of the time it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from pgmr.memory.indexes.faiss_index import _faiss
from pgmr.memory.indexes.reranked_ivfpq import _SLICE, TRAIN_ROWS, RerankedIVFPQ
from pgmr.memory.indexes.vector_codec import VectorCodec


def recode(
    source: RerankedIVFPQ,
    *,
    m: int | None = None,
    nbits: int = 4,
    vectors: str | None = None,
    scratch_dir: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RerankedIVFPQ:
    """An index with the same lists, vectors, nprobe and rerank as `source`, and new `m` x `nbits` codes;
    `vectors` (fp16, sq8) stores the vectors in another format (default: as `source` does)."""
    faiss = _faiss()
    raw = source._index
    if raw is None or not len(source):
        raise ValueError("only a built, non-empty index can be re-coded")
    dimension, nlist = int(raw.d), int(raw.nlist)
    m = m or int(raw.pq.M)
    quantizer = faiss.IndexFlatIP(dimension)
    quantizer.add(raw.quantizer.reconstruct_n(0, nlist))
    kind = faiss.IndexIVFPQFastScan if nbits == 4 else faiss.IndexIVFPQ
    index = kind(quantizer, dimension, nlist, m, nbits, faiss.METRIC_INNER_PRODUCT)
    # The quantizer holds its nlist centroids already, so training only fits the product quantizer.
    pick = np.sort(np.random.default_rng(0).choice(len(source), min(len(source), TRAIN_ROWS), replace=False))
    sample = source.reconstruct(pick)
    index.train(sample)
    codec = source._trained_codec()
    if vectors and vectors != codec.kind:
        codec = VectorCodec.fit(vectors, sample)
    target = RerankedIVFPQ(
        dimension, nlist=nlist, m=m, nbits=nbits, nprobe=source.nprobe, rerank=source.rerank,
        vectors=codec.kind, scratch_dir=scratch_dir,
    )  # fmt: skip
    # The same format keeps the source's codec, so that its stored rows are copied without a second rounding.
    target._index, target._codec = index, codec
    for start in range(0, len(source), _SLICE):
        stop = min(len(source), start + _SLICE)
        rows = np.ascontiguousarray(source._trained_codec().decode(source._vectors[start:stop]))
        target._append(rows, partial(index.add, rows))
        if progress:
            progress(stop, len(source))
    return target


def recode_file(
    source: Path,
    target: Path,
    *,
    m: int | None = None,
    nbits: int = 4,
    vectors: str | None = None,
    **kwargs: object,
) -> None:
    """`recode` from one index file into another (written as `save` writes: whole, or not at all)."""
    recoded = recode(RerankedIVFPQ.load(source), m=m, nbits=nbits, vectors=vectors, **kwargs)  # type: ignore[arg-type]
    recoded.save(target)
