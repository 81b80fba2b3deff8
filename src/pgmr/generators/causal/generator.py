"""A trained decoder-only generator loaded from its model directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from transformers import LogitsProcessorList

from pgmr.generators.causal.model import PROMPT_FORMAT, load_causal_dir, prompt_ids
from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir
from pgmr.generators.seq2seq.generator import Seq2SeqGenerator
from pgmr.precision import DEFAULT_PRECISION, inference_dtype


class CausalGenerator(Seq2SeqGenerator):
    """Implements `pgmr.generators.Generator` for decoder-only models: prompts padded on the left, greedy
    or beam search, only the continuation decoded. Decoding settings, their checks, the copy bias and the
    length-ordered batching are Seq2SeqGenerator's; the copy bias applies where the tokenizer has single
    tokens for the label markers (tokenizers trained by `pgmr train`; a pretrained one usually splits them)."""

    @classmethod
    def load(  # type: ignore[override]
        cls,
        path: Path | str,
        device: str = "cpu",
        *,
        num_beams: int | None = None,
        max_new_tokens: int | None = None,
        copy_bias: float | None = None,
        relation_copy_bias: float | None = None,
        precision: str = DEFAULT_PRECISION,
    ) -> CausalGenerator:
        """`path`: a model directory (with model_card.json) or the training output directory holding `model/`.
        Unset settings come from the card; the copy bias defaults to the seq2seq default; `precision` as for
        seq2seq models (pgmr.precision)."""
        dtype = inference_dtype(precision, device)
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
            model.to(device=torch.device(device), dtype=dtype),  # type: ignore[call-arg]
            tokenizer,
            card["mode"],
            card=card,
            **cls._card_settings(card, num_beams, max_new_tokens, copy_bias, relation_copy_bias),
        )

    def _model_inputs(self, sources: list[str]) -> list[Any]:
        return [prompt_ids(self.tokenizer, s, self.mode, self.max_source_len) for s in sources]

    def _generate_batch(self, prompts: list[list[int]], questions: list[str]) -> list[str]:  # type: ignore[override]
        pad = self.tokenizer.pad_token_id
        width = max(len(p) for p in prompts)
        # Left padding: every prompt ends at the same position, where generation starts.
        input_ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts], device=self.device)
        attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts], device=self.device)
        processor = self._copy_processor(questions)
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
