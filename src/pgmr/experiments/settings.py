"""What every experiment takes: its settings, validated at the edge (the CLI), the default models and how
to make them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgmr.generators.base import MODES, RAG_MODES
from pgmr.precision import DEFAULT_PRECISION

# Default model directories, relative to the working directory (the checkout root, where `artifacts/`
# goes too): for pgmr the shipped ensemble (its seq2seq member models/pgmr-default and structured members
# models/pgmr-structured and models/pgmr-structured-s7, reranked), for the baselines models trained with
# `--preset minilm`; rag and rag-pgmr have no default run yet.
DEFAULT_MODELS: dict[str, str] = {
    "pgmr": "models/pgmr-ensemble",
    "direct": "runs/direct-minilm/model",
    "rag": "runs/rag-minilm/model",
    "rag-pgmr": "runs/rag-pgmr-minilm/model",
}


# The recipes of the published models (their model cards record them too; docs/generators.md; the default's
# whole recipe is pgmr.experiments.recipe): the default's seq2seq member and the direct model share one; rag
# reads a label-only candidate block after the question (about 80 encoder tokens, where 64 would cut it) and
# trains in the same wall budget, annealed to it.
_RECIPE = (
    "--preset minilm --vocab-size 8000 --max-description-words 0 --batch-size 32 --lr 1e-3 --encoder-lr 1e-4 "
    "--warmup-steps 300 --max-eval-examples 300 --max-target-len 160"
)
_STEPS = "--max-steps 6000 --max-minutes 116 --eval-steps 500 --max-source-len 64"
_RAG = (
    "--max-steps 12000 --max-minutes 100 --anneal-to-budget --bf16 --eval-steps 1000 --max-source-len 128 "
    "--candidate-description-words 0"
)


def train_command(system: str) -> str:
    """The command that makes a system's default model."""
    if system == "pgmr":  # the ensemble, its members, verifier and reranker (docs/generators.md)
        return "pgmr train-default -o runs/default (then --models pgmr=runs/default/models/pgmr-ensemble)"
    return f"pgmr train --mode {system} -o runs/{system}-minilm {_RECIPE} {_RAG if system in RAG_MODES else _STEPS}"


class ExperimentError(ValueError):
    """Bad experiment input (unknown system, missing model or memory, bad predictions file): the message
    says what to do."""


def _shipped_threshold() -> float:
    from pgmr.resolver.support import shipped_threshold

    return shipped_threshold()


@dataclass(frozen=True)
class ExperimentSettings:
    """What every experiment takes, validated at the edge (the CLI)."""

    data_dir: Path
    out_dir: Path
    limit: int | None = None
    models: Mapping[str, Path] = field(default_factory=dict)  # system -> model dir overrides
    memory_dir: Path | None = None
    batch_size: int = 16
    device: str = "cpu"
    precision: str = DEFAULT_PRECISION  # the models' and query encoder's number format (pgmr.precision)
    num_beams: int | None = None
    max_new_tokens: int | None = None
    copy_bias: float | None = None  # None: the generator's tuned default
    relation_copy_bias: float | None = None
    entity_threshold: float = 0.0
    relation_threshold: float = 0.0
    # pgmr systems refuse a placeholder whose support (estimated probability that the memory holds what it
    # names) is below this (pgmr.resolver.support); the shipped setting by default, 0 never refuses.
    min_confidence: float = field(default_factory=_shipped_threshold)
    command: str = ""
    progress: bool = True
    # An earlier run of the same experiment (its metrics.json or directory): systems this run cannot
    # evaluate keep that run's results (`carry_over`).
    keep_from: Path | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "data_dir": str(self.data_dir),
            "out_dir": str(self.out_dir),
            "limit": self.limit,
            "models": {k: str(v) for k, v in self.models.items()},
            "memory": str(self.memory_dir) if self.memory_dir else "default (~/.cache/pgmr/memory)",
            "batch_size": self.batch_size,
            "device": self.device,
            "precision": self.precision,
            "num_beams": self.num_beams,
            "max_new_tokens": self.max_new_tokens,
            "copy_bias": self.copy_bias,
            "relation_copy_bias": self.relation_copy_bias,
            "entity_threshold": self.entity_threshold,
            "relation_threshold": self.relation_threshold,
            "min_confidence": self.min_confidence,
            "keep_from": str(self.keep_from) if self.keep_from else None,
        }


def parse_models(text: str | None) -> dict[str, Path]:
    """`pgmr=DIR,direct=DIR` -> {system: Path}. Raises ExperimentError for bad syntax or an unknown system."""
    models: dict[str, Path] = {}
    if not text:
        return models
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        name, sep, path = part.partition("=")
        name, path = name.strip(), path.strip()
        if not sep or not name or not path:
            raise ExperimentError(f"--models takes SYSTEM=DIR pairs separated by commas, got {part!r}")
        if name not in MODES:
            raise ExperimentError(f"--models: unknown system {name!r}; expected one of {', '.join(MODES)}")
        if name in models:
            raise ExperimentError(f"--models names {name!r} twice")
        models[name] = Path(path).expanduser()
    return models


__all__ = [
    "DEFAULT_MODELS",
    "ExperimentError",
    "ExperimentSettings",
    "parse_models",
    "train_command",
]
