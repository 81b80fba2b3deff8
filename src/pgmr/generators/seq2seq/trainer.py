"""The Hugging Face Trainer parts that both architectures share: the training rows, the Trainer itself
(length grouping over source and target, the wall budget's schedule, a failpoint inside checkpoint saves), the
wall-clock budget, the kept model's validation metrics and the atomic write of the final model.

An architecture (`Architecture`: encoder-decoders in `pgmr.generators.seq2seq.encoder_decoder`, decoder-only
models in `pgmr.generators.causal.train`) supplies the model, its training rows and its validation metric;
`pgmr.generators.seq2seq.train.train_model` runs the rest.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import torch
from transformers import PreTrainedModel, PreTrainedTokenizerBase, Seq2SeqTrainer, TrainerCallback

from pgmr.failpoints import failpoint
from pgmr.fsutil import replace_dir
from pgmr.generators.examples import Example
from pgmr.generators.seq2seq.card import MODEL_CARD, card_readme
from pgmr.generators.seq2seq.config import TrainConfig
from pgmr.generators.seq2seq.model import SOURCE_TOKENIZER_DIR

SELECTION_METRIC = "selection_score"


class Features(torch.utils.data.Dataset):
    def __init__(self, rows: list[dict[str, list[int]]]) -> None:
        self.rows = rows

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, index: int) -> dict[str, list[int]]:
        return self.rows[index]


@dataclass(frozen=True)
class LengthStats:
    mean_source_tokens: float
    mean_target_tokens: float
    truncated_sources: int
    truncated_targets: int


class Architecture(Protocol):
    """What one kind of model contributes to a training run; the run calls these in this order."""

    # The model card's `backend`, which `pgmr.generators.trained.load_trained` reads to pick the generator.
    backend: str
    # Validated by generating (encoder-decoders) or by one teacher-forced pass (decoder-only).
    generates: bool

    def check(self, config: TrainConfig) -> None:
        """Refuse settings this architecture cannot train (ValueError)."""

    def load(
        self,
        config: TrainConfig,
        train_examples: Sequence[Example],
        last: str | None,
        out_dir: Path,
        mode: str,
    ) -> tuple[Any, PreTrainedTokenizerBase, PreTrainedTokenizerBase | None]:
        """(model, target tokenizer, source tokenizer or None): from `last` when resuming, else new or `base`."""

    def features(
        self,
        tokenizer: PreTrainedTokenizerBase,
        examples: Sequence[Example],
        config: TrainConfig,
        source_tokenizer: PreTrainedTokenizerBase | None,
    ) -> tuple[Features, LengthStats]: ...

    def optimizer(self, model: Any, config: TrainConfig) -> torch.optim.Optimizer | None:
        """None: the Trainer's own."""

    def collator_model(self, model: Any) -> Any:
        """The model whose decoder inputs the collator prepares, or None."""

    def compute_metrics(
        self, tokenizer: PreTrainedTokenizerBase, mode: str, model: Any
    ) -> Callable[[Any], dict[str, float]]: ...

    def preprocess_logits(self) -> Callable[[Any, Any], Any] | None: ...

    def card_generation(self) -> Mapping[str, Any]:
        """Entries of the model card's `generation` beyond the lengths and beams."""


class PgmrTrainer(Seq2SeqTrainer):
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
            optimizer or self.optimizer,  # type: ignore[arg-type]  # set by create_optimizer before this
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
        if not self._group_by_length or not isinstance(dataset, Features):
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


def has_accelerator() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return torch.cuda.is_available() or bool(mps and mps.is_available())


def best_metrics(state: Any) -> tuple[dict[str, float], int | None]:
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


def trainable_parameters(model: Any) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def base_of(model: Any) -> Any:
    """The transformers model under a peft wrapper (or the model itself)."""
    get_base = getattr(model, "get_base_model", None)
    return get_base() if callable(get_base) else model


def merged(model: Any) -> PreTrainedModel:
    """The plain model to save: LoRA adapters merged into the base weights (loadable without peft)."""
    try:
        from peft import PeftModel
    except ImportError:  # peft absent: the model cannot carry adapters
        return model
    return model.merge_and_unload() if isinstance(model, PeftModel) else model


def save_final(
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
            trainer.processing_class.save_pretrained(str(tmp))  # type: ignore[union-attr]  # always given
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
