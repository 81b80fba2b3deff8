"""A trained decoder-only generator loaded from its model directory."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessorList, PreTrainedModel, PreTrainedTokenizerBase

from pgmr.generators.base import PGMR_MODES, check_generate_inputs, check_mode, generate_in_length_order
from pgmr.generators.causal.model import PROMPT_FORMAT, load_causal_dir, prompt_ids
from pgmr.generators.examples import model_sources
from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir
from pgmr.generators.seq2seq.copying import copy_bias_processor
from pgmr.generators.seq2seq.generator import (
    DEFAULT_COPY_BIAS,
    DEFAULT_COPY_CLOSE,
    DEFAULT_RELATION_COPY_BIAS,
    DEFAULT_RELATION_COPY_CLOSE,
)


class CausalGenerator:
    """Implements `pgmr.generators.Generator` for decoder-only models: prompts padded on the left, greedy
    or beam search, only the continuation decoded. The copy bias applies where the tokenizer has single
    tokens for the label markers (tokenizers trained by `pgmr train`; a pretrained one usually splits them)."""

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
        copy_bias: float = 0.0,
        relation_copy_bias: float = 0.0,
    ) -> None:
        if num_beams < 1 or max_new_tokens < 1 or max_source_len < 1:
            raise ValueError("num_beams, max_new_tokens and max_source_len must be positive")
        if not (0.0 <= copy_bias <= 100.0 and 0.0 <= relation_copy_bias <= 100.0):
            raise ValueError("copy_bias and relation_copy_bias must be in [0, 100]")
        self.model = model.eval()
        self.model.generation_config.max_length = None
        self.tokenizer = tokenizer
        self.mode = check_mode(mode)
        self.max_source_len = max_source_len
        self.max_new_tokens = max_new_tokens
        self.num_beams = num_beams
        self.copy_bias = copy_bias if self.mode in PGMR_MODES else 0.0
        self.relation_copy_bias = relation_copy_bias if self.mode in PGMR_MODES else 0.0
        self.copy_close = DEFAULT_COPY_CLOSE
        self.relation_copy_close = DEFAULT_RELATION_COPY_CLOSE
        self.card = card or {}

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
    ) -> CausalGenerator:
        """`path`: a model directory (with model_card.json) or the training output directory holding `model/`.
        Unset settings come from the card; the copy bias defaults to the seq2seq default."""
        model_dir = resolve_model_dir(path)
        card = read_model_card(model_dir)
        generation = card.get("generation", {})
        if card.get("backend") != "causal" or generation.get("prompt_format") != PROMPT_FORMAT:
            raise ModelCardError(
                f"{model_dir} is not a decoder-only pgmr generator (backend {card.get('backend')!r}, "
                f"prompt format {generation.get('prompt_format')!r}; expected 'causal', {PROMPT_FORMAT!r})"
            )
        model, tokenizer = load_causal_dir(model_dir)
        return cls(
            model.to(torch.device(device)),
            tokenizer,
            card["mode"],
            max_source_len=int(generation.get("max_source_len", 256)),
            max_new_tokens=max_new_tokens or int(generation.get("max_new_tokens", 256)),
            num_beams=num_beams or int(generation.get("num_beams", 1)),
            card=card,
            copy_bias=DEFAULT_COPY_BIAS if copy_bias is None else copy_bias,
            relation_copy_bias=DEFAULT_RELATION_COPY_BIAS
            if relation_copy_bias is None
            else relation_copy_bias,
        )

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        """One raw output text per question, in order. RAG modes need one candidate block per question."""
        check_generate_inputs(self.mode, questions, contexts, batch_size)
        prompts = [
            prompt_ids(self.tokenizer, s, self.mode, self.max_source_len)
            for s in model_sources(self.mode, questions, contexts)
        ]
        return generate_in_length_order(
            prompts,
            batch_size,
            lambda batch: self._generate_batch([prompts[i] for i in batch], [questions[i] for i in batch]),
            len,
        )

    def _generate_batch(self, prompts: list[list[int]], questions: list[str]) -> list[str]:
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        # Left padding: every prompt ends at the same position, where generation starts.
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        processor = copy_bias_processor(
            questions,
            self.tokenizer,
            bias=self.copy_bias,
            relation_bias=self.relation_copy_bias,
            close=self.copy_close,
            relation_close=self.relation_copy_close,
            num_beams=self.num_beams,
        )
        with torch.inference_mode():
            generated = self.model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                max_new_tokens=self.max_new_tokens,
                num_beams=self.num_beams,
                do_sample=False,
                pad_token_id=pad,
                eos_token_id=self.tokenizer.eos_token_id,
                logits_processor=LogitsProcessorList([processor] if processor is not None else []),
            )
        return self.tokenizer.batch_decode(
            generated[:, width:], skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
