"""What the memory needs from a text encoder."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np

# `progress(done, total)`: texts encoded so far, of all texts of the call.
EncodeProgress = Callable[[int, int], None]


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


def normalize_rows(vectors: np.ndarray) -> np.ndarray:
    """float32 copy with unit-length rows; all-zero rows stay zero instead of becoming NaN."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, np.float32(1e-12))
