"""What every generator is: questions (and, for RAG, candidate blocks) in, raw texts out."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar, runtime_checkable

T = TypeVar("T")
R = TypeVar("R")

# pgmr: SPARQL-PGMR (placeholders + mapping block), resolved afterwards against the memory.
# direct: SPARQL with Wikidata IDs written by the model itself (the baseline that can hallucinate IDs).
# rag: direct, with retrieved candidate IDs in the input. rag-pgmr: SPARQL-PGMR with the same input.
MODES: tuple[str, ...] = ("pgmr", "direct", "rag", "rag-pgmr")
PGMR_MODES: frozenset[str] = frozenset({"pgmr", "rag-pgmr"})
RAG_MODES: frozenset[str] = frozenset({"rag", "rag-pgmr"})


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; expected one of {', '.join(MODES)}")
    return mode


def check_generate_inputs(
    mode: str, questions: Sequence[str], contexts: Sequence[str] | None, batch_size: int
) -> None:
    """The argument checks every `Generator.generate` makes, with the same messages for every backend."""
    if isinstance(questions, str):
        raise TypeError("generate takes a sequence of questions, not one string")
    if batch_size < 1:
        raise ValueError("batch_size must be positive")
    if mode in RAG_MODES and (contexts is None or len(contexts) != len(questions)):
        got = "none" if contexts is None else str(len(contexts))
        raise ValueError(
            f"mode {mode!r} needs contexts: one candidate block per question "
            f"({len(questions)} questions, {got} contexts)"
        )


def generate_in_length_order(
    items: Sequence[T],
    batch_size: int,
    generate_batch: Callable[[list[int]], list[R]],
    length: Callable[[T], int],
) -> list[R]:
    """Call `generate_batch` on index batches of similar `length` (less padding), outputs in input order."""
    order = sorted(range(len(items)), key=lambda i: length(items[i]))
    outputs: list[R] = [None] * len(items)  # type: ignore[list-item]  # every slot is filled below
    for start in range(0, len(order), batch_size):
        batch = order[start : start + batch_size]
        for i, text in zip(batch, generate_batch(batch), strict=True):
            outputs[i] = text
    return outputs


@runtime_checkable
class Generator(Protocol):
    """A trained question -> query model. `generate` returns one raw text per question, in order."""

    mode: str

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]: ...


class GeneratorError(RuntimeError):
    """A generator backend failed: a server unreachable or answering with an error, a malformed answer.

    The message names the backend (e.g. the server URL) and what went wrong, for printing as it is.
    """
