"""Decoder-only models: the prompt format, tiny presets built in code, local checkpoints, LoRA adapters.

A decoder-only generator reads `prompt_text(source, mode)` and continues it with the target. The same
format is used in training (loss on the target tokens only) and in generation, and is recorded in the model
card so that a model is always prompted the way it was trained.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from pgmr.generators.base import PGMR_MODES, check_mode
from pgmr.generators.seq2seq.config import LoraSettings
from pgmr.generators.seq2seq.tokenizer import keeps_newlines

log = logging.getLogger(__name__)

PROMPT_FORMAT = "pgmr-causal/1"

# Llama shapes trained from scratch with a tokenizer trained on the training texts. `llama-tiny` is for tests;
# real decoder-only runs start from a pretrained checkpoint with `--base` (optionally with LoRA).
CAUSAL_PRESETS: dict[str, dict[str, Any]] = {
    "llama-tiny": {
        "hidden_size": 32,
        "intermediate_size": 64,
        "num_hidden_layers": 1,
        "num_attention_heads": 2,
        "num_key_value_heads": 2,
    },
    "llama-small": {
        "hidden_size": 256,
        "intermediate_size": 768,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 4,
    },
}


def prompt_text(source: str, mode: str) -> str:
    """The text a decoder-only model continues: the source (question, and candidates for RAG modes) under a
    header, then a header naming what to write. It ends with a newline so that the first generated token
    starts a line (the copy bias in `copying.py` stops looking back at a newline)."""
    check_mode(mode)
    target = "SPARQL-PGMR" if mode in PGMR_MODES else "SPARQL"
    return f"### Question\n{source}\n### {target}\n"


def prompt_ids(tokenizer: PreTrainedTokenizerBase, source: str, mode: str, max_source_len: int) -> list[int]:
    """The prompt's token ids, in training and generation alike: bos (where the tokenizer has one of its
    own), then `prompt_text` around the source cut to `max_source_len` tokens."""
    ids = tokenizer(source, add_special_tokens=False)["input_ids"]
    if len(ids) > max_source_len:
        source = str(tokenizer.decode(ids[:max_source_len], skip_special_tokens=True))
    eos = tokenizer.eos_token_id
    bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id not in (None, eos) else []
    return bos + tokenizer(prompt_text(source, mode), add_special_tokens=False)["input_ids"]


def is_causal_base(base: str) -> bool:
    """Whether a checkpoint (dir or hub name) is decoder-only: its config says it is not encoder-decoder."""
    try:
        config = AutoConfig.from_pretrained(base)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot read the model config of {base!r}: {exc}") from None
    return not bool(getattr(config, "is_encoder_decoder", False))


def _with_pad(tokenizer: PreTrainedTokenizerBase) -> PreTrainedTokenizerBase:
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def build_causal_model(preset: str, tokenizer: PreTrainedTokenizerBase, max_len: int) -> PreTrainedModel:
    """A randomly initialised Llama of a preset shape (seed torch first for reproducible weights)."""
    if preset not in CAUSAL_PRESETS:
        raise ValueError(
            f"unknown decoder-only preset {preset!r}; expected one of {', '.join(CAUSAL_PRESETS)}"
        )
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        max_position_embeddings=max(max_len, 64),
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        tie_word_embeddings=True,
        **CAUSAL_PRESETS[preset],
    )
    return LlamaForCausalLM(config)


def load_causal_base(
    base: str, *, need_newlines: bool = True
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    """A decoder-only checkpoint and its tokenizer (pad token set; "\\n" added where the tokenizer drops it)."""
    tokenizer = _with_pad(AutoTokenizer.from_pretrained(base))
    model = AutoModelForCausalLM.from_pretrained(base)
    if need_newlines and not keeps_newlines(tokenizer):
        from tokenizers import AddedToken

        tokenizer.add_tokens([AddedToken("\n", normalized=False, special=False)])
        model.resize_token_embeddings(len(tokenizer))
    if model.config.pad_token_id is None:
        model.config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


def add_lora(model: PreTrainedModel, lora: LoraSettings) -> Any:
    """Wrap `model` with trainable LoRA adapters (the base weights frozen)."""
    from peft import LoraConfig, TaskType, get_peft_model

    config = LoraConfig(
        task_type=TaskType.CAUSAL_LM,
        r=lora.r,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=lora.target_modules,
    )
    return get_peft_model(model, config)


def load_causal_dir(model_dir: Path | str) -> tuple[PreTrainedModel, PreTrainedTokenizerBase]:
    tokenizer = _with_pad(AutoTokenizer.from_pretrained(model_dir))
    return AutoModelForCausalLM.from_pretrained(model_dir), tokenizer
