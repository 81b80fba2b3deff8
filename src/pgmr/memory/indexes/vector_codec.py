"""How an ivfpq-rerank index stores the vectors it re-ranks from: float16, or 8-bit scalar quantized.

At 10M items the float16 vectors are 15.5 GB: more than the page cache of a 24 GB machine holds beside a
server, so a question's few hundred re-ranked rows are sometimes read from disk and its p99 varies from run to
run (docs/scale.md). 8-bit codes with a range per dimension (what FAISS calls SQ8) take half that, 7.7 GB, and
stay cached. The ranges are the training sample's, widened by 5% on each side for rows added later; a row
still outside is clipped. Measured on 200k rows of the real memory (300 noisy queries, 400 candidates each),
re-ranking from them keeps 99.4% of the exact top 10 with ranges fitted on a tenth of the rows (99.6% fitted
on all of them, no margin; float16: 100%); one global scale instead of one per dimension keeps 97.5 to 99.4%,
depending on where it clips.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

VECTOR_FORMATS = ("fp16", "sq8")


def check_vector_format(value: str, what: str = "vector format") -> str:
    """`value` if it names a vector format, else ValueError naming the choices (settings and CLI options)."""
    if value not in VECTOR_FORMATS:
        raise ValueError(f"{what} must be one of {', '.join(VECTOR_FORMATS)}, got {value!r}")
    return value


# What a new ivfpq-rerank index stores (`pgmr memory build --rerank-vectors`); files say what they hold.
DEFAULT_VECTOR_FORMAT = "fp16"
_LEVELS = 255
_MARGIN = 0.05


@dataclass(frozen=True)
class VectorCodec:
    """Float32 vectors to stored rows and back. `sq8` holds each dimension's `low` and `step` (float32)."""

    kind: str = "fp16"
    low: np.ndarray | None = field(default=None, compare=False, repr=False)
    step: np.ndarray | None = field(default=None, compare=False, repr=False)

    def __post_init__(self) -> None:
        check_vector_format(self.kind)
        if self.kind == "sq8" and (
            self.low is None or self.step is None or self.low.shape != self.step.shape or self.low.ndim != 1
        ):
            raise ValueError("sq8 vectors need a low and a step per dimension")

    @classmethod
    def fit(cls, kind: str, sample: np.ndarray) -> VectorCodec:
        """The codec for `kind`; sq8 takes each dimension's range from `sample` (rows outside it are clipped)."""
        if kind != "sq8":
            return cls(kind)
        sample = np.asarray(sample, dtype=np.float32)
        if sample.ndim != 2 or not len(sample):
            raise ValueError(
                "sq8 vectors need a non-empty (rows, dimension) sample to take their ranges from"
            )
        low, high = sample.min(axis=0), sample.max(axis=0)
        # Rows added later can reach past the sample's extremes; a margin keeps most of them unclipped.
        margin = (high - low) * _MARGIN
        low, high = low - margin, high + margin
        # A dimension that never varies in the sample still needs a step: its codes are then all 0.
        step = np.maximum(high - low, np.float32(1e-12)) / _LEVELS
        return cls(kind, low.astype(np.float32), step.astype(np.float32))

    @property
    def dtype(self) -> np.dtype:
        return dtype_of(self.kind)

    def encode(self, vectors: np.ndarray) -> np.ndarray:
        if self.kind == "fp16":
            return np.asarray(vectors, dtype=np.float16)
        assert self.low is not None and self.step is not None
        codes = np.rint((np.asarray(vectors, dtype=np.float32) - self.low) / self.step)
        return np.clip(codes, 0, _LEVELS).astype(np.uint8)

    def decode(self, stored: np.ndarray) -> np.ndarray:
        if self.kind == "fp16":
            return np.asarray(stored, dtype=np.float32)
        assert self.low is not None and self.step is not None
        return stored.astype(np.float32) * self.step + self.low

    # -- the block after the stored rows in an index file (empty for fp16) -----------------------------------

    @staticmethod
    def side_size(dtype: np.dtype, dimension: int) -> int:
        return 0 if np.dtype(dtype) == np.float16 else 2 * 4 * dimension

    def side_block(self) -> bytes:
        if self.kind == "fp16":
            return b""
        assert self.low is not None and self.step is not None
        return np.concatenate([self.low, self.step]).astype("<f4").tobytes()

    @classmethod
    def from_side_block(cls, dtype: np.dtype, block: bytes, dimension: int) -> VectorCodec:
        if np.dtype(dtype) == np.float16:
            return cls("fp16")
        if np.dtype(dtype) != np.uint8 or len(block) != cls.side_size(dtype, dimension):
            raise ValueError(f"stored vectors of type {dtype} with a {len(block)}-byte range block")
        ranges = np.frombuffer(block, dtype="<f4").astype(np.float32)
        if not np.isfinite(ranges).all() or (ranges[dimension:] <= 0).any():
            raise ValueError("the sq8 ranges are not finite positive steps")
        return cls("sq8", ranges[:dimension].copy(), ranges[dimension:].copy())


def dtype_of(kind: str) -> np.dtype:
    """The stored rows' type for a vector format."""
    return np.dtype(np.float16 if kind == "fp16" else np.uint8)
