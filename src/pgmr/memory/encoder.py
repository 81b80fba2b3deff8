"""What the memory needs from a text encoder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from pgmr.failpoints import failpoint

# `progress(done, total)`: texts encoded so far, of all texts of the call.
EncodeProgress = Callable[[int, int], None]
# One batch of texts -> their vectors (rows in the batch's order, not yet normalized).
EncodeBatch = Callable[[list[str]], np.ndarray]


@runtime_checkable
class Encoder(Protocol):
    """Texts -> float32 vectors with L2-normalized rows, so inner product is cosine similarity.

    `name` identifies the model stably across processes: a memory records it and refuses to be queried with
    vectors from another model.
    """

    @property
    def name(self) -> str: ...

    @property
    def dimension(self) -> int: ...

    def encode(
        self, texts: Sequence[str], batch_size: int = 64, progress: EncodeProgress | None = None
    ) -> np.ndarray: ...


def encoder_precision(encoder: Encoder) -> str:
    """The number format `encoder` computes in (`precision`, which the shipped encoders have); fp32 for an
    encoder that does not say."""
    precision = getattr(encoder, "precision", "fp32")
    return precision if isinstance(precision, str) else "fp32"


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 copy with unit-length rows; all-zero rows stay zero instead of becoming NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))


def encode_sorted(
    texts: Sequence[str],
    batch_size: int,
    progress: EncodeProgress | None,
    encode_batch: EncodeBatch,
    dimension: int,
) -> np.ndarray:
    """`texts` encoded by `encode_batch` in batches of `batch_size`, as an Encoder's `encode` returns them.

    Batches of similar length pad little; sorting all texts (not only within a batch) is what makes each batch
    homogeneous. Longest first, so a memory problem shows up at once. Rows come back in the input's order and
    unit length whatever the model's last layer does (the Encoder contract)."""
    if batch_size < 1:
        raise ValueError(f"batch_size must be positive, got {batch_size}")
    texts = list(texts)
    out = np.empty((len(texts), dimension), dtype=np.float32)
    if not texts:
        return out
    order = np.argsort([-len(t) for t in texts], kind="stable")
    if progress:
        progress(0, len(texts))
    for start in range(0, len(texts), batch_size):
        positions = order[start : start + batch_size]
        out[positions] = encode_batch([texts[i] for i in positions])
        if progress:
            progress(start + len(positions), len(texts))
        failpoint("memory.encode")  # a crash-safety test kills `pgmr memory build` here
    return normalize_rows(out)
