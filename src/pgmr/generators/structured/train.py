"""Training the structured generator: a plain PyTorch loop, resumable from any checkpoint.

Every `eval_steps` the run validates (template, slot and whole-frame accuracy with predicted templates,
i.e. what generation writes), keeps the best model, and writes `checkpoint.pt` atomically (weights,
optimizer, schedule position, data position, random state), so an interruption at any point loses at most
`eval_steps` steps and a rerun of the same command continues where the checkpoint left off.
"""

from __future__ import annotations

import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from pgmr.failpoints import failpoint
from pgmr.fsutil import fsync_dir, recover_dir, replace_dir
from pgmr.generators.structured.decoding import (
    RelationLexicon,
    encode_questions,
    token_span,
)
from pgmr.generators.structured.model import HeadConfig, StructuredModel, mean_pool
from pgmr.generators.structured.store import load_encoder, load_model, save_model
from pgmr.generators.structured.targets import FrameTarget, Vocabulary, canonical_templates, template_key
from pgmr.generators.structured.validation import evaluate

log = logging.getLogger(__name__)
IGNORE = -100
CHECKPOINT = "checkpoint.pt"
Progress = Callable[[int, int, dict[str, float]], None]


@dataclass(frozen=True)
class StructuredTrainConfig:
    max_steps: int = 8000
    batch_size: int = 32
    learning_rate: float = 1e-3  # heads
    encoder_learning_rate: float = 1e-4
    warmup_steps: int = 300
    weight_decay: float = 0.01
    eval_steps: int = 500
    max_eval_examples: int = 600
    max_minutes: float | None = None
    max_source_len: int = 64
    encoder_layers: int | None = None  # keep only the first N pretrained layers (tests: 1)
    slot_layers: int = 2
    bf16: bool = False
    seed: int = 42
    # A trained structured model to start from (its weights and vocabulary), e.g. to add training data to the
    # shipped one without retraining it from the pretrained encoder.
    init_from: str | None = None

    def __post_init__(self) -> None:
        if self.max_steps < 1 or self.batch_size < 1 or self.eval_steps < 1:
            raise ValueError("max_steps, batch_size and eval_steps must be positive")

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def features(
    targets: Sequence[FrameTarget],
    vocab: Vocabulary,
    tokenizer: Any,
    max_len: int,
    canonical: dict[str, str],
    lexicon: RelationLexicon,
) -> dict[str, torch.Tensor]:
    enc = encode_questions(tokenizer, [t.question for t in targets], max_len, lexicon)
    n = enc.input_ids.shape[0]
    E, R, K = vocab.entity_slots, vocab.relation_slots, vocab.literal_slots
    template = torch.full((n,), IGNORE, dtype=torch.long)
    e_start = torch.full((n, E), IGNORE, dtype=torch.long)
    e_end = torch.full((n, E), IGNORE, dtype=torch.long)
    e_choice = torch.full((n, E), IGNORE, dtype=torch.long)
    rel = torch.full((n, R), IGNORE, dtype=torch.long)
    l_start = torch.full((n, K), IGNORE, dtype=torch.long)
    l_end = torch.full((n, K), IGNORE, dtype=torch.long)
    cond = torch.zeros((n,), dtype=torch.long)
    for i, t in enumerate(targets):
        index = vocab.template(canonical.get(t.template, t.template))
        if index is not None:
            template[i] = index
            cond[i] = index
        for e, (span, wid) in enumerate(zip(t.entity_spans, t.entity_ids, strict=True)):
            if e >= E:
                break
            tokens = token_span(enc.offsets[i], span) if span is not None else None
            if tokens is not None:
                e_start[i, e], e_end[i, e] = tokens
                e_choice[i, e] = 0
            elif (k := vocab.fallback(wid)) is not None:
                e_choice[i, e] = 1 + k
        for r, wid in enumerate(t.relation_ids[:R]):
            if (k := vocab.relation(wid)) is not None:
                rel[i, r] = k
        for k_, slot in enumerate(t.literals[:K]):
            tokens = token_span(enc.offsets[i], slot.span)
            if tokens is not None:
                l_start[i, k_], l_end[i, k_] = tokens
    return {
        "input_ids": enc.input_ids,
        "attention_mask": enc.attention_mask,
        "span_starts": enc.span_starts,
        "span_ends": enc.span_ends,
        # None only for a model without lexical features, which never reads it
        "relation_features": enc.relation_features,  # type: ignore[dict-item]
        "template": template,
        "condition": cond,
        "entity_start": e_start,
        "entity_end": e_end,
        "entity_choice": e_choice,
        "relation": rel,
        "literal_start": l_start,
        "literal_end": l_end,
    }


def conditioned_outputs(
    model: StructuredModel, x: dict[str, torch.Tensor]
) -> tuple[torch.Tensor, tuple[torch.Tensor, ...]]:
    """Template logits, and slot logits given the gold templates (`features`' "condition"), as training sees
    them."""
    hidden = model.encode(x["input_ids"], x["attention_mask"])
    template_logits = model.template_logits(hidden, x["attention_mask"])
    outs = model.slot_outputs(
        hidden,
        x["attention_mask"],
        x["condition"],
        (x["span_starts"], x["span_ends"]),
        x["relation_features"],
    )
    return template_logits, outs


def loss_of(model: StructuredModel, x: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    template_logits, outs = conditioned_outputs(model, x)
    ce = nn.functional.cross_entropy
    parts = {"template": ce(template_logits.float(), x["template"], ignore_index=IGNORE)}
    names = ("entity_start", "entity_end", "entity_choice", "relation", "literal_start", "literal_end")
    for name, logits in zip(names, outs, strict=True):
        target = x[name]
        if (target != IGNORE).any():
            parts[name] = ce(logits.float().flatten(0, 1), target.flatten(), ignore_index=IGNORE)
    total = sum(parts.values())
    return total, {k: float(v.detach()) for k, v in parts.items()}  # type: ignore[return-value]


def relation_embeddings(
    encoder: nn.Module, tokenizer: Any, labels: Sequence[str], batch_size: int = 256
) -> torch.Tensor:
    """Normalised mean-pooled embeddings of the property labels (the relation table's starting rows)."""
    rows = []
    encoder.eval()
    with torch.no_grad():
        for start in range(0, len(labels), batch_size):
            enc = tokenizer(
                list(labels[start : start + batch_size]),
                padding=True,
                truncation=True,
                max_length=32,
                return_tensors="pt",
            )
            hidden = encoder(**enc).last_hidden_state
            rows.append(nn.functional.normalize(mean_pool(hidden, enc["attention_mask"]), dim=-1))
    encoder.train()
    return torch.cat(rows)


def _schedule(config: StructuredTrainConfig) -> Callable[[int], float]:
    def multiplier(step: int) -> float:
        if step < config.warmup_steps:
            return (step + 1) / max(config.warmup_steps, 1)
        return max(0.0, (config.max_steps - step) / max(config.max_steps - config.warmup_steps, 1))

    return multiplier


class _CheckpointWriter:
    """The file torch.save writes through (its zip writer calls `write` and `flush`), with a failpoint once a
    part of the checkpoint is on disk: the crash-safety test kills the run mid-file there."""

    def __init__(self, handle: Any) -> None:
        self._handle = handle
        self._written = 0

    def flush(self) -> None:
        self._handle.flush()

    def write(self, data: bytes) -> int:
        before, self._written = self._written, self._written + self._handle.write(data)
        if before < _MIDWAY <= self._written:
            failpoint("train.checkpoint")
        return self._written - before


_MIDWAY = 1 << 20


def atomic_torch_save(obj: Any, path: Path) -> None:
    """Into `<path>.tmp`, then renamed over `path`: a run killed while saving keeps the previous checkpoint."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as fh:
        torch.save(obj, _CheckpointWriter(fh))  # type: ignore[arg-type]  # a file-like writer, as torch accepts
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def train_structured(
    train: Sequence[FrameTarget],
    validation: Sequence[FrameTarget],
    vocab: Vocabulary,
    out_dir: Path,
    config: StructuredTrainConfig,
    *,
    run_info: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Train (or resume) in `out_dir`; the best model ends in `out_dir/model`. Returns the final card."""
    out_dir.mkdir(parents=True, exist_ok=True)
    # A run killed while swapping in a new best model left the previous one aside: the card is read from it.
    for kept in ("best", "model"):
        recover_dir(out_dir / kept, clean=True)
    torch.manual_seed(config.seed)
    canonical = canonical_templates(train)
    # A vocabulary from another run (init_from) names each query shape by the string most frequent in *its*
    # data; templates of this data map to that string, or new data would relabel a known shape as unknown.
    known = {template_key(t): t for t in vocab.templates}
    canonical = {t: known.get(template_key(t), c) for t, c in canonical.items()}
    for target in validation:
        canonical.setdefault(target.template, known.get(template_key(target.template), target.template))
    lexicon = RelationLexicon(vocab)
    encoder, tokenizer = load_encoder(config.encoder_layers)
    heads = HeadConfig(
        templates=len(vocab.templates),
        relations=len(vocab.relations),
        fallbacks=len(vocab.fallbacks),
        entity_slots=vocab.entity_slots,
        relation_slots=vocab.relation_slots,
        literal_slots=vocab.literal_slots,
        slot_layers=config.slot_layers,
        lexical_features=True,
    )
    model = StructuredModel(encoder.config, heads)
    model.encoder.load_state_dict(encoder.state_dict())
    checkpoint_path = out_dir / CHECKPOINT
    resumed = checkpoint_path.is_file()
    if not resumed and config.init_from is not None:
        start, _, start_vocab, _ = load_model(Path(config.init_from))
        if start_vocab.templates != vocab.templates or start.heads.to_json() != heads.to_json():
            raise ValueError(f"{config.init_from}: its vocabulary or heads differ from this run's")
        model.load_state_dict(start.state_dict())
    elif not resumed:
        model.init_relation_table(
            relation_embeddings(model.encoder, tokenizer, [c.label for c in vocab.relations])
        )
    encoder_params = list(model.encoder.parameters())
    encoder_ids = {id(p) for p in encoder_params}
    head_params = [p for p in model.parameters() if id(p) not in encoder_ids]
    optimizer = torch.optim.AdamW(
        [
            {"params": encoder_params, "lr": config.encoder_learning_rate},
            {"params": head_params, "lr": config.learning_rate},
        ],
        weight_decay=config.weight_decay,
    )
    base_lrs = [config.encoder_learning_rate, config.learning_rate]
    schedule = _schedule(config)
    state: dict[str, Any] = {"step": 0, "best": -1.0, "best_step": None, "history": [], "seconds": 0.0}
    if resumed:
        saved = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
        if (
            saved.get("vocab_templates") != len(vocab.templates)
            or saved.get("config", {}).get("seed") != config.seed
        ):
            raise ValueError(f"{checkpoint_path} was written by another run (different data or settings)")
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        state = saved["state"]
        torch.set_rng_state(saved["torch_rng"])
        log.info("resumed from step %d", state["step"])
    resumed_from = state["step"] if resumed else None
    vocab.save(out_dir)
    order: list[int] = []
    epoch = -1

    def batch_indices(step: int) -> list[int]:
        nonlocal order, epoch
        first = step * config.batch_size
        want_epoch = first // len(train)
        if want_epoch != epoch:
            epoch = want_epoch
            order = list(range(len(train)))
            random.Random(config.seed * 1000 + epoch).shuffle(order)
        pos = first % len(train)
        return order[pos : pos + config.batch_size]

    val = list(validation)[: config.max_eval_examples]
    started = time.monotonic() - state["seconds"]
    budget = config.max_minutes * 60 if config.max_minutes else None
    session_start = time.monotonic()
    model.train()
    autocast = torch.autocast("cpu", dtype=torch.bfloat16, enabled=config.bf16)

    def save_checkpoint() -> None:
        state["seconds"] = time.monotonic() - started
        atomic_torch_save(
            {
                "model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "state": state,
                "torch_rng": torch.get_rng_state(),
                "vocab_templates": len(vocab.templates),
                "config": config.to_json(),
            },
            checkpoint_path,
        )

    def validate() -> None:
        metrics = (
            evaluate(model, vocab, tokenizer, val, config.max_source_len, canonical, lexicon)
            if val
            else {"frame_exact": 0.0}
        )
        metrics["step"] = state["step"]
        state["history"].append(metrics)
        log.info("step %d validation %s", state["step"], json.dumps(metrics))
        if metrics["frame_exact"] > state["best"]:
            state["best"], state["best_step"] = metrics["frame_exact"], state["step"]
            save_model(
                model,
                tokenizer,
                vocab,
                out_dir / "best",
                card={"validation": metrics, "config": config.to_json()},
            )
        save_checkpoint()

    while state["step"] < config.max_steps:
        if budget is not None and time.monotonic() - session_start >= budget:
            break
        step = state["step"]
        for group, base in zip(optimizer.param_groups, base_lrs, strict=True):
            group["lr"] = base * schedule(step)
        batch = features(
            [train[i] for i in batch_indices(step)],
            vocab,
            tokenizer,
            config.max_source_len,
            canonical,
            lexicon,
        )
        with autocast:
            loss, parts = loss_of(model, batch)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        state["step"] = step + 1
        if progress:
            progress(state["step"], config.max_steps, {"loss": float(loss.detach()), **parts})
        if state["step"] % config.eval_steps == 0 or state["step"] == config.max_steps:
            validate()
    if not state["history"] or state["history"][-1]["step"] != state["step"]:
        validate()
    best = out_dir / "best"
    final = out_dir / "model"
    card = json.loads((best / "model_card.json").read_text(encoding="utf-8"))
    card.update(
        {
            "best_step": state["best_step"],
            "steps": state["step"],
            "parameters": sum(p.numel() for p in model.parameters()),
            "resumed_from_step": resumed_from,
            "train_seconds": round(time.monotonic() - started, 1),
            "history": state["history"],
            "training_examples": len(train),
            "validation_examples_evaluated": len(val),
            **({"run": run_info} if run_info else {}),
        }
    )
    (best / "model_card.json").write_text(json.dumps(card, indent=2), encoding="utf-8")
    tmp = out_dir / "model.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    shutil.copytree(best, tmp)
    replace_dir(tmp, final)
    return card
