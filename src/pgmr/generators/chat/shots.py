"""Few-shot selection: the training examples whose questions are nearest to a new question (cosine over the
MiniLM encoder's unit vectors), from an exact numpy or FAISS inner-product index."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

import numpy as np

from pgmr.generators.chat.prompts import split_source
from pgmr.generators.examples import Example

if TYPE_CHECKING:
    from pgmr.memory.encoder import Encoder

SHOT_BACKENDS = ("numpy", "faiss")


class ShotSource(Protocol):
    """What ChatGenerator needs: k examples per question, nearest first."""

    def select(self, questions: Sequence[str], k: int) -> list[list[Example]]: ...


def _key(text: str) -> str:
    return " ".join(text.lower().split())


class ShotSelector:
    """Examples indexed by the embedding of their question (the first line of `Example.source`).

    `exclude_same_question` skips an example whose question equals the one asked (case and spacing
    ignored), so that evaluating on training questions does not hand the model its own answer.
    """

    def __init__(
        self,
        examples: Sequence[Example],
        encoder: Encoder | None = None,
        *,
        backend: str = "numpy",
        batch_size: int = 64,
        exclude_same_question: bool = True,
    ) -> None:
        if not examples:
            raise ValueError("ShotSelector needs at least one example")
        if backend not in SHOT_BACKENDS:
            raise ValueError(
                f"unknown shot index backend {backend!r}; choose one of {', '.join(SHOT_BACKENDS)}"
            )
        modes = {e.mode for e in examples}
        if len(modes) > 1:
            raise ValueError(f"examples mix modes {sorted(modes)}; shots must share the generator's mode")
        if encoder is None:
            from pgmr.memory.encoders import load_encoder

            encoder = load_encoder()
        self.encoder = encoder
        self.examples: tuple[Example, ...] = tuple(examples)
        self.mode = next(iter(modes))
        self.exclude_same_question = exclude_same_question
        self._questions = [split_source(e.source)[0] for e in self.examples]
        self._keys = [_key(q) for q in self._questions]
        vectors = np.asarray(encoder.encode(self._questions, batch_size=batch_size), dtype=np.float32)
        self._backend = backend
        if backend == "faiss":
            from pgmr.memory.indexes.faiss_index import FaissIndex

            self._faiss = FaissIndex(vectors.shape[1], "flat")
            self._faiss.add(vectors)
        else:
            self._vectors = vectors

    def __len__(self) -> int:
        return len(self.examples)

    def select(self, questions: Sequence[str], k: int) -> list[list[Example]]:
        """Per question, up to k examples, nearest first (ties: earlier example first)."""
        if isinstance(questions, str):
            raise TypeError("select takes a sequence of questions, not one string")
        if k < 0:
            raise ValueError("k must be >= 0")
        if k == 0 or not questions:
            return [[] for _ in questions]
        queries = np.asarray(self.encoder.encode(list(questions)), dtype=np.float32)
        # One extra candidate per question covers the excluded identical question.
        want = min(len(self.examples), k + (1 if self.exclude_same_question else 0))
        rows = self._search(queries, want)
        out: list[list[Example]] = []
        for question, row in zip(questions, rows, strict=True):
            key = _key(question)
            chosen = [
                self.examples[i]
                for i in row
                if i >= 0 and not (self.exclude_same_question and self._keys[i] == key)
            ]
            out.append(chosen[:k])
        return out

    def _search(self, queries: np.ndarray, k: int) -> list[list[int]]:
        if self._backend == "faiss":
            _, ids = self._faiss.search(queries, k)
            return [[int(i) for i in row] for row in ids]
        scores = queries @ self._vectors.T
        # Stable sort on negated scores: equal scores keep example order, so selection is deterministic.
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
        return [[int(i) for i in row] for row in order]
