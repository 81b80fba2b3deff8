"""The compared systems: a trained model of one mode each, or missing (reported with the command that
makes it)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgmr.experiments.settings import DEFAULT_MODELS, ExperimentError, ExperimentSettings, train_command
from pgmr.generators.base import MODES, PGMR_MODES, RAG_MODES, Generator


@dataclass(frozen=True)
class SystemSpec:
    """One compared system: a trained model of `mode` at `model_dir`, or missing (`model_dir` None)."""

    name: str
    mode: str
    requested: Path  # the path given (or the default), reported when missing
    model_dir: Path | None
    card: Mapping[str, Any] = field(default_factory=dict)
    explicit: bool = False
    make_command: str | None = None  # how to make a missing model; default: `train_command(name)`

    @property
    def missing(self) -> bool:
        return self.model_dir is None

    @property
    def how_to_make(self) -> str:
        return self.make_command or train_command(self.name)

    def describe(self) -> dict[str, Any]:
        if self.model_dir is None:
            return {"status": "missing", "model": str(self.requested), "train_command": self.how_to_make}
        return {"model": str(self.model_dir), "mode": self.mode, **card_summary(self.model_dir, self.card)}


def card_summary(model_dir: Path, card: Mapping[str, Any]) -> dict[str, Any]:
    """Preset, size and training cost from a model card of any backend. An ensemble's training steps and
    time are its members' together, and each member is listed (`members`)."""
    backend = card.get("backend", "seq2seq")
    if backend == "ensemble":
        from pgmr.generators.seq2seq.card import ModelCardError, read_model_card

        members = []
        for entry in card.get("members", []):
            path = Path(os.path.normpath(Path(model_dir) / str(entry.get("path"))))
            try:
                member_card = read_model_card(path)
            except ModelCardError:
                member_card = {}
            members.append({"name": entry.get("name"), "model": str(path), **card_summary(path, member_card)})
        steps = [m["train_steps"] for m in members]
        seconds = [m["train_wall_seconds"] for m in members]
        verifier = _verifier_summary(Path(model_dir))
        if verifier is not None:
            seconds.append(verifier["train_wall_seconds"])
        return {
            "preset": "ensemble of " + ", ".join(f"{m['name']} ({m['preset']})" for m in members),
            "parameters": sum(m["parameters"] for m in members)
            if all(m["parameters"] for m in members)
            else None,
            "train_steps": " + ".join(str(s) for s in steps) if None not in steps else None,
            "train_wall_seconds": sum(seconds) if None not in seconds else None,
            "validation_exact_match": None,
            "members": members,
            **({"verifier": verifier} if verifier is not None else {}),
        }
    if backend == "structured":
        return {
            "preset": "structured",
            "parameters": card.get("parameters"),
            "train_steps": card.get("steps"),
            "train_wall_seconds": card.get("train_seconds"),
            "validation_exact_match": card.get("validation", {}).get("frame_exact"),
        }
    model = card.get("model", {})
    training = card.get("training", {})
    return {
        "preset": model.get("preset") or model.get("base"),
        "parameters": model.get("parameters"),
        "train_steps": training.get("global_step"),
        "train_wall_seconds": training.get("wall_seconds"),
        "validation_exact_match": card.get("validation", {}).get("exact_match"),
    }


def _verifier_summary(model_dir: Path) -> dict[str, Any] | None:
    """An ensemble's draft verifier (its `verifier/`), which was trained too: its steps and time; None without
    one."""
    from pgmr.generators.verifier import VERIFIER_DIR

    path = model_dir / VERIFIER_DIR
    try:
        card = json.loads((path / "model_card.json").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    training = card.get("training") if isinstance(card, dict) else None
    if not isinstance(training, dict):
        return None
    return {
        "model": os.path.normpath(path),
        # A copy (the QALD-10 fine-tuned ensemble ships the default's) is the same training: counted once.
        "trained_by": card.get("command"),
        "train_steps": training.get("steps"),
        "train_wall_seconds": training.get("seconds"),
    }


def system_spec(name: str, path: Path | None) -> SystemSpec:
    """The system `name` (a mode) with the model at `path`, else its default. A given path that holds no
    model, or a model of another mode, is an ExperimentError; a missing default is reported as missing."""
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

    if name not in MODES:
        raise ExperimentError(f"unknown system {name!r}; expected one of {', '.join(MODES)}")
    explicit = path is not None
    requested = path if path is not None else Path(DEFAULT_MODELS[name])
    try:
        model_dir = resolve_model_dir(requested)
        card = read_model_card(model_dir)
    except ModelCardError as exc:
        if explicit:
            raise ExperimentError(f"--models {name}={requested}: {exc}") from None
        return SystemSpec(name, name, requested, None)
    if card["mode"] != name:
        raise ExperimentError(
            f"the {name} model at {model_dir} is a {card['mode']!r} model; pass a {name!r} model"
        )
    return SystemSpec(name, name, requested, model_dir, card, explicit)


def needs_memory(specs: Sequence[SystemSpec]) -> bool:
    """Whether any present system resolves (pgmr modes) or retrieves (rag modes) against the memory."""
    return any(not s.missing and (s.mode in PGMR_MODES or s.mode in RAG_MODES) for s in specs)


def load_model(model_dir: Path, settings: ExperimentSettings) -> Generator:
    """The trained generator at `model_dir`, decoding as the experiment's settings say (an ensemble may lack
    its reranker here: `load_generator` checks that)."""
    from pgmr.generators.trained import load_trained

    return load_trained(
        model_dir,
        settings.device,
        num_beams=settings.num_beams,
        max_new_tokens=settings.max_new_tokens,
        copy_bias=settings.copy_bias,
        relation_copy_bias=settings.relation_copy_bias,
        precision=settings.precision,
    )


def load_generator(spec: SystemSpec, settings: ExperimentSettings) -> Generator:
    from pgmr.pipeline.rerank import RerankerError, reranker_of

    assert spec.model_dir is not None
    generator = load_model(spec.model_dir, settings)
    try:  # an ensemble that cannot choose among its drafts fails before minutes of generation
        reranker_of(generator)
    except RerankerError as exc:
        raise ExperimentError(f"{spec.name}: {spec.model_dir}: {exc}") from None
    return generator


def decoding_info(generator: Generator) -> dict[str, Any]:
    """How a seq2seq generator decoded (beam width, copy bias), for the record; an ensemble's seq2seq member's
    (the others decode one way); {} for other generators."""
    for _, member in getattr(generator, "members", ()):
        if hasattr(member, "num_beams"):
            return decoding_info(member)
    if not hasattr(generator, "num_beams"):
        return {}
    return {
        "num_beams": generator.num_beams,
        "copy_bias": getattr(generator, "copy_bias", 0.0),
        "relation_copy_bias": getattr(generator, "relation_copy_bias", 0.0),
        "copy_close": getattr(generator, "copy_close", True),
        "relation_copy_close": getattr(generator, "relation_copy_close", True),
    }


__all__ = [
    "SystemSpec",
    "card_summary",
    "decoding_info",
    "load_generator",
    "load_model",
    "needs_memory",
    "system_spec",
]
