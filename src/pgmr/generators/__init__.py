"""Generators: models that turn questions into SPARQL-PGMR (or, for the baselines, SPARQL with IDs).

This package stays light to import; the Hugging Face backend lives in `pgmr.generators.seq2seq` and pulls in
torch and transformers only when imported.
"""

from __future__ import annotations

from pgmr.generators.base import MODES, PGMR_MODES, RAG_MODES, Generator, check_mode
from pgmr.generators.examples import Example, build_examples, direct_target, pgmr_target, source_text
from pgmr.generators.rag import Candidate, CandidateRetriever, question_ngrams

__all__ = [
    "MODES",
    "PGMR_MODES",
    "RAG_MODES",
    "Candidate",
    "CandidateRetriever",
    "Example",
    "Generator",
    "build_examples",
    "check_mode",
    "direct_target",
    "pgmr_target",
    "question_ngrams",
    "source_text",
]
