"""A trained seq2seq generator loaded from its model directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    LogitsProcessorList,
    PreTrainedModel,
    PreTrainedTokenizerBase,
)

from pgmr.generators.base import PGMR_MODES, check_generate_inputs, check_mode, generate_in_length_order
from pgmr.generators.examples import model_sources
from pgmr.generators.seq2seq.card import read_model_card, resolve_model_dir
from pgmr.generators.seq2seq.copying import copy_bias_processor
from pgmr.generators.seq2seq.greedy import GreedyDecoder, supports
from pgmr.generators.seq2seq.model import SOURCE_TOKENIZER_DIR
from pgmr.generators.seq2seq.packing import is_packed, load_packed
from pgmr.precision import DEFAULT_PRECISION, inference_dtype

# Copy bias of pgmr-mode decoding unless a caller sets one: chosen on LC-QuAD 2.0 validation
# (docs/research-log.md, "2026-12-01 — Copy bias in decoding").
DEFAULT_COPY_BIAS = 4.0
DEFAULT_RELATION_COPY_BIAS = 4.0
DEFAULT_COPY_CLOSE = False
DEFAULT_RELATION_COPY_CLOSE = True


class Seq2SeqGenerator:
    """Implements `pgmr.generators.Generator`: greedy (num_beams=1) or beam search, batched."""

    def __init__(
        self,
        model: PreTrainedModel,
        tokenizer: PreTrainedTokenizerBase,
        mode: str,
        *,
        max_source_len: int = 256,
        max_new_tokens: int = 256,
        num_beams: int = 1,
        card: dict[str, Any] | None = None,
        source_tokenizer: PreTrainedTokenizerBase | None = None,
        copy_bias: float = 0.0,
        relation_copy_bias: float = 0.0,
        copy_close: bool = DEFAULT_COPY_CLOSE,
        relation_copy_close: bool = DEFAULT_RELATION_COPY_CLOSE,
        own_loop: bool = True,
    ) -> None:
        if num_beams < 1 or max_new_tokens < 1 or max_source_len < 1:
            raise ValueError("num_beams, max_new_tokens and max_source_len must be positive")
        if not (0.0 <= copy_bias <= 100.0 and 0.0 <= relation_copy_bias <= 100.0):
            raise ValueError("copy_bias and relation_copy_bias must be in [0, 100]")
        self.model = model.eval()
        # Lengths come from max_new_tokens alone; a max_length saved in the generation config (20, the
        # library default written out at save time) would only make transformers warn on every batch.
        self.model.generation_config.max_length = None
        self.tokenizer = tokenizer
        # Warm-started encoder-decoders read with the encoder's tokenizer and write with `tokenizer`.
        self.source_tokenizer = source_tokenizer or tokenizer
        self.mode = check_mode(mode)
        self.max_source_len = max_source_len
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        # Only modes whose output has entity labels to copy (see copying.py); ignored by the others.
        self.copy_bias = copy_bias if self.mode in PGMR_MODES else 0.0
        self.relation_copy_bias = relation_copy_bias if self.mode in PGMR_MODES else 0.0
        self.copy_close = copy_close
        self.relation_copy_close = relation_copy_close
        self.card = card or {}
        # Greedy decoding of BERT-decoder models runs in pgmr's own loop (greedy.py: the same tokens, several
        # times faster at batch 1); False keeps transformers' generate, e.g. to measure the difference.
        self.own_loop = own_loop
        self._greedy: GreedyDecoder | None = None

    @classmethod
    def load(
        cls,
        path: Path | str,
        device: str = "cpu",
        *,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        copy_bias: float | None = None,
        relation_copy_bias: float | None = None,
        copy_close: bool = DEFAULT_COPY_CLOSE,
        relation_copy_close: bool = DEFAULT_RELATION_COPY_CLOSE,
        precision: str = DEFAULT_PRECISION,
        own_loop: bool = True,
    ) -> Seq2SeqGenerator:
        """`path`: a model directory (with model_card.json) or the training output directory holding `model/`.
        Unset settings come from the card (what validation used); the copy bias defaults to DEFAULT_COPY_BIAS
        (chosen on LC-QuAD 2.0 validation, docs/research-log.md, 2026-12-01). `precision`: the weights' format
        for inference (pgmr.precision; `auto` is bfloat16 where the hardware computes it natively).
        `own_loop`: greedy decoding in pgmr's loop where the model allows it (greedy.py), else `generate`."""
        dtype = inference_dtype(precision, device)
        model_dir = resolve_model_dir(path)
        card = read_model_card(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        source_dir = model_dir / SOURCE_TOKENIZER_DIR
        source_tokenizer = AutoTokenizer.from_pretrained(source_dir) if source_dir.is_dir() else None
        if is_packed(model_dir):
            model = load_packed(model_dir)
        else:
            model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
        model = model.to(device=torch.device(device), dtype=dtype)  # type: ignore[call-arg]
        return cls(
            model,
            tokenizer,
            card["mode"],
            card=card,
            source_tokenizer=source_tokenizer,
            copy_close=copy_close,
            relation_copy_close=relation_copy_close,
            own_loop=own_loop,
            **cls._card_settings(card, num_beams, max_new_tokens, copy_bias, relation_copy_bias),
        )

    @staticmethod
    def _card_settings(
        card: dict[str, Any],
        num_beams: int | None,
        max_new_tokens: int | None,
        copy_bias: float | None,
        relation_copy_bias: float | None,
    ) -> dict[str, Any]:
        """Decoding settings: the caller's where given, else the card's (what validation used), else defaults."""
        generation = card.get("generation", {})
        return {
            "max_source_len": int(generation.get("max_source_len", 256)),
            "max_new_tokens": max_new_tokens or int(generation.get("max_new_tokens", 256)),
            "num_beams": num_beams or int(generation.get("num_beams", 1)),
            "copy_bias": DEFAULT_COPY_BIAS if copy_bias is None else copy_bias,
            "relation_copy_bias": DEFAULT_RELATION_COPY_BIAS
            if relation_copy_bias is None
            else relation_copy_bias,
        }

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        """One raw output text per question, in order. RAG modes need one candidate block per question."""
        check_generate_inputs(self.mode, questions, contexts, batch_size)
        inputs = self._model_inputs(model_sources(self.mode, questions, contexts))
        return generate_in_length_order(
            inputs,
            batch_size,
            lambda batch: self._generate_batch([inputs[i] for i in batch], [questions[i] for i in batch]),
            len,
        )

    def _model_inputs(self, sources: list[str]) -> list[Any]:
        """What `_generate_batch` takes per question (here the source text; subclasses may tokenize)."""
        return sources

    def _copy_processor(self, questions: list[str]) -> Any:
        return copy_bias_processor(
            questions,
            self.tokenizer,
            bias=self.copy_bias,
            relation_bias=self.relation_copy_bias,
            close=self.copy_close,
            relation_close=self.relation_copy_close,
            num_beams=self.num_beams,
        )

    def _greedy_decoder(self) -> GreedyDecoder | None:
        """pgmr's greedy loop for this model, or None where `generate` decodes (beams, other architectures,
        `own_loop` off, or a model config without the start, end and pad ids the loop needs)."""
        if not self.own_loop or self.num_beams != 1 or not supports(self.model):
            return None
        config = self.model.config
        if None in (config.decoder_start_token_id, config.pad_token_id) or not isinstance(
            config.eos_token_id, int
        ):
            return None
        if self._greedy is None or not self._greedy.matches(self.model):
            self._greedy = GreedyDecoder(self.model)
        return self._greedy

    def _generate_batch(self, sources: list[str], questions: list[str]) -> list[str]:
        processor = self._copy_processor(questions)
        encoded = self.source_tokenizer(
            sources, padding=True, truncation=True, max_length=self.max_source_len, return_tensors="pt"
        ).to(self.device)
        greedy = self._greedy_decoder()
        if greedy is not None:
            generated = greedy.generate(
                encoded["input_ids"],
                encoded["attention_mask"],
                max_new_tokens=self.max_new_tokens,
                start_id=int(self.model.config.decoder_start_token_id),
                eos_id=int(self.model.config.eos_token_id),
                pad_id=int(self.model.config.pad_token_id),
                processor=processor,
            )
            return self.tokenizer.batch_decode(
                generated, skip_special_tokens=True, clean_up_tokenization_spaces=False
            )
        with torch.inference_mode():
            generated = self.model.generate(
                input_ids=encoded["input_ids"],
                attention_mask=encoded["attention_mask"],
                max_new_tokens=self.max_new_tokens,
                num_beams=self.num_beams,
                do_sample=False,
                logits_processor=LogitsProcessorList([processor] if processor is not None else []),
            )
        return self.tokenizer.batch_decode(
            generated, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
