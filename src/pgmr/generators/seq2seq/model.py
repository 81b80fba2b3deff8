"""Seq2seq models: T5 presets built in code for training from scratch, or a local checkpoint (`--base`)."""

from __future__ import annotations

import logging
from typing import Any

from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    PreTrainedModel,
    PreTrainedTokenizerBase,
    T5Config,
    T5ForConditionalGeneration,
)

from pgmr.generators.seq2seq.tokenizer import keeps_newlines

log = logging.getLogger(__name__)

# T5 v1.0 shapes (ReLU feed-forward, tied embeddings); "base" is the size of t5-small (~60M with its vocab).
PRESETS: dict[str, dict[str, Any]] = {
    "tiny": {"d_model": 32, "d_ff": 64, "num_layers": 1, "num_decoder_layers": 1, "num_heads": 2, "d_kv": 16},
    "small": {
        "d_model": 256,
        "d_ff": 1024,
        "num_layers": 4,
        "num_decoder_layers": 4,
        "num_heads": 4,
        "d_kv": 64,
    },
    "base": {
        "d_model": 512,
        "d_ff": 2048,
        "num_layers": 6,
        "num_decoder_layers": 6,
        "num_heads": 8,
        "d_kv": 64,
    },
}


def preset_config(preset: str, tokenizer: PreTrainedTokenizerBase, dropout_rate: float = 0.1) -> T5Config:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    return T5Config(
        vocab_size=len(tokenizer),
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        decoder_start_token_id=tokenizer.pad_token_id,
        dropout_rate=dropout_rate,
        feed_forward_proj="relu",
        tie_word_embeddings=True,
        **PRESETS[preset],
    )


def build_model(preset: str, tokenizer: PreTrainedTokenizerBase) -> PreTrainedModel:
    """A randomly initialised T5 (seed torch before calling for reproducible weights)."""
    return T5ForConditionalGeneration(preset_config(preset, tokenizer))


def load_base(base: str, *, need_newlines: bool = True) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A seq2seq checkpoint and its own tokenizer: a local directory, or a hub name when online.

    SentencePiece tokenizers (T5's among them) drop newlines; the mapping block needs them, so "\\n" is added as
    a token (and the embeddings resized) when `need_newlines` and the tokenizer loses it.
    """
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForSeq2SeqLM.from_pretrained(base)
    if need_newlines and not keeps_newlines(tokenizer):
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken("\n", normalized=False, special=False)])
        model.resize_token_embeddings(len(tokenizer))
        if not keeps_newlines(tokenizer):
            log.warning(
                "the tokenizer of %s does not keep newlines; SPARQL-PGMR outputs will not parse", base
            )
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return model, tokenizer


def count_parameters(model: Any) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
