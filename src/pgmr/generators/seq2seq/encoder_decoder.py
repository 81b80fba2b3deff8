"""Training encoder-decoders (the T5 and MiniLM presets, any seq2seq `--base`): the architecture that
`pgmr.generators.seq2seq.train.train_seq2seq` runs. Validated by generation; warm-started presets read
sources with the encoder's own tokenizer, kept beside the checkpoints."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import AutoModelForSeq2SeqLM, AutoTokenizer, PreTrainedTokenizerBase

from pgmr.fsutil import replace_dir
from pgmr.generators.base import PGMR_MODES
from pgmr.generators.examples import Example
from pgmr.generators.seq2seq.config import TrainConfig
from pgmr.generators.seq2seq.model import (
    ENCODER_DECODER_PRESETS,
    PRESETS,
    SOURCE_TOKENIZER_DIR,
    build_encoder_decoder,
    build_model,
    is_encoder_decoder_preset,
    load_base,
    source_tokenizer_for,
)
from pgmr.generators.seq2seq.tokenizer import train_tokenizer
from pgmr.generators.seq2seq.trainer import SELECTION_METRIC, Features, LengthStats

SEQ2SEQ_PRESETS: tuple[str, ...] = (*PRESETS, *ENCODER_DECODER_PRESETS)


class EncoderDecoder:
    """An encoder-decoder `Architecture`: validated by generating, optionally with its own encoder rate."""

    backend = "seq2seq"
    generates = True

    def check(self, config: TrainConfig) -> None:
        if config.lora.enabled:
            raise ValueError("LoRA (lora_r > 0) is implemented for decoder-only models")

    def load(
        self,
        config: TrainConfig,
        train_examples: Sequence[Example],
        last: str | None,
        out_dir: Path,
        mode: str,
    ) -> tuple[Any, PreTrainedTokenizerBase, PreTrainedTokenizerBase | None]:
        # Warm-started presets read sources with the encoder's tokenizer and write targets with their own.
        tokenizer: PreTrainedTokenizerBase
        source_tokenizer: PreTrainedTokenizerBase | None = None
        source_dir = out_dir / SOURCE_TOKENIZER_DIR
        if last:
            # The checkpoint's own tokenizer: a retrained one could number tokens differently.
            tokenizer = AutoTokenizer.from_pretrained(last)
            model = AutoModelForSeq2SeqLM.from_pretrained(last)
            if source_dir.is_dir():
                source_tokenizer = AutoTokenizer.from_pretrained(source_dir)
        elif config.base:
            model, tokenizer, source_tokenizer = load_base(config.base, need_newlines=mode in PGMR_MODES)
            if source_tokenizer is not None:
                _save_source_tokenizer(source_tokenizer, source_dir)
        elif is_encoder_decoder_preset(config.preset):
            source_tokenizer = source_tokenizer_for(config.preset)
            tokenizer = train_tokenizer([e.target for e in train_examples], vocab_size=config.vocab_size)
            model = build_encoder_decoder(config.preset, source_tokenizer, tokenizer)
            _save_source_tokenizer(source_tokenizer, source_dir)
        else:
            texts = [t for e in train_examples for t in (e.source, e.target)]
            tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
            model = build_model(config.preset, tokenizer)
        return model, tokenizer, source_tokenizer

    def features(
        self,
        tokenizer: PreTrainedTokenizerBase,
        examples: Sequence[Example],
        config: TrainConfig,
        source_tokenizer: PreTrainedTokenizerBase | None,
    ) -> tuple[Features, LengthStats]:
        return _features(tokenizer, examples, config, source_tokenizer)

    def optimizer(self, model: Any, config: TrainConfig) -> torch.optim.Optimizer | None:
        return _optimizer(model, config) if config.encoder_learning_rate is not None else None

    def collator_model(self, model: Any) -> Any:
        return model

    def compute_metrics(
        self, tokenizer: PreTrainedTokenizerBase, mode: str, model: Any
    ) -> Callable[[Any], dict[str, float]]:
        return _metrics_fn(tokenizer, mode, model.config.decoder_start_token_id)

    def preprocess_logits(self) -> Callable[[Any, Any], Any] | None:
        return None

    def card_generation(self) -> Mapping[str, Any]:
        return {}


def _encode(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_len: int
) -> tuple[list[list[int]], float, int]:
    """Token ids (ending with eos) cut to `max_len` keeping the final eos; mean untruncated length; cut count."""
    ids = tokenizer(list(texts))["input_ids"] if texts else []
    # BERT-style tokenizers end sequences with [SEP] and have no eos token.
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    out: list[list[int]] = []
    cut = 0
    for seq in ids:
        if len(seq) > max_len:
            cut += 1
            seq = seq[: max_len - 1] + ([eos] if eos is not None else [seq[max_len - 1]])
        out.append(seq)
    mean = float(np.mean([len(s) for s in ids])) if ids else 0.0
    return out, mean, cut


def _features(
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Example],
    config: TrainConfig,
    source_tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[Features, LengthStats]:
    sources, mean_src, cut_src = _encode(
        source_tokenizer or tokenizer, [e.source for e in examples], config.max_source_len
    )
    targets, mean_tgt, cut_tgt = _encode(tokenizer, [e.target for e in examples], config.max_target_len)
    rows = [
        {"input_ids": s, "attention_mask": [1] * len(s), "labels": t}
        for s, t in zip(sources, targets, strict=True)
    ]
    return Features(rows), LengthStats(mean_src, mean_tgt, cut_src, cut_tgt)


def _metrics_fn(
    tokenizer: PreTrainedTokenizerBase, mode: str, decoder_start: int | None
) -> Callable[[Any], dict[str, float]]:
    from pgmr.query import IntermediateQueryError, parse

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def compute(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(preds, tuple):
            preds = preds[0]
        # Batches are concatenated with -100 padding; generated rows start with the decoder start token.
        preds = np.where(preds < 0, pad, preds)
        label_mask = labels >= 0
        labels = np.where(label_mask, labels, pad)
        predicted = tokenizer.batch_decode(
            preds, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        gold = tokenizer.batch_decode(labels, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        n = max(len(gold), 1)
        exact = float(np.mean([p.strip() == g.strip() for p, g in zip(predicted, gold, strict=True)]))
        if decoder_start is not None and preds.shape[1] and (preds[:, 0] == decoder_start).all():
            preds = preds[:, 1:]
        width = labels.shape[1]
        if preds.shape[1] < width:
            preds = np.pad(preds, ((0, 0), (0, width - preds.shape[1])), constant_values=pad)
        hits = (preds[:, :width] == labels) & label_mask
        token_accuracy = float(np.mean(hits.sum(1) / np.maximum(label_mask.sum(1), 1)))
        metrics = {
            "exact_match": exact,
            "token_accuracy": token_accuracy,
            # Exact match decides; token accuracy only breaks its ties (its weight is below one example),
            # so that the many all-zero evaluations of a young model still keep the better checkpoint.
            SELECTION_METRIC: exact + token_accuracy * 0.5 / n,
        }
        if mode in PGMR_MODES:
            parsed = 0
            for text in predicted:
                try:
                    parse(text)
                    parsed += 1
                except IntermediateQueryError:
                    pass
            metrics["parse_rate"] = parsed / n
        return metrics

    return compute


def _save_source_tokenizer(source_tokenizer: PreTrainedTokenizerBase, source_dir: Path) -> None:
    """Kept in the run dir (atomically): a resumed run reads sources with the same tokenizer."""
    tmp = source_dir.parent / f".{source_dir.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    source_tokenizer.save_pretrained(tmp)
    replace_dir(tmp, source_dir)


def _optimizer(model: Any, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with the encoder at `encoder_learning_rate` and everything else at `learning_rate`."""
    encoder = model.get_encoder()
    encoder_ids = {id(p) for p in encoder.parameters()}
    params = [p for p in model.parameters() if p.requires_grad]
    groups: list[dict[str, Any]] = [
        {"params": [p for p in params if id(p) in encoder_ids], "lr": config.encoder_learning_rate},
        {"params": [p for p in params if id(p) not in encoder_ids], "lr": config.learning_rate},
    ]
    # The Trainer's scheduler scales each group's own lr, so the warmup/decay shape applies to both.
    return torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=config.learning_rate, weight_decay=config.weight_decay
    )
