"""Training the relation ranker (pgmr.generators.structured.ranker) on a trained structured model's candidates.

Examples: for every gold relation slot of the training frames, the structured model's best `candidates`
properties given the gold template (the gold property put in when it is not among them; the question's other
gold properties left out). Each step takes
`batch_size` slots, the gold property and the `negatives` best wrong ones of each, and minimises the
cross-entropy of the gold one among them (listwise). The candidates come from the same training data the
structured model learnt, where it is surer than on new questions; its negatives are still the properties it
confuses. A checkpoint (weights, optimiser, step) is written atomically every `checkpoint_steps`, and rerunning
resumes from it; the finished ranker is written to OUT/ranker.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pgmr.generators.structured.ranker import CrossEncoder, RankerConfig, choice_text, save_ranker
from pgmr.generators.structured.store import load_encoder
from pgmr.generators.structured.targets import FrameTarget, Vocabulary, canonical_templates
from pgmr.generators.structured.train import IGNORE, atomic_torch_save, conditioned_outputs, features

log = logging.getLogger(__name__)
CHECKPOINT = "checkpoint.pt"
RANKER_DIR = "ranker"
Progress = Callable[[int, int, float], None]


@dataclass(frozen=True)
class RankerTrainConfig:
    max_steps: int = 2500
    batch_size: int = 12  # slots per step
    negatives: int = 5  # wrong candidates per slot and step
    candidates: int = 10  # the structured model's best, per slot
    learning_rate: float = 3e-5  # encoder
    head_learning_rate: float = 1e-3
    warmup_steps: int = 200
    weight_decay: float = 0.01
    max_length: int = 64
    checkpoint_steps: int = 500
    encoder_layers: int | None = None  # keep only the first N pretrained layers (tests: 1)
    bf16: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        if min(self.max_steps, self.batch_size, self.negatives, self.checkpoint_steps) < 1:
            raise ValueError("max_steps, batch_size, negatives and checkpoint_steps must be positive")
        if self.candidates <= self.negatives:
            raise ValueError("candidates must exceed negatives (the gold one is among them)")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class RankerExample:
    question: str
    gold: int  # index into the vocabulary's relations
    candidates: tuple[int, ...]  # the structured model's best, gold among them


@torch.no_grad()
def ranker_examples(
    generator: Any, targets: Sequence[FrameTarget], candidates: int = 10, batch_size: int = 128
) -> list[RankerExample]:
    """`generator`: a StructuredGenerator (its model, tokenizer, vocabulary and lexicon are used as trained)."""
    vocab: Vocabulary = generator.vocab
    canonical = canonical_templates(targets)
    out: list[RankerExample] = []
    for i in range(0, len(targets), batch_size):
        batch = list(targets[i : i + batch_size])
        x = features(
            batch, vocab, generator.tokenizer, generator.max_source_len, canonical, generator.lexicon
        )
        _, outs = conditioned_outputs(generator.model, x)
        logp = outs[3].float().log_softmax(-1)
        for b, target in enumerate(batch):
            golds = [int(g) for g in x["relation"][b] if int(g) != IGNORE]
            for r in range(logp.shape[1]):
                gold = int(x["relation"][b, r])
                if gold == IGNORE:
                    continue
                # The question's other gold properties are right for the question, only not for this slot,
                # which the ranker does not see (the structured model's slot scores place them): they are
                # not negatives.
                k = min(candidates + len(golds), logp.shape[-1])
                ranked = [int(j) for j in torch.topk(logp[b, r], k).indices]
                top = [j for j in ranked if j == gold or j not in golds][:candidates]
                if gold not in top:
                    top[-1] = gold
                out.append(RankerExample(target.question, gold, tuple(top)))
    return out


def _step_batch(
    examples: Sequence[RankerExample], order: Sequence[int], step: int, config: RankerTrainConfig
) -> tuple[list[tuple[int, str]], list[int]]:
    """The (vocabulary index, question) pairs of one step, slot after slot, and each slot's gold position.
    Seeded by step, so a resumed run takes the same batches."""
    rng = random.Random(f"{config.seed}:{step}")
    pairs: list[tuple[int, str]] = []
    gold: list[int] = []
    for j in range(config.batch_size):
        ex = examples[order[(step * config.batch_size + j) % len(order)]]
        chosen = [ex.gold, *[c for c in ex.candidates if c != ex.gold][: config.negatives]]
        rng.shuffle(chosen)
        gold.append(chosen.index(ex.gold))
        pairs.extend((c, ex.question) for c in chosen)
    return pairs, gold


def train_ranker(
    examples: Sequence[RankerExample],
    vocab: Vocabulary,
    out_dir: Path,
    config: RankerTrainConfig,
    *,
    run_info: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train (or resume) in `out_dir`; returns the card of OUT/ranker (full precision; `pgmr`-style packing
    is `RelationRanker.save(packed=True)`)."""
    if not examples:
        raise ValueError("no relation slots to train the ranker on")
    short = [ex for ex in examples if len(set(ex.candidates) - {ex.gold}) < config.negatives]
    if short:
        raise ValueError(f"{len(short)} slots have fewer than {config.negatives} wrong candidates")
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(config.seed)
    encoder, tokenizer = load_encoder(config.encoder_layers)
    model = CrossEncoder(encoder.config)
    model.encoder.load_state_dict(encoder.state_dict())
    optimizer = torch.optim.AdamW(
        [
            {"params": list(model.encoder.parameters()), "lr": config.learning_rate},
            {"params": list(model.score.parameters()), "lr": config.head_learning_rate},
        ],
        weight_decay=config.weight_decay,
    )
    base_lrs = [config.learning_rate, config.head_learning_rate]
    state: dict[str, Any] = {"step": 0, "seconds": 0.0, "losses": []}
    checkpoint = out_dir / CHECKPOINT
    fingerprint = [len(examples), len(vocab.relations), config.seed, config.batch_size]
    if checkpoint.is_file():
        saved = torch.load(checkpoint, map_location="cpu", weights_only=False)
        if saved.get("fingerprint") != fingerprint:
            raise ValueError(f"{checkpoint} was written by another run (different data or settings)")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        log.info("resumed from step %d", state["step"])
    order = list(range(len(examples)))
    random.Random(config.seed).shuffle(order)
    texts = [choice_text(c.label, c.description) for c in vocab.relations]

    def save_checkpoint() -> None:
        atomic_torch_save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "state": state,
                "fingerprint": fingerprint,
                "config": config.to_json(),
            },
            checkpoint,
        )

    model.train()
    started = time.monotonic()
    while state["step"] < config.max_steps:
        step = state["step"]
        warm = min(1.0, (step + 1) / max(1, config.warmup_steps))
        decay = max(0.05, 1.0 - step / config.max_steps)
        for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
            group["lr"] = base * warm * decay
        pairs, gold = _step_batch(examples, order, step, config)
        enc = tokenizer(
            [q for _, q in pairs],
            [texts[c] for c, _ in pairs],
            padding=True,
            truncation=True,
            max_length=config.max_length,
            return_tensors="pt",
        )
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16):
            scores = model(enc["input_ids"], enc["attention_mask"])
        loss = nn.functional.cross_entropy(scores.float().view(config.batch_size, -1), torch.tensor(gold))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state["step"] += 1
        state["losses"].append(round(float(loss.detach()), 5))
        if progress is not None:
            progress(state["step"], config.max_steps, float(loss.detach()))
        if state["step"] % config.checkpoint_steps == 0 or state["step"] == config.max_steps:
            now = time.monotonic()
            state["seconds"] += now - started
            started = now
            save_checkpoint()
    model.eval()
    window = state["losses"][-100:]
    card = {
        "trained": {
            "steps": state["step"],
            "train_seconds": round(state["seconds"], 1),
            "final_loss": sum(window) / len(window) if window else None,
            "examples": len(examples),
            "config": config.to_json(),
            **(run_info or {}),
        }
    }
    save_ranker(
        model,
        tokenizer,
        RankerConfig(max_length=config.max_length),
        out_dir / RANKER_DIR,
        card=card,
        packed=False,
    )
    return card


__all__ = [
    "RANKER_DIR",
    "RankerExample",
    "RankerTrainConfig",
    "ranker_examples",
    "train_ranker",
]
