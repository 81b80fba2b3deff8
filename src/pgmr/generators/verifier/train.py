"""Training the draft verifier: binary cross-entropy on (question, verbalized query, right) examples,
checkpointed atomically and resumable."""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from pgmr.generators.verifier.model import Verifier, VerifierError, new_verifier

CHECKPOINT = "checkpoint.pt"


@dataclass(frozen=True)
class VerifierExample:
    """A question, a verbalized query (`verbalize`) and whether that query is right."""

    question: str
    text: str
    right: bool


@dataclass(frozen=True)
class VerifierConfig:
    """Training settings (validated here: the CLI passes what the user gave)."""

    epochs: float = 1.0
    max_steps: int | None = None
    batch_size: int = 32
    learning_rate: float = 3e-5
    warmup_share: float = 0.05
    max_length: int = 128
    bf16: bool = True
    seed: int = 0
    checkpoint_every: int = 200
    description_words: int = 6

    def __post_init__(self) -> None:
        if not self.epochs > 0 and not self.max_steps:
            raise ValueError("epochs must be positive (or give max_steps)")
        if self.max_steps is not None and self.max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        for name in ("batch_size", "max_length", "checkpoint_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        if not 0 < self.learning_rate < 1:
            raise ValueError("learning_rate must be in (0, 1)")
        if not 0 <= self.warmup_share < 1:
            raise ValueError("warmup_share must be in [0, 1)")
        if self.description_words < 0:
            raise ValueError("description_words must be >= 0")


Progress = Callable[[int, int, float], None]


def train_verifier(
    examples: Sequence[VerifierExample],
    out_dir: Path | str,
    config: VerifierConfig = VerifierConfig(),
    *,
    layers: int | None = None,
    init_from: Path | str | None = None,
    card: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> Verifier:
    """Train on `examples` (binary cross-entropy per pair) and write the verifier to `out_dir/model` (packed).
    Resumable: `out_dir/checkpoint.pt` is written every `checkpoint_every` steps (atomically), and a run
    started again with the same examples and config continues from it. `init_from`: a verifier directory to
    continue from (its weights, int8 ones restored to float32, and its tokenizer) instead of a fresh head on
    all-MiniLM-L6-v2. `progress(step, total, loss)`."""
    import torch

    from pgmr.generators.structured.train import atomic_torch_save

    if not examples:
        raise ValueError("no examples to train the verifier on")
    if all(e.right for e in examples) or not any(e.right for e in examples):
        raise ValueError("the verifier needs right and wrong examples")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    if init_from is not None:
        if layers is not None:
            raise ValueError("give layers or init_from, not both: a verifier to continue from has its own")
        start = Verifier.load(init_from, bf16=False)
        model, tokenizer = start.model, start.tokenizer
        if int(start.card.get("description_words", config.description_words)) != config.description_words:
            raise VerifierError(f"{init_from} reads {start.card.get('description_words')} description words")
    else:
        model, tokenizer = new_verifier(layers)
    per_epoch = math.ceil(len(examples) / config.batch_size)
    total = config.max_steps or max(1, int(per_epoch * config.epochs))
    warmup = max(1, int(total * config.warmup_share))
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.learning_rate, weight_decay=0.01)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (total - s) / max(1, total - warmup)))
    )
    fingerprint = {
        "examples": len(examples),
        "config": asdict(config),
        "layers": layers,
        **({"init_from": str(init_from)} if init_from is not None else {}),
    }
    step, seconds = 0, 0.0
    checkpoint = out_dir / CHECKPOINT
    if checkpoint.is_file():
        state = torch.load(checkpoint, map_location="cpu", weights_only=False)
        if state.get("fingerprint") != fingerprint:
            raise VerifierError(
                f"{checkpoint} is from another run ({state.get('fingerprint')}); remove it or use another --out"
            )
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        schedule.load_state_dict(state["schedule"])
        step, seconds = int(state["step"]), float(state["seconds"])
    loss_fn = torch.nn.BCEWithLogitsLoss()
    model.train()
    smoothed = math.nan
    order: list[int] = []
    started = time.perf_counter()
    while step < total:
        epoch, k = divmod(step, per_epoch)
        if k == 0 or not order:
            # The order of an epoch is a function of its number: a resumed run sees the same batches.
            order = list(range(len(examples)))
            random.Random(config.seed * 1000 + epoch).shuffle(order)
        batch = [examples[i] for i in order[k * config.batch_size : (k + 1) * config.batch_size]]
        enc = tokenizer(
            [e.question for e in batch],
            [e.text for e in batch],
            truncation=True,
            max_length=config.max_length,
            padding=True,
            return_tensors="pt",
        )
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            logits = model(**enc).logits.squeeze(-1)
        loss = loss_fn(logits.float(), torch.tensor([float(e.right) for e in batch]))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad()
        step += 1
        value = float(loss.item())
        smoothed = value if math.isnan(smoothed) else 0.95 * smoothed + 0.05 * value
        if progress is not None:
            progress(step, total, smoothed)
        if step % config.checkpoint_every == 0 and step < total:
            elapsed = seconds + time.perf_counter() - started
            atomic_torch_save(
                {
                    "model": model.state_dict(),
                    "optimizer": optimizer.state_dict(),
                    "schedule": schedule.state_dict(),
                    "step": step,
                    "seconds": elapsed,
                    "fingerprint": fingerprint,
                },
                checkpoint,
            )
    elapsed = seconds + time.perf_counter() - started
    verifier = Verifier(
        model,
        tokenizer,
        {
            **(card or {}),
            "max_length": config.max_length,
            "description_words": config.description_words,
            "training": {
                **asdict(config),
                "layers": layers,
                **({"init_from": str(init_from)} if init_from is not None else {}),
                "steps": total,
                "examples": len(examples),
                "right": sum(e.right for e in examples),
                "seconds": round(elapsed, 1),
            },
        },
    )
    verifier.save(out_dir / "model")
    if checkpoint.is_file():
        os.remove(checkpoint)
    # Read back: the caller scores with the int8 weights that were written, not the float32 ones trained.
    return Verifier.load(out_dir / "model")


__all__ = ["CHECKPOINT", "VerifierConfig", "VerifierExample", "train_verifier"]
