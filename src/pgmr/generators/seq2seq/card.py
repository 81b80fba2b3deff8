"""The model card written beside a trained generator: what it is, what it was trained on, how well it did."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

MODEL_CARD = "model_card.json"
FINAL_MODEL_DIR = "model"


class ModelCardError(ValueError):
    """A directory that does not hold a trained pgmr generator."""


def resolve_model_dir(path: Path | str) -> Path:
    """The directory with the model card: `path` itself, or `path/model` for a training output directory."""
    path = Path(path).expanduser()
    for candidate in (path, path / FINAL_MODEL_DIR):
        if (candidate / MODEL_CARD).is_file():
            return candidate
    raise ModelCardError(
        f"no {MODEL_CARD} in {path} or {path / FINAL_MODEL_DIR}; is this a trained generator?"
    )


def read_model_card(path: Path | str) -> dict[str, Any]:
    model_dir = resolve_model_dir(path)
    try:
        card = json.loads((model_dir / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelCardError(f"cannot read {model_dir / MODEL_CARD}: {exc}") from None
    if not isinstance(card, dict) or "mode" not in card:
        raise ModelCardError(f"{model_dir / MODEL_CARD} has no 'mode'")
    return card


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def card_readme(card: Mapping[str, Any]) -> str:
    """A human-readable README.md from the card (the JSON stays the source of truth)."""
    model = card.get("model", {})
    data = card.get("data", {})
    training = card.get("training", {})
    validation = card.get("validation", {})
    lines = [
        f"# pgmr generator ({card['mode']})",
        "",
        f"A seq2seq model that writes {'SPARQL-PGMR (resolved afterwards against the memory)' if card['mode'] in ('pgmr', 'rag-pgmr') else 'SPARQL with Wikidata IDs'} "
        f"from {'a question and retrieved candidates' if card['mode'] in ('rag', 'rag-pgmr') else 'a question'}.",
        "",
        "## Model",
        "",
        *(f"- {key}: {_fmt(value)}" for key, value in model.items()),
        "",
        "## Data",
        "",
        *(f"- {key}: {_fmt(value)}" for key, value in data.items()),
        "",
        "## Training",
        "",
        *(f"- {key}: {_fmt(value)}" for key, value in training.items() if key != "config"),
        "",
        "## Validation",
        "",
        *(f"- {key}: {_fmt(value)}" for key, value in validation.items()),
        "",
        "## Command",
        "",
        "```",
        str(card.get("command", "")),
        "```",
        "",
        "## Use",
        "",
        "```",
        "pgmr generate THIS_DIR lcquad2-test --out predictions.jsonl"
        + (" --resolve" if card["mode"] in ("pgmr", "rag-pgmr") else ""),
        "```",
        "",
    ]
    return "\n".join(lines)
