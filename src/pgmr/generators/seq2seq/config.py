"""What a Hugging Face training run is asked to do (`TrainConfig`) and what it did (`TrainResult`).

Shared by both architectures the trainer handles: encoder-decoders (`pgmr.generators.seq2seq`) and decoder-only
models (`pgmr.generators.causal`). Which presets exist is each architecture's business: an unknown preset is
refused when training starts, before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class LoraSettings:
    """LoRA adapters via peft; `r == 0` means full fine-tuning."""

    r: int = 0
    alpha: int = 16
    dropout: float = 0.05
    target_modules: str = "all-linear"

    def __post_init__(self) -> None:
        if self.r < 0 or self.alpha <= 0 or not 0.0 <= self.dropout < 1.0:
            raise ValueError("LoRA needs r >= 0, alpha > 0 and 0 <= dropout < 1")

    @property
    def enabled(self) -> bool:
        return self.r > 0


@dataclass(frozen=True)
class TrainConfig:
    preset: str = "small"
    base: str | None = None  # a seq2seq checkpoint dir (or hub name); replaces `preset` and the tokenizer
    vocab_size: int = 4000
    max_source_len: int = 256
    max_target_len: int = 256
    batch_size: int = 16
    eval_batch_size: int | None = None
    learning_rate: float = 1e-3
    # A pretrained encoder (warm-started presets, or any --base) can learn slower than a fresh decoder.
    encoder_learning_rate: float | None = None
    weight_decay: float = 0.0
    warmup_steps: int = 100
    epochs: float = 20.0
    max_steps: int | None = None  # overrides epochs
    max_minutes: float | None = None  # wall budget of this call; stops at the first step past it
    eval_steps: int = 500  # validation and checkpoint interval
    max_eval_examples: int | None = 512  # periodic validation generates; this bounds its cost
    save_total_limit: int = 2
    seed: int = 42
    num_beams: int = 1
    gradient_accumulation_steps: int = 1
    logging_steps: int = 50
    bf16: bool = False
    # Linear decay that reaches 0 at max_steps or at the end of max_minutes, whichever comes first: a run whose
    # wall budget binds still ends annealed instead of being cut mid-schedule (machine speed varies here).
    anneal_to_budget: bool = False
    # Batches of similar source + target length: less padding, ~30% faster steps on CPU (docs/research-log.md,
    # "2026-12-01 — The seq2seq default retrained").
    group_by_length: bool = True
    # Decoder-only models only: LoRA rank (0: train every weight), scale and dropout.
    lora_r: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    progress: bool = True
    command: str | None = None  # recorded in the model card; default: this process's argv

    def __post_init__(self) -> None:
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be positive")
        if self.max_minutes is not None and self.max_minutes <= 0:
            raise ValueError("max_minutes must be positive")
        if self.anneal_to_budget and self.max_minutes is None:
            raise ValueError("anneal_to_budget needs max_minutes (the budget to anneal to)")
        if min(self.max_source_len, self.max_target_len, self.batch_size, self.eval_steps) < 1:
            raise ValueError("lengths, batch size and eval_steps must be positive")
        LoraSettings(self.lora_r, self.lora_alpha, self.lora_dropout)  # validates

    @property
    def lora(self) -> LoraSettings:
        return LoraSettings(self.lora_r, self.lora_alpha, self.lora_dropout)


def check_preset(config: TrainConfig, presets: Sequence[str]) -> None:
    """Refuse a preset the trainer cannot build (a `base` replaces the preset)."""
    if config.base is None and config.preset not in presets:
        raise ValueError(f"unknown preset {config.preset!r}; expected one of {', '.join(presets)}")


@dataclass(frozen=True)
class TrainResult:
    model_dir: Path
    mode: str
    global_step: int
    resumed_from: str | None
    stopped_by_budget: bool
    wall_seconds: float
    parameters: int
    metrics: Mapping[str, float] = field(default_factory=dict)  # validation metrics of the kept model
    card: Mapping[str, Any] = field(default_factory=dict)
