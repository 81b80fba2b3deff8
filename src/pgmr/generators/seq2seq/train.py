"""Training on `Seq2SeqTrainer`: periodic validation, best-model selection, resume, wall budget.

One loop (`train_model`) for both kinds of generator: encoder-decoders (the T5 and MiniLM presets, any seq2seq
`--base`: `train_seq2seq`, `pgmr.generators.seq2seq.encoder_decoder`) are validated by generation;
decoder-only models (the `llama-*` presets, any causal `--base`, optionally with LoRA adapters:
`pgmr.generators.causal.train`) learn the target after a prompt and are validated by teacher-forced greedy
agreement, which equals greedy exact match without generating.

`out_dir` layout:

    run.json                  mode and model of the run, checked when a later call resumes into the same dir
    checkpoints/checkpoint-N  Trainer checkpoints (model, tokenizer, optimizer, scheduler, RNG, trainer state)
    model/                    the final (best) model + tokenizer + model_card.json + README.md, written atomically

A call with checkpoints in `out_dir` resumes from the last one; `max_steps` / `epochs` count from step 0 of the
run, so raising them continues training. A call whose run already reached them returns the kept model as it is
(the Trainer, resumed at its last step, would take one more step and overwrite the card with that call's time).
The card's `wall_seconds` is the whole run's, summed over the calls that resumed it.
"""

from __future__ import annotations

import json
import logging
import shlex
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainingArguments, set_seed

from pgmr import __version__
from pgmr.fsutil import recover_dir
from pgmr.generators.base import check_mode
from pgmr.generators.examples import Example
from pgmr.generators.seq2seq.card import FINAL_MODEL_DIR, MODEL_CARD
from pgmr.generators.seq2seq.checkpoints import (
    MarkComplete,
    last_complete_checkpoint,
    recorded_seconds,
    trained_until,
)
from pgmr.generators.seq2seq.config import LoraSettings, TrainConfig, TrainResult, check_preset
from pgmr.generators.seq2seq.encoder_decoder import SEQ2SEQ_PRESETS, EncoderDecoder
from pgmr.generators.seq2seq.model import SOURCE_TOKENIZER_DIR, count_parameters
from pgmr.generators.seq2seq.trainer import (
    SELECTION_METRIC,
    Architecture,
    PgmrTrainer,
    WallClockBudget,
    base_of,
    best_metrics,
    budget_schedule,
    has_accelerator,
    save_final,
    trainable_parameters,
)

log = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
RUN_FILE = "run.json"


def train_seq2seq(
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    out_dir: Path | str,
    config: TrainConfig,
    *,
    data_info: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train (or resume) an encoder-decoder generator into `out_dir`; the kept model ends up in `out_dir/model`.

    `data_info` (dataset names, retriever settings, ...) is recorded in the model card as given. Decoder-only
    presets and bases train with `pgmr.generators.causal.train.train_causal`, either kind with
    `pgmr.generators.trained.train_generator`.
    """
    check_preset(config, SEQ2SEQ_PRESETS)
    return train_model(
        train_examples, val_examples, out_dir, config, lambda _: EncoderDecoder(), data_info=data_info
    )


def train_model(
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    out_dir: Path | str,
    config: TrainConfig,
    architecture_for: Callable[[TrainConfig], Architecture],
    *,
    data_info: Mapping[str, Any] | None = None,
) -> TrainResult:
    """The training run of either architecture; `architecture_for(config)` is asked which one once the run
    directory is ready (reading a `base` checkpoint's config may be what tells)."""
    started = time.monotonic()
    if not train_examples or not val_examples:
        raise ValueError("need at least one training and one validation example")
    modes = {e.mode for e in (*train_examples, *val_examples)}
    if len(modes) != 1:
        raise ValueError(f"examples of several modes: {sorted(modes)}")
    mode = check_mode(modes.pop())
    out_dir = Path(out_dir)
    checkpoints = out_dir / CHECKPOINTS_DIR
    model_name = {"base": config.base} if config.base else {"preset": config.preset}
    run = {"mode": mode, "model": model_name}
    _check_run(out_dir, run)
    out_dir.mkdir(parents=True, exist_ok=True)
    # Not the Trainer's own pick (the newest directory): a run killed while saving leaves a partial one.
    last = last_complete_checkpoint(checkpoints)
    for kept in (out_dir / SOURCE_TOKENIZER_DIR, out_dir / FINAL_MODEL_DIR):
        recover_dir(kept, clean=True)  # put back what a run killed mid-swap had moved aside
    finished = _finished_run(out_dir, last, config, mode)
    if finished is not None:
        return finished
    before = recorded_seconds(last)

    architecture = architecture_for(config)
    architecture.check(config)
    set_seed(config.seed)
    model, tokenizer, source_tokenizer = architecture.load(config, train_examples, last, out_dir, mode)
    (out_dir / RUN_FILE).write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")

    evaluated = list(val_examples[: config.max_eval_examples] if config.max_eval_examples else val_examples)
    train_set, train_lengths = architecture.features(tokenizer, train_examples, config, source_tokenizer)
    eval_set, _ = architecture.features(tokenizer, evaluated, config, source_tokenizer)
    if train_lengths.truncated_targets:
        log.warning(
            "%d of %d training targets exceed max_target_len=%d tokens and are cut (they cannot be learned whole)",
            train_lengths.truncated_targets,
            len(train_examples),
            config.max_target_len,
        )
    args = Seq2SeqTrainingArguments(
        output_dir=str(checkpoints),
        per_device_train_batch_size=config.batch_size,
        per_device_eval_batch_size=config.eval_batch_size or config.batch_size,
        gradient_accumulation_steps=config.gradient_accumulation_steps,
        learning_rate=config.learning_rate,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_steps,
        num_train_epochs=config.epochs,
        max_steps=config.max_steps or -1,
        eval_strategy="steps",
        eval_steps=config.eval_steps,
        save_strategy="steps",
        save_steps=config.eval_steps,
        save_total_limit=config.save_total_limit,
        load_best_model_at_end=True,
        metric_for_best_model=SELECTION_METRIC,
        greater_is_better=True,
        predict_with_generate=architecture.generates,
        generation_max_length=config.max_target_len,
        generation_num_beams=config.num_beams,
        logging_steps=config.logging_steps,
        report_to="none",
        seed=config.seed,
        data_seed=config.seed,
        disable_tqdm=not config.progress,
        bf16=config.bf16,
        # Without an accelerator the Trainer refuses bf16 unless told it runs on the CPU; with use_cpu it
        # autocasts to bfloat16 there (AVX512-BF16 cores: 1.57x in bench/train_step_speed.py, ~1.2x in a full run).
        use_cpu=config.bf16 and not has_accelerator(),
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    budget = WallClockBudget(config.max_minutes * 60.0, started) if config.max_minutes else None
    optimizer = architecture.optimizer(model, config)
    trainer = PgmrTrainer(
        model=model,
        group_by_length=config.group_by_length,
        args=args,
        data_collator=DataCollatorForSeq2Seq(
            source_tokenizer or tokenizer,
            model=architecture.collator_model(model),
            label_pad_token_id=-100,
        ),
        train_dataset=train_set,
        eval_dataset=eval_set,
        processing_class=tokenizer,
        compute_metrics=architecture.compute_metrics(tokenizer, mode, model),
        preprocess_logits_for_metrics=architecture.preprocess_logits(),
        callbacks=[MarkComplete(started, before), *([budget] if budget else [])],
        anneal_to=budget if config.anneal_to_budget else None,
        optimizers=(optimizer, None),
    )
    trainer.train(resume_from_checkpoint=last)
    metrics, best_step = best_metrics(trainer.state)
    wall = before + time.monotonic() - started
    parameters = count_parameters(base_of(trainer.model))
    card = {
        "pgmr_version": __version__,
        "format": "pgmr-generator/1",
        "backend": architecture.backend,
        "mode": mode,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": {
            **model_name,
            "architecture": type(base_of(trainer.model)).__name__,
            **(
                {"lora": {**asdict(config.lora), "trainable_parameters": trainable_parameters(trainer.model)}}
                if config.lora.enabled
                else {}
            ),
            "parameters": parameters,
            "vocab_size": len(tokenizer),
            "source_tokenizer": (
                f"{SOURCE_TOKENIZER_DIR}/ ({type(source_tokenizer).__name__}, {len(source_tokenizer)} tokens)"
                if source_tokenizer is not None
                else "shared with targets"
            ),
        },
        "data": {
            **dict(data_info or {}),
            "train_examples": len(train_examples),
            "validation_examples": len(val_examples),
            "validation_examples_evaluated": len(evaluated),
            "mean_source_tokens": round(train_lengths.mean_source_tokens, 2),
            "mean_target_tokens": round(train_lengths.mean_target_tokens, 2),
            "truncated_sources": train_lengths.truncated_sources,
            "truncated_targets": train_lengths.truncated_targets,
        },
        "training": {
            "global_step": trainer.state.global_step,
            "epochs": round(float(trainer.state.epoch or 0.0), 4),
            "best_step": best_step,
            "wall_seconds": round(wall, 1),
            "stopped_by_budget": bool(budget and budget.stopped),
            "resumed_from": Path(last).name if last else None,
            "config": asdict(config),
        },
        "validation": metrics,
        "generation": {
            "max_source_len": config.max_source_len,
            "max_new_tokens": config.max_target_len,
            "num_beams": config.num_beams,
            **architecture.card_generation(),
        },
        "command": config.command or shlex.join(sys.argv),
    }
    model_dir = out_dir / FINAL_MODEL_DIR
    save_final(trainer, model_dir, card, source_tokenizer, merge_lora=config.lora.enabled)
    return TrainResult(
        model_dir=model_dir,
        mode=mode,
        global_step=trainer.state.global_step,
        resumed_from=last,
        stopped_by_budget=bool(budget and budget.stopped),
        wall_seconds=wall,
        parameters=parameters,
        metrics=metrics,
        card=card,
    )


def _finished_run(out_dir: Path, last: str | None, config: TrainConfig, mode: str) -> TrainResult | None:
    """The run's result when its last checkpoint already reached `config`'s steps (or epochs) and the kept model
    was written after it; None when there is training left to do."""
    reached = trained_until(last) if last else None
    if reached is None:
        return None
    step, epoch = reached
    if not (step >= config.max_steps if config.max_steps else epoch >= config.epochs - 1e-6):
        return None
    model_dir = out_dir / FINAL_MODEL_DIR
    try:
        card = json.loads((model_dir / MODEL_CARD).read_text(encoding="utf-8"))
        training = card["training"]
        done = card.get("mode") == mode and training["global_step"] == step
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError):
        return None  # killed before the kept model was written: resuming writes it
    if not done:
        return None
    log.info("%s already trained to step %d; raise max_steps or epochs to go on", out_dir, step)
    return TrainResult(
        model_dir=model_dir,
        mode=mode,
        global_step=step,
        resumed_from=last,
        stopped_by_budget=bool(training.get("stopped_by_budget")),
        wall_seconds=float(training.get("wall_seconds") or 0.0),
        parameters=int(card.get("model", {}).get("parameters") or 0),
        metrics=dict(card.get("validation") or {}),
        card=card,
    )


def _check_run(out_dir: Path, run: dict[str, Any]) -> None:
    """Refuse to resume a run of another mode or model into the same directory."""
    path = out_dir / RUN_FILE
    if not path.is_file():
        return
    previous = json.loads(path.read_text(encoding="utf-8"))
    for key in ("mode", "model"):
        if previous.get(key) != run.get(key):
            raise ValueError(
                f"{out_dir} holds a run with {key}={previous.get(key)!r}, not {run.get(key)!r}; "
                "choose another output directory"
            )


__all__ = [
    "CHECKPOINTS_DIR",
    "RUN_FILE",
    "SELECTION_METRIC",
    "LoraSettings",
    "TrainConfig",
    "TrainResult",
    "WallClockBudget",
    "budget_schedule",
    "train_model",
    "train_seq2seq",
]
