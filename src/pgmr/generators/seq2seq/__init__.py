"""Hugging Face seq2seq backend (T5 from scratch, or any local seq2seq checkpoint). Imports torch."""

from __future__ import annotations

from pgmr.generators.seq2seq.card import MODEL_CARD, read_model_card, resolve_model_dir
from pgmr.generators.seq2seq.generator import Seq2SeqGenerator
from pgmr.generators.seq2seq.model import PRESETS, build_model, count_parameters, load_base, preset_config
from pgmr.generators.seq2seq.tokenizer import SPECIAL_TOKENS, keeps_newlines, train_tokenizer
from pgmr.generators.seq2seq.train import TrainConfig, TrainResult, train_seq2seq

__all__ = [
    "MODEL_CARD",
    "PRESETS",
    "SPECIAL_TOKENS",
    "Seq2SeqGenerator",
    "TrainConfig",
    "TrainResult",
    "build_model",
    "count_parameters",
    "keeps_newlines",
    "load_base",
    "preset_config",
    "read_model_card",
    "resolve_model_dir",
    "train_seq2seq",
    "train_tokenizer",
]
