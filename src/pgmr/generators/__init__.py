"""Generators: models that turn questions into SPARQL-PGMR (or, for the baselines, SPARQL with IDs).

This package stays light to import; the Hugging Face backend lives in `pgmr.generators.seq2seq` and pulls in
torch and transformers only when imported.
"""

from __future__ import annotations

import os
from pathlib import Path

from pgmr.generators.base import MODES, PGMR_MODES, RAG_MODES, Generator, check_mode
from pgmr.generators.examples import Example, build_examples, direct_target, pgmr_target, source_text
from pgmr.generators.rag import Candidate, CandidateRetriever, question_ngrams

MODEL_DIR_ENV = "PGMR_MODEL_DIR"
# Under the checkout's models/: the shipped default generator (an ensemble of the three models beside it).
DEFAULT_MODEL = "pgmr-ensemble"


class ModelNotFoundError(FileNotFoundError):
    """No trained generator where one was expected; the message says how to get one."""


def default_model_dir() -> Path:
    """`$PGMR_MODEL_DIR`, else the checkout's `models/pgmr-ensemble` (the shipped default generator: the
    seq2seq model `models/pgmr-default` and the structured models `models/pgmr-structured` and
    `models/pgmr-structured-s7`, reranked).

    Raises ModelNotFoundError when that directory holds no trained generator.
    """
    env = os.environ.get(MODEL_DIR_ENV)
    # The checkout layout is <root>/src/pgmr/generators/__init__.py.
    path = Path(env).expanduser() if env else Path(__file__).resolve().parents[3] / "models" / DEFAULT_MODEL
    if not ((path / "model_card.json").is_file() or (path / "model" / "model_card.json").is_file()):
        source = f"${MODEL_DIR_ENV}" if env else "the default location"
        raise ModelNotFoundError(
            f"no trained generator at {path} ({source}); pass --model DIR, set ${MODEL_DIR_ENV}, "
            "or train one with `pgmr train --mode pgmr -o DIR`"
        )
    return path


__all__ = [
    "MODEL_DIR_ENV",
    "MODES",
    "ModelNotFoundError",
    "default_model_dir",
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
