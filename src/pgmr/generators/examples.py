"""Training examples (source text -> target text) for each generator mode, from converted records."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from pgmr.conversion import ConvertedRecord, fill
from pgmr.generators.base import PGMR_MODES, RAG_MODES, check_mode
from pgmr.query import IntermediateQuery, parse

if TYPE_CHECKING:
    from pgmr.generators.rag import CandidateRetriever, ContextCache


@dataclass(frozen=True)
class Example:
    id: str
    source: str
    target: str
    mode: str


def source_text(question: str, context: str | None = None) -> str:
    """The model input: the question, then (RAG modes) the candidate block on the following lines."""
    question = " ".join(question.split())
    return f"{question}\n{context}" if context is not None else question


def model_sources(mode: str, questions: Sequence[str], contexts: Sequence[str] | None) -> list[str]:
    """The model inputs of a batch: the questions, with their candidate blocks in RAG modes."""
    if mode in RAG_MODES:
        if contexts is None:
            raise ValueError(f"mode {mode!r} needs contexts")
        return [source_text(q, c) for q, c in zip(questions, contexts, strict=True)]
    return [source_text(q) for q in questions]


def truncate_words(text: str, max_words: int | None) -> str:
    words = text.split()
    return " ".join(words if max_words is None else words[:max_words])


def pgmr_target(query: IntermediateQuery, max_description_words: int | None = 8) -> str:
    """Canonical intermediate text with descriptions cut to `max_description_words` words (None: whole)."""
    placeholders = tuple(
        replace(p, description=truncate_words(p.description, max_description_words))
        for p in query.placeholders
    )
    return replace(query, placeholders=placeholders).to_text()


def direct_target(query: IntermediateQuery, mapping: dict[str, str]) -> str:
    """The gold query with its IDs, compact, without the standard PREFIX declarations."""
    return fill(query, mapping, prefixes=False)


PARAPHRASE_SUFFIX = "~paraphrase"


def with_paraphrases(records: Sequence[ConvertedRecord]) -> list[ConvertedRecord]:
    """The records, then one copy of each record that carries a paraphrase (`meta["paraphrase"]`, LC-QuAD 2.0's
    `paraphrased_question` or another question string) asking it in those words, with the same query.

    Training data only: a validation or test record is asked one way. The copy's id is the record's plus
    `PARAPHRASE_SUFFIX`, so that ids stay unique."""
    extra = [
        replace(record, id=f"{record.id}{PARAPHRASE_SUFFIX}", question=paraphrase)
        for record in records
        if (paraphrase := dict(record.meta).get("paraphrase")) and paraphrase != record.question
    ]
    return [*records, *extra]


def build_examples(
    records: Sequence[ConvertedRecord],
    mode: str,
    *,
    retriever: CandidateRetriever | ContextCache | None = None,
    max_description_words: int | None = 8,
) -> list[Example]:
    """One example per record. RAG modes need a `retriever`; it is called once for all questions (batched)."""
    check_mode(mode)
    if max_description_words is not None and max_description_words < 0:
        raise ValueError("max_description_words must be >= 0 or None")
    contexts: list[str | None] = [None] * len(records)
    if mode in RAG_MODES:
        if retriever is None:
            raise ValueError(f"mode {mode!r} needs a CandidateRetriever (a memory) for its inputs")
        contexts = list(retriever.contexts([r.question for r in records]))
    examples: list[Example] = []
    for record, context in zip(records, contexts, strict=True):
        query = parse(record.intermediate)
        if mode in PGMR_MODES:
            target = pgmr_target(query, max_description_words)
        else:
            target = direct_target(query, record.mapping_dict())
        examples.append(Example(record.id, source_text(record.question, context), target, mode))
    return examples
