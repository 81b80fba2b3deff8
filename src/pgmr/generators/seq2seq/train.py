"""Training on `Seq2SeqTrainer`: periodic validation, best-model selection, resume, wall budget.

One trainer for both kinds of generator: encoder-decoders (the T5 and MiniLM presets, any seq2seq `--base`)
are validated by generation; decoder-only models (the `llama-*` presets, any causal `--base`, optionally
with LoRA adapters) learn the target after a prompt (`pgmr.generators.causal.model.prompt_text`) and are
validated by teacher-forced greedy agreement, which equals greedy exact match without generating.

`out_dir` layout:

    run.json                  mode and model of the run, checked when a later call resumes into the same dir
    checkpoints/checkpoint-N  Trainer checkpoints (model, tokenizer, optimizer, scheduler, RNG, trainer state)
    model/                    the final (best) model + tokenizer + model_card.json + README.md, written atomically

A call with checkpoints in `out_dir` resumes from the last one; `max_steps` / `epochs` count from step 0 of the
run, so raising them continues training.
"""

from __future__ import annotations

import json
import logging
import shlex
import shutil
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import torch
from transformers import (
    AutoModelForSeq2SeqLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    PreTrainedTokenizerBase,
    Seq2SeqTrainer,
    Seq2SeqTrainingArguments,
    TrainerCallback,
    set_seed,
)

from pgmr import __version__
from pgmr.failpoints import failpoint
from pgmr.fsutil import recover_dir, replace_dir
from pgmr.generators.base import PGMR_MODES, check_mode
from pgmr.generators.causal.model import (
    CAUSAL_PRESETS,
    PROMPT_FORMAT,
    LoraSettings,
    add_lora,
    build_causal_model,
    is_causal_base,
    load_causal_base,
    merged,
    prompt_ids,
    prompt_text,
)
from pgmr.generators.examples import Example
from pgmr.generators.seq2seq.card import FINAL_MODEL_DIR, MODEL_CARD, card_readme
from pgmr.generators.seq2seq.checkpoints import MarkComplete, last_complete_checkpoint
from pgmr.generators.seq2seq.model import (
    ENCODER_DECODER_PRESETS,
    PRESETS,
    SOURCE_TOKENIZER_DIR,
    build_encoder_decoder,
    build_model,
    count_parameters,
    is_encoder_decoder_preset,
    load_base,
    source_tokenizer_for,
)
from pgmr.generators.seq2seq.tokenizer import train_tokenizer

log = logging.getLogger(__name__)

CHECKPOINTS_DIR = "checkpoints"
RUN_FILE = "run.json"
SELECTION_METRIC = "selection_score"


ALL_PRESETS: tuple[str, ...] = (*PRESETS, *ENCODER_DECODER_PRESETS, *CAUSAL_PRESETS)


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
    # Batches of similar source + target length: less padding, ~30% faster steps on CPU (docs/generators.md).
    group_by_length: bool = True
    # Decoder-only models only: LoRA rank (0: train every weight), scale and dropout.
    lora_r: int = 0
    lora_alpha: int = 16
    lora_dropout: float = 0.05
    progress: bool = True
    command: str | None = None  # recorded in the model card; default: this process's argv

    def __post_init__(self) -> None:
        if self.base is None and self.preset not in ALL_PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; expected one of {', '.join(ALL_PRESETS)}")
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


class _Features(torch.utils.data.Dataset):
    def __init__(self, rows: list[dict[str, list[int]]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return self.rows[index]


@dataclass(frozen=True)
class _LengthStats:
    mean_source_tokens: float
    mean_target_tokens: float
    truncated_sources: int
    truncated_targets: int


def _encode(
    tokenizer: PreTrainedTokenizerBase, texts: Sequence[str], max_len: int
) -> tuple[list[list[int]], float, int]:
    """Token ids (ending with eos) cut to `max_len` keeping the final eos; mean untruncated length; cut count."""
    ids = tokenizer(list(texts))["input_ids"] if texts else []
    # BERT-style tokenizers end sequences with [SEP] and have no eos token.
    eos = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    out: list[list[int]] = []
    cut = 0
    for seq in ids:
        if len(seq) > max_len:
            cut += 1
            seq = seq[: max_len - 1] + ([eos] if eos is not None else [seq[max_len - 1]])
        out.append(seq)
    mean = float(np.mean([len(s) for s in ids])) if ids else 0.0
    return out, mean, cut


def _features(
    tokenizer: PreTrainedTokenizerBase,
    examples: Sequence[Example],
    config: TrainConfig,
    source_tokenizer: PreTrainedTokenizerBase | None = None,
) -> tuple[_Features, _LengthStats]:
    sources, mean_src, cut_src = _encode(
        source_tokenizer or tokenizer, [e.source for e in examples], config.max_source_len
    )
    targets, mean_tgt, cut_tgt = _encode(tokenizer, [e.target for e in examples], config.max_target_len)
    rows = [
        {"input_ids": s, "attention_mask": [1] * len(s), "labels": t}
        for s, t in zip(sources, targets, strict=True)
    ]
    return _Features(rows), _LengthStats(mean_src, mean_tgt, cut_src, cut_tgt)


def _causal_features(
    tokenizer: PreTrainedTokenizerBase, examples: Sequence[Example], config: TrainConfig
) -> tuple[_Features, _LengthStats]:
    """Prompt + target + eos as one sequence; the prompt's positions carry no loss (label -100).

    The source is cut to `max_source_len` tokens and the target (with its eos) to `max_target_len`."""
    eos = tokenizer.eos_token_id
    rows: list[dict[str, list[int]]] = []
    src_lens, tgt_lens, cut_src, cut_tgt = [], [], 0, 0
    for example in examples:
        source_len = len(tokenizer(example.source, add_special_tokens=False)["input_ids"])
        cut_src += int(source_len > config.max_source_len)
        prompt = prompt_ids(tokenizer, example.source, example.mode, config.max_source_len)
        target = tokenizer(example.target, add_special_tokens=False)["input_ids"] + [eos]
        src_lens.append(source_len)
        tgt_lens.append(len(target))
        if len(target) > config.max_target_len:
            cut_tgt += 1
            target = target[: config.max_target_len - 1] + [eos]
        ids = prompt + target
        rows.append(
            {"input_ids": ids, "attention_mask": [1] * len(ids), "labels": [-100] * len(prompt) + target}
        )
    stats = _LengthStats(
        float(np.mean(src_lens)) if src_lens else 0.0,
        float(np.mean(tgt_lens)) if tgt_lens else 0.0,
        cut_src,
        cut_tgt,
    )
    return _Features(rows), stats


def _argmax_logits(logits: Any, labels: Any) -> Any:
    """Keep only the argmax ids of the validation logits (the whole vocabulary per token would fill memory)."""
    if isinstance(logits, tuple):
        logits = logits[0]
    return logits.argmax(dim=-1)


def _causal_metrics_fn():  # type: ignore[no-untyped-def]
    """Exact match and token accuracy of a decoder-only model from one teacher-forced pass.

    Position t's argmax predicts token t + 1. A row whose argmax equals the gold token at every target
    position (the eos included) is exactly what greedy decoding writes, so `exact_match` is greedy exact
    match, measured without generating."""

    def compute(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(preds, tuple):
            preds = preds[0]
        preds, labels = preds[:, :-1], labels[:, 1:]
        mask = labels >= 0
        hits = (preds == labels) & mask
        counts = np.maximum(mask.sum(1), 1)
        exact = float(np.mean(hits.sum(1) == mask.sum(1)))
        token_accuracy = float(np.mean(hits.sum(1) / counts))
        n = max(len(labels), 1)
        return {
            "exact_match": exact,
            "token_accuracy": token_accuracy,
            SELECTION_METRIC: exact + token_accuracy * 0.5 / n,
        }

    return compute


def _metrics_fn(tokenizer: PreTrainedTokenizerBase, mode: str, decoder_start: int | None):  # type: ignore[no-untyped-def]
    from pgmr.query import IntermediateQueryError, parse

    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0

    def compute(eval_pred: Any) -> dict[str, float]:
        preds, labels = eval_pred.predictions, eval_pred.label_ids
        if isinstance(preds, tuple):
            preds = preds[0]
        # Batches are concatenated with -100 padding; generated rows start with the decoder start token.
        preds = np.where(preds < 0, pad, preds)
        label_mask = labels >= 0
        labels = np.where(label_mask, labels, pad)
        predicted = tokenizer.batch_decode(
            preds, skip_special_tokens=True, clean_up_tokenization_spaces=False
        )
        gold = tokenizer.batch_decode(labels, skip_special_tokens=True, clean_up_tokenization_spaces=False)
        n = max(len(gold), 1)
        exact = float(np.mean([p.strip() == g.strip() for p, g in zip(predicted, gold, strict=True)]))
        if decoder_start is not None and preds.shape[1] and (preds[:, 0] == decoder_start).all():
            preds = preds[:, 1:]
        width = labels.shape[1]
        if preds.shape[1] < width:
            preds = np.pad(preds, ((0, 0), (0, width - preds.shape[1])), constant_values=pad)
        hits = (preds[:, :width] == labels) & label_mask
        token_accuracy = float(np.mean(hits.sum(1) / np.maximum(label_mask.sum(1), 1)))
        metrics = {
            "exact_match": exact,
            "token_accuracy": token_accuracy,
            # Exact match decides; token accuracy only breaks its ties (its weight is below one example),
            # so that the many all-zero evaluations of a young model still keep the better checkpoint.
            SELECTION_METRIC: exact + token_accuracy * 0.5 / n,
        }
        if mode in PGMR_MODES:
            parsed = 0
            for text in predicted:
                try:
                    parse(text)
                    parsed += 1
                except IntermediateQueryError:
                    pass
            metrics["parse_rate"] = parsed / n
        return metrics

    return compute


class _Trainer(Seq2SeqTrainer):
    """Seq2SeqTrainer whose length grouping counts source and target tokens.

    The stock `group_by_length` sampler measures `input_ids` only; here the decoder side (targets two to ten
    times longer than questions) is most of the compute and most of the padding.
    """

    def __init__(
        self,
        *args: Any,
        group_by_length: bool = False,
        anneal_to: WallClockBudget | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._group_by_length = group_by_length
        self._anneal_to = anneal_to

    def create_scheduler(self, num_training_steps: int, optimizer: Any = None) -> Any:
        if self._anneal_to is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer or self.optimizer,
            budget_schedule(
                self.args.get_warmup_steps(num_training_steps),
                num_training_steps,
                self._anneal_to,
                self.args.device,
            ),
        )
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False) -> None:
        super().save_model(output_dir, _internal_call)
        if _internal_call:
            # Inside a checkpoint save: its weights are written, its optimizer and trainer state are not yet.
            failpoint("train.checkpoint")

    def _get_train_sampler(self, train_dataset: Any = None) -> Any:
        dataset = self.train_dataset if train_dataset is None else train_dataset
        if not self._group_by_length or not isinstance(dataset, _Features):
            return super()._get_train_sampler(train_dataset)
        from transformers.trainer_pt_utils import LengthGroupedSampler

        lengths = [len(row["input_ids"]) + len(row["labels"]) for row in dataset.rows]
        return LengthGroupedSampler(
            self.args.train_batch_size * self.args.gradient_accumulation_steps, lengths=lengths
        )


class WallClockBudget(TrainerCallback):
    """Stops training at the first step end past `seconds`, and has that step evaluated and checkpointed so
    that the best model so far is kept and the run can be resumed."""

    def __init__(self, seconds: float, started: float | None = None) -> None:
        self.seconds = seconds
        self.started = time.monotonic() if started is None else started
        self.stopped = False

    def _over(self, args: Any) -> bool:
        return self.fraction(args.device) >= 1.0

    def fraction(self, device: Any = "cpu") -> float:
        """Share of the budget spent (0..1), the largest over ranks: every rank gets one learning rate, and all
        stop together (ranks that went on would wait forever in a collective operation)."""
        spent = min(1.0, (time.monotonic() - self.started) / self.seconds)
        if torch.distributed.is_available() and torch.distributed.is_initialized():
            value = torch.tensor([spent], device=device)
            torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
            spent = float(value.item())
        return spent

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> Any:
        if not self.stopped and self._over(args):
            self.stopped = True
            control.should_training_stop = True
            control.should_evaluate = True
            control.should_save = True
        return control


def budget_schedule(
    warmup_steps: int, total_steps: int, budget: WallClockBudget, device: Any = "cpu"
) -> Callable[[int], float]:
    """Learning-rate multiplier: linear warmup, then linear decay to 0 by `total_steps` or by the end of the
    wall budget, whichever is nearer.

    The decay's progress is the larger of the steps done and the budget spent. A resumed call starts from the
    progress its steps had reached and spreads what is left of the decay over its own budget. A plain
    function, not an object: the scheduler's state in a checkpoint then holds no clock.
    """
    start: list[float] = []  # progress when this call took its first step

    def multiplier(step: int) -> float:
        if step < warmup_steps:
            return step / max(1, warmup_steps)
        by_steps = (step - warmup_steps) / max(1, total_steps - warmup_steps)
        if step > 0 and not start:
            start.append(by_steps)
        begun = start[0] if start else 0.0
        by_time = begun + (1.0 - begun) * budget.fraction(device)
        return max(0.0, 1.0 - max(by_steps, by_time))

    return multiplier


def _has_accelerator() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps and mps.is_available())


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


def _best_metrics(state: Any) -> tuple[dict[str, float], int | None]:
    """The validation metrics logged for the kept checkpoint (else the last evaluation)."""
    evals = [entry for entry in state.log_history if "eval_exact_match" in entry]
    if not evals:
        return {}, None
    best_step = None
    if state.best_model_checkpoint:
        try:
            best_step = int(Path(state.best_model_checkpoint).name.rsplit("-", 1)[1])
        except (IndexError, ValueError):
            best_step = None
    entry = next((e for e in evals if e.get("step") == best_step), evals[-1])
    metrics = {
        key[len("eval_") :]: float(value)
        for key, value in entry.items()
        if key.startswith("eval_")
        and isinstance(value, int | float)
        and not key.endswith(("_runtime", "_per_second"))
    }
    return metrics, entry.get("step")


def train_seq2seq(
    train_examples: Sequence[Example],
    val_examples: Sequence[Example],
    out_dir: Path | str,
    config: TrainConfig,
    *,
    data_info: Mapping[str, Any] | None = None,
) -> TrainResult:
    """Train (or resume) a generator into `out_dir`; the kept model ends up in `out_dir/model`.

    `data_info` (dataset names, retriever settings, ...) is recorded in the model card as given.
    """
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

    causal = config.preset in CAUSAL_PRESETS if config.base is None else is_causal_base(config.base)
    if causal and config.encoder_learning_rate is not None:
        raise ValueError(
            "--encoder-lr applies to encoder-decoder models; a decoder-only model has no encoder"
        )
    if config.lora.enabled and not causal:
        raise ValueError("LoRA (lora_r > 0) is implemented for decoder-only models")
    set_seed(config.seed)
    # Warm-started presets read sources with the encoder's tokenizer and write targets with their own.
    source_tokenizer: PreTrainedTokenizerBase | None = None
    source_dir = out_dir / SOURCE_TOKENIZER_DIR
    if causal:
        model, tokenizer = _causal_model(config, train_examples, last)
    elif last:
        # The checkpoint's own tokenizer: a retrained one could number tokens differently.
        tokenizer = AutoTokenizer.from_pretrained(last)
        model = AutoModelForSeq2SeqLM.from_pretrained(last)
        if source_dir.is_dir():
            source_tokenizer = AutoTokenizer.from_pretrained(source_dir)
    elif config.base:
        model, tokenizer, source_tokenizer = load_base(config.base, need_newlines=mode in PGMR_MODES)
        if source_tokenizer is not None:
            _save_source_tokenizer(source_tokenizer, source_dir)
    elif is_encoder_decoder_preset(config.preset):
        source_tokenizer = source_tokenizer_for(config.preset)
        tokenizer = train_tokenizer([e.target for e in train_examples], vocab_size=config.vocab_size)
        model = build_encoder_decoder(config.preset, source_tokenizer, tokenizer)
        _save_source_tokenizer(source_tokenizer, source_dir)
    else:
        texts = [t for e in train_examples for t in (e.source, e.target)]
        tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
        model = build_model(config.preset, tokenizer)
    (out_dir / RUN_FILE).write_text(json.dumps(run, indent=2) + "\n", encoding="utf-8")

    evaluated = list(val_examples[: config.max_eval_examples] if config.max_eval_examples else val_examples)
    if causal:
        train_set, train_lengths = _causal_features(tokenizer, train_examples, config)
        eval_set, _ = _causal_features(tokenizer, evaluated, config)
    else:
        train_set, train_lengths = _features(tokenizer, train_examples, config, source_tokenizer)
        eval_set, _ = _features(tokenizer, evaluated, config, source_tokenizer)
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
        predict_with_generate=not causal,
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
        use_cpu=config.bf16 and not _has_accelerator(),
        dataloader_num_workers=0,
        dataloader_pin_memory=torch.cuda.is_available(),
    )
    budget = WallClockBudget(config.max_minutes * 60.0, started) if config.max_minutes else None
    optimizer = _optimizer(model, config) if config.encoder_learning_rate is not None else None
    trainer = _Trainer(
        model=model,
        group_by_length=config.group_by_length,
        args=args,
        data_collator=DataCollatorForSeq2Seq(
            source_tokenizer or tokenizer, model=None if causal else model, label_pad_token_id=-100
        ),
        train_dataset=train_set,
        eval_dataset=eval_set,
        processing_class=tokenizer,
        compute_metrics=_causal_metrics_fn()
        if causal
        else _metrics_fn(tokenizer, mode, model.config.decoder_start_token_id),
        preprocess_logits_for_metrics=_argmax_logits if causal else None,
        callbacks=[MarkComplete(), *([budget] if budget else [])],
        anneal_to=budget if config.anneal_to_budget else None,
        optimizers=(optimizer, None),
    )
    trainer.train(resume_from_checkpoint=last)
    metrics, best_step = _best_metrics(trainer.state)
    wall = time.monotonic() - started
    parameters = count_parameters(_base_of(trainer.model))
    card = {
        "pgmr_version": __version__,
        "format": "pgmr-generator/1",
        "backend": "causal" if causal else "seq2seq",
        "mode": mode,
        "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "model": {
            **model_name,
            "architecture": type(_base_of(trainer.model)).__name__,
            **(
                {"lora": {**asdict(config.lora), "trainable_parameters": _trainable(trainer.model)}}
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
            **({"prompt_format": PROMPT_FORMAT} if causal else {}),
        },
        "command": config.command or shlex.join(sys.argv),
    }
    model_dir = out_dir / FINAL_MODEL_DIR
    _save_final(trainer, model_dir, card, source_tokenizer, merge_lora=config.lora.enabled)
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


def _save_source_tokenizer(source_tokenizer: PreTrainedTokenizerBase, source_dir: Path) -> None:
    """Kept in the run dir (atomically): a resumed run reads sources with the same tokenizer."""
    tmp = source_dir.parent / f".{source_dir.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    source_tokenizer.save_pretrained(tmp)
    replace_dir(tmp, source_dir)


def _trainable(model: Any) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _base_of(model: Any) -> Any:
    """The transformers model under a peft wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def _causal_model(
    config: TrainConfig, train_examples: Sequence[Example], last: str | None
) -> tuple[Any, PreTrainedTokenizerBase]:
    """A decoder-only model to train: from a preset (tokenizer trained on the examples) or `config.base`,
    with LoRA adapters when `config.lora_r > 0`. Resuming reads the checkpoint's tokenizer and, without LoRA,
    its weights; with LoRA the base is rebuilt (seeded) and the Trainer loads the adapters from `last`."""
    mode = train_examples[0].mode
    max_len = config.max_source_len + config.max_target_len + 32
    tokenizer: PreTrainedTokenizerBase
    if last and not config.lora.enabled:
        from transformers import AutoModelForCausalLM

        tokenizer = AutoTokenizer.from_pretrained(last)
        model: Any = AutoModelForCausalLM.from_pretrained(last)
    elif config.base:
        model, tokenizer = load_causal_base(config.base, need_newlines=mode in PGMR_MODES)
    else:
        if last:
            tokenizer = AutoTokenizer.from_pretrained(last)
        else:
            texts = [t for e in train_examples for t in (prompt_text(e.source, e.mode), e.target)]
            tokenizer = train_tokenizer(texts, vocab_size=config.vocab_size)
        model = build_causal_model(config.preset, tokenizer, max_len)
    # Training batches pad on the right (positions count from the prompt's first token); generation pads left.
    tokenizer.padding_side = "right"
    if config.lora.enabled:
        model = add_lora(model, config.lora)
    return model, tokenizer


def _optimizer(model: Any, config: TrainConfig) -> torch.optim.Optimizer:
    """AdamW with the encoder at `encoder_learning_rate` and everything else at `learning_rate`."""
    encoder = model.get_encoder()
    encoder_ids = {id(p) for p in encoder.parameters()}
    params = [p for p in model.parameters() if p.requires_grad]
    groups = [
        {"params": [p for p in params if id(p) in encoder_ids], "lr": config.encoder_learning_rate},
        {"params": [p for p in params if id(p) not in encoder_ids], "lr": config.learning_rate},
    ]
    # The Trainer's scheduler scales each group's own lr, so the warmup/decay shape applies to both.
    return torch.optim.AdamW(
        [g for g in groups if g["params"]], lr=config.learning_rate, weight_decay=config.weight_decay
    )


def _save_final(
    trainer: Seq2SeqTrainer,
    model_dir: Path,
    card: Mapping[str, Any],
    source_tokenizer: PreTrainedTokenizerBase | None = None,
    *,
    merge_lora: bool = False,
) -> None:
    """Model, tokenizer, card and README into a sibling temp dir, then renamed over `model_dir`.

    With LoRA the adapters are merged into the base weights first: the saved model loads without peft."""
    # A fixed name: every rank must pass the same path to save_model (sharded setups gather collectively).
    tmp = model_dir.parent / f".{model_dir.name}.partial"
    if trainer.is_world_process_zero():
        shutil.rmtree(tmp, ignore_errors=True)
    trainer.accelerator.wait_for_everyone()
    if merge_lora:
        if trainer.is_world_process_zero():
            merged(trainer.model).save_pretrained(str(tmp))
            trainer.processing_class.save_pretrained(str(tmp))
    else:
        trainer.save_model(str(tmp))
    if trainer.is_world_process_zero():
        (tmp / "training_args.bin").unlink(missing_ok=True)
        if source_tokenizer is not None:
            source_tokenizer.save_pretrained(tmp / SOURCE_TOKENIZER_DIR)
        (tmp / MODEL_CARD).write_text(json.dumps(card, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        (tmp / "README.md").write_text(card_readme(card), encoding="utf-8")
        replace_dir(tmp, model_dir)
    trainer.accelerator.wait_for_everyone()
