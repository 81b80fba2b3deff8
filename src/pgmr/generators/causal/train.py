"""Training decoder-only models (the `llama-*` presets, any causal `--base`, optionally with LoRA adapters) with
the seq2seq trainer's loop (`pgmr.generators.seq2seq.train.train_model`).

A model learns the target after a prompt (`pgmr.generators.causal.model.prompt_text`); only the target's tokens
carry a loss. It is validated by teacher-forced greedy agreement, which equals greedy exact match without
generating.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoTokenizer, PreTrainedTokenizerBase

from pgmr.generators.base import PGMR_MODES
from pgmr.generators.causal.model import (
    CAUSAL_PRESETS,
    PROMPT_FORMAT,
    add_lora,
    build_causal_model,
    load_causal_base,
    prompt_ids,
    prompt_text,
)
from pgmr.generators.examples import Example
from pgmr.generators.seq2seq.config import TrainConfig, TrainResult, check_preset
from pgmr.generators.seq2seq.tokenizer import train_tokenizer
from pgmr.generators.seq2seq.train import train_model
from pgmr.generators.seq2seq.trainer import SELECTION_METRIC, Features, LengthStats


class DecoderOnly:
    """A decoder-only `Architecture`: prompt + target in one sequence, validated without generating."""

    backend = "causal"
    generates = False

    def check(self, config: TrainConfig) -> None:
        if config.encoder_learning_rate is not None:
            raise ValueError(
                "--encoder-lr applies to encoder-decoder models; a decoder-only model has no encoder"
            )

    def load(
        self,
        config: TrainConfig,
        train_examples: Sequence[Example],
        last: str | None,
        out_dir: Path,
        mode: str,
    ) -> tuple[Any, PreTrainedTokenizerBase, PreTrainedTokenizerBase | None]:
        model, tokenizer = _causal_model(config, train_examples, last)
        return model, tokenizer, None

    def features(
        self,
        tokenizer: PreTrainedTokenizerBase,
        examples: Sequence[Example],
        config: TrainConfig,
        source_tokenizer: PreTrainedTokenizerBase | None,
    ) -> tuple[Features, LengthStats]:
        return _causal_features(tokenizer, examples, config)

    def optimizer(self, model: Any, config: TrainConfig) -> torch.optim.Optimizer | None:
        return None

    def collator_model(self, model: Any) -> Any:
        # Decoder-only rows carry their own labels; there are no decoder inputs to derive from them.
        return None

    def compute_metrics(
        self, tokenizer: PreTrainedTokenizerBase, mode: str, model: Any
    ) -> Callable[[Any], dict[str, float]]:
        return _causal_metrics_fn()

    def preprocess_logits(self) -> Callable[[Any, Any], Any] | None:
        return _argmax_logits

    def card_generation(self) -> Mapping[str, Any]:
        return {"prompt_format": PROMPT_FORMAT}


def train_causal(
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    out_dir: Path | str,
    config: TrainConfig,
    *,
    data_info: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train (or resume) a decoder-only generator into `out_dir`; the kept model ends up in `out_dir/model`."""
    check_preset(config, tuple(CAUSAL_PRESETS))
    return train_model(
        train_examples, val_examples, out_dir, config, lambda _: DecoderOnly(), data_info=data_info
    )


def _causal_features(
    tokenizer: PreTrainedTokenizerBase, examples: Sequence[Example], config: TrainConfig
) -> tuple[Features, LengthStats]:
    """Prompt + target + eos as one sequence; the prompt's positions carry no loss (label -100).

    The source is cut to `max_source_len` tokens and the target (with its eos) to `max_target_len`."""
    eos = tokenizer.eos_token_id
    rows: list[dict[str, list[int]]] = []
    src_lens, tgt_lens, cut_src, cut_tgt = [], [], 0, 0
    for example in examples:
        source_len = len(tokenizer(example.source, add_special_tokens=False)["input_ids"])
        cut_src += int(source_len > config.max_source_len)
        prompt = prompt_ids(tokenizer, example.source, example.mode, config.max_source_len)
        target = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [eos]
        src_lens.append(source_len)
        tgt_lens.append(len(target))
        if len(target) > config.max_target_len:
            cut_tgt += 1
            target = target[: config.max_target_len - 1] + [eos]
        ids = prompt + target
        rows.append(
            {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": [-100] * len(prompt) + target}
        )
    stats = LengthStats(
        float(np.mean(src_lens)) if src_lens else 0.0,
        float(np.mean(tgt_lens)) if tgt_lens else 0.0,
        cut_src,
        cut_tgt,
    )
    return Features(rows), stats


def _argmax_logits(logits: Any, labels: Any) -> Any:
    """Keep only the argmax ids of the validation logits (the whole vocabulary per token would fill memory)."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def _causal_metrics_fn() -> Callable[[Any], dict[str, float]]:
    """Exact match and token accuracy of a decoder-only model from one teacher-forced pass.

    Position t's argmax predicts token t + 1. A row whose argmax equals the gold token at every target
    position (the eos included) is exactly what greedy decoding writes, so `exact_match` is greedy exact
    match, measured without generating."""

    def compute(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(preds, tuple):
            preds = preds[0]
        preds, labels = preds[:, :-1], labels[:, 1:]
        mask = labels >= 0
        hits = (preds == labels) & mask
        counts = np.maximum(mask.sum(1), 1)
        exact = float(np.mean(hits.sum(1) == mask.sum(1)))
        token_accuracy = float(np.mean(hits.sum(1) / counts))
        n = max(len(labels), 1)
        return {
            "exact_match": exact,
            "token_accuracy": token_accuracy,
            SELECTION_METRIC: exact + token_accuracy * 0.5 / n,
        }

    return compute


def _causal_model(
    config: TrainConfig, train_examples: Sequence[Example], last: str | None
) -> tuple[Any, PreTrainedTokenizerBase]:
    """A decoder-only model to train: from a preset (tokenizer trained on the examples) or `config.base`,
    with LoRA adapters when `config.lora_r > 0`. Resuming reads the checkpoint's tokenizer and, without LoRA,
    its weights; with LoRA the base is rebuilt (seeded) and the Trainer loads the adapters from `last`."""
    mode = train_examples[0].mode
    max_len = config.max_source_len + config.max_target_len + 32
    tokenizer: PreTrainedTokenizerBase
    if last and not config.lora.enabled:
        from transformers import AutoModelForCausalLM

        tokenizer = AutoTokenizer.from_pretrained(last)
        model: Any = AutoModelForCausalLM.from_pretrained(last)
    elif config.base:
        model, tokenizer = load_causal_base(config.base, need_newlines=mode in PGMR_MODES)
    else:
        if last:
            tokenizer = AutoTokenizer.from_pretrained(last)
        else:
            texts = [t for e in train_examples for t in (prompt_text(e.source, e.mode), e.target)]
            tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
        model = build_causal_model(config.preset, tokenizer, max_len)
    # Training batches pad on the right (positions count from the prompt's first token); generation pads left.
    tokenizer.padding_side = "right"
    if config.lora.enabled:
        model = add_lora(model, config.lora)
    return model, tokenizer
