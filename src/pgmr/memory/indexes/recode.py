"""New PQ codes for a built ivfpq-rerank index, from its own float16 vectors: no re-encoding of texts.

At 10M items, scanning 8-bit codes for 128 of 4,500 lists is most of a question's resolve time (a single query:
42 ms on one core). 4-bit codes are scanned with SIMD table lookups (FAISS fast-scan) and take half the RAM.
Re-coding keeps the coarse quantizer (so every row goes to the list it was in), trains the new product quantizer
on a sample of the stored vectors, and adds the rows in file order, slice by slice; the float16 vectors are
copied into the new file as they are. Rows are assigned to their lists again (FAISS's fast-scan lists are written
only by its own `add`), which is most of the time it takes.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

from pgmr.memory.indexes.faiss_index import _faiss
from pgmr.memory.indexes.reranked_ivfpq import _SLICE, TRAIN_ROWS, RerankedIVFPQ


def recode(
    source: RerankedIVFPQ,
    *,
    m: int | None = None,
    nbits: int = 4,
    scratch_dir: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> RerankedIVFPQ:
    """An index with the same lists, vectors, nprobe and rerank as `source`, and new `m` x `nbits` codes."""
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
    index.train(source.reconstruct(pick))
    target = RerankedIVFPQ(
        dimension, nlist=nlist, m=m, nbits=nbits, nprobe=source.nprobe, rerank=source.rerank,
        scratch_dir=scratch_dir,
    )  # fmt: skip
    target._index = index
    for start in range(0, len(source), _SLICE):
        stop = min(len(source), start + _SLICE)
        vectors = np.ascontiguousarray(source._vectors[start:stop], dtype=np.float32)
        target._append(vectors, partial(index.add, vectors))
        if progress:
            progress(stop, len(source))
    return target


def recode_file(
    source: Path, target: Path, *, m: int | None = None, nbits: int = 4, **kwargs: object
) -> None:
    """`recode` from one index file into another (written as `save` writes: whole, or not at all)."""
    recoded = recode(RerankedIVFPQ.load(source), m=m, nbits=nbits, **kwargs)  # type: ignore[arg-type]
    recoded.save(target)
