"""What every generator is: questions (and, for RAG, candidate blocks) in, raw texts out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

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
