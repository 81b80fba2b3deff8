"""A cross-encoder that re-scores the structured model's relation candidates with the question read jointly.

Why: the structured model scores a relation slot as a cosine between one slot vector and a table row per
property, so the question and the property's words never meet; relations are its weakest slot (about 65% right
given the template, issue #18). Its top ten candidates hold the gold property far more often than its first
(on LC-QuAD 2.0 validation 87% against 74% of gold properties). The ranker reads "question [SEP] label:
description" through all-MiniLM-L6-v2 with full attention and gives one score per pair; a slot's final score
is the structured model's log-probability plus `weight` times the ranker's log-softmax over the slot's
`top_k` candidates. The generator still writes labels only; the memory resolves them.

A ranker directory holds the tokenizer, the encoder's config, the int8 weights (rows with a scale each, the
packing of the other models) and a card:

    {"backend": "relation-ranker", "top_k": 10, "weight": 1.0, "max_length": 64, ...}
"""

from __future__ import annotations

import json
import math
import uuid
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import AutoTokenizer, BertConfig, BertModel, PreTrainedTokenizerBase

from pgmr.fsutil import replace_dir
from pgmr.generators.seq2seq.card import MODEL_CARD
from pgmr.generators.structured.model import mean_pool
from pgmr.generators.structured.store import read_weights, write_weights

BACKEND = "relation-ranker"
ENCODER_CONFIG = "encoder_config.json"
# Property descriptions run long; the label and the description's start carry what tells properties apart.
MAX_CHOICE_CHARS = 160


class RelationRankerError(ValueError):
    """A ranker directory that is incomplete or inconsistent, or settings out of range."""


@dataclass(frozen=True)
class RankerConfig:
    top_k: int = 10  # candidates per slot, the structured model's best
    weight: float = 1.0  # of the ranker's log-softmax against the structured model's log-probability
    max_length: int = 64  # tokens of question + choice

    def __post_init__(self) -> None:
        if self.top_k < 2:
            raise RelationRankerError(f"top_k must be at least 2, not {self.top_k}")
        if not (math.isfinite(self.weight) and self.weight >= 0.0):
            raise RelationRankerError(f"weight must be a finite number >= 0, not {self.weight}")
        if self.max_length < 8:
            raise RelationRankerError(f"max_length must be at least 8, not {self.max_length}")


def choice_text(label: str, description: str) -> str:
    """What the ranker reads of a property (training and inference alike)."""
    return f"{label}: {description}"[:MAX_CHOICE_CHARS] if description else label


class CrossEncoder(nn.Module):
    """A BERT encoder over a (question, choice) pair and a linear score on its mean-pooled states."""

    def __init__(self, config: BertConfig) -> None:
        super().__init__()
        self.encoder = BertModel(config, add_pooling_layer=False)
        self.score = nn.Linear(config.hidden_size, 1)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        return self.score(mean_pool(hidden, attention_mask)).squeeze(-1)


class RelationRanker:
    """Scores (question, property) pairs; `combine` turns a slot's candidates' structured log-probabilities
    into final scores."""

    def __init__(
        self,
        model: CrossEncoder,
        tokenizer: PreTrainedTokenizerBase,
        config: RankerConfig,
        card: dict[str, Any] | None = None,
        device: str = "cpu",
    ) -> None:
        self.model = model.to(device).eval()
        self.tokenizer = tokenizer
        self.config = config
        self.card = dict(card or {})
        self.device = device

    @torch.no_grad()
    def scores(self, pairs: Sequence[tuple[str, str]], *, batch_size: int = 256) -> list[float]:
        """One score per (question, choice text) pair, in order (float32 whatever the weights' format)."""
        out: list[float] = []
        for i in range(0, len(pairs), batch_size):
            chunk = pairs[i : i + batch_size]
            enc = self.tokenizer(
                [q for q, _ in chunk],
                [c for _, c in chunk],
                padding=True,
                truncation=True,
                max_length=self.config.max_length,
                return_tensors="pt",
            )
            logits = self.model(enc["input_ids"].to(self.device), enc["attention_mask"].to(self.device))
            out.extend(float(x) for x in logits.float().cpu())
        return out

    def combine(self, logps: Sequence[float], scores: Sequence[float]) -> list[float]:
        """A slot's final scores: log-probability + weight x log-softmax of the ranker's scores."""
        if len(logps) != len(scores):
            raise ValueError(f"{len(logps)} log-probabilities for {len(scores)} scores")
        top = max(scores)
        norm = top + math.log(sum(math.exp(s - top) for s in scores))
        return [lp + self.config.weight * (s - norm) for lp, s in zip(logps, scores, strict=True)]

    def save(self, target: Path, *, packed: bool = True, card: dict[str, Any] | None = None) -> None:
        """Written beside `target` and renamed into place."""
        save_ranker(
            self.model, self.tokenizer, self.config, Path(target), card=card or self.card, packed=packed
        )

    @classmethod
    def load(
        cls, directory: Path | str, device: str = "cpu", dtype: torch.dtype | None = None
    ) -> RelationRanker:
        model, tokenizer, config, card = load_ranker(Path(directory))
        if dtype is not None:
            model = model.to(dtype=dtype)
        return cls(model, tokenizer, config, card, device)


def save_ranker(
    model: CrossEncoder,
    tokenizer: PreTrainedTokenizerBase,
    config: RankerConfig,
    target: Path,
    *,
    card: dict[str, Any] | None = None,
    packed: bool = True,
) -> None:
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir(parents=True)
    tokenizer.save_pretrained(tmp)
    (tmp / ENCODER_CONFIG).write_text(model.encoder.config.to_json_string(), encoding="utf-8")
    write_weights(model, tmp, packed=packed)
    extra = {k: v for k, v in (card or {}).items() if k not in ("backend", "packed", *asdict(config))}
    full = {"backend": BACKEND, "packed": packed, **asdict(config), **extra}
    (tmp / MODEL_CARD).write_text(json.dumps(full, indent=2), encoding="utf-8")
    replace_dir(tmp, target)


def load_ranker(
    directory: Path,
) -> tuple[CrossEncoder, PreTrainedTokenizerBase, RankerConfig, dict[str, Any]]:
    missing = [n for n in (ENCODER_CONFIG, MODEL_CARD) if not (directory / n).is_file()]
    if missing:
        raise RelationRankerError(f"{directory}: not a relation ranker (missing {', '.join(missing)})")
    try:
        card = json.loads((directory / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise RelationRankerError(f"{directory}: unreadable {MODEL_CARD}: {exc}") from None
    if not isinstance(card, dict) or card.get("backend") != BACKEND:
        raise RelationRankerError(f"{directory}: the card's backend is not {BACKEND!r}")
    try:
        config = RankerConfig(
            top_k=int(card.get("top_k", 10)),
            weight=float(card.get("weight", 1.0)),
            max_length=int(card.get("max_length", 64)),
        )
    except (TypeError, ValueError) as exc:
        raise RelationRankerError(f"{directory}: bad settings in {MODEL_CARD}: {exc}") from None
    model = CrossEncoder(BertConfig.from_json_file(str(directory / ENCODER_CONFIG)))
    read_weights(model, directory, RelationRankerError)
    model.eval()
    return model, AutoTokenizer.from_pretrained(directory), config, card


__all__ = [
    "BACKEND",
    "CrossEncoder",
    "RankerConfig",
    "RelationRanker",
    "RelationRankerError",
    "choice_text",
    "load_ranker",
    "save_ranker",
]
