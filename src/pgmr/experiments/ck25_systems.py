"""The systems of `pgmr experiment ck25` (pgmr.experiments.ck25): one per run, and the rows kept from earlier runs.

A run evaluates one system: the oracle, a trained generator (`--model`) or a chat LLM (`--server`), each run
at its own time (a chat model on CPU takes minutes, the oracle seconds). Its metrics.json holds that run's
system at the top level (`condition`, `model`, `metrics`...) and, under `systems`, every row its report shows:
its own, keyed by `system_key`, and those kept from earlier runs with `--keep-from` (repeatable), each marked
`carried_from` with the time and command of the run that evaluated it. results-doc publishes that document
as the CK25 section of docs/results.md. An earlier run written before `systems` existed (its one system at the
top level only) is read the same way.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.experiments.settings import ExperimentError

# Rows in this order: the oracle (the ceiling of generation), trained generators, then chat models.
_CONDITION_ORDER = {"oracle": 0, "model": 1, "chat": 2}


def _stem(model: str) -> str:
    """A model's short name: a served GGUF path's file stem, a model directory's name."""
    name = Path(model.split(" at ")[0]).name
    return name.removesuffix(".gguf")


def system_key(condition: str, model: str | None) -> str:
    """`oracle`, `model-NAME` (a trained generator's directory) or `chat-NAME` (the served model's file stem)."""
    if condition == "oracle" or not model:
        return "oracle"
    return f"{condition}-{_stem(model)}"


def system_label(entry: Mapping[str, Any]) -> str:
    """A row's name in the tables."""
    from pgmr.generators.llm_weights import LOCAL_MODELS

    condition, model = entry.get("condition"), str(entry.get("model") or "")
    if condition == "oracle":
        return "oracle (a perfect generator)"
    if condition == "chat":
        local = LOCAL_MODELS.get(_stem(model))
        name = local.upstream.split("/")[-1] if local is not None else f"`{model}`"
        return f"pgmr + {name} (schema prompt, no training pairs)"
    return f"pgmr + `{model}` (trained generator)"


def _trained_summary(model_dir: str) -> dict[str, Any]:
    """A trained generator's size and training cost from its model card (what results-doc describes a trained
    model with); `?` where the card cannot be read."""
    from pgmr.experiments.systems import card_summary
    from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

    try:
        path = resolve_model_dir(model_dir)
        return card_summary(path, read_model_card(path))
    except (ModelCardError, OSError):
        return {"train_steps": "?", "train_wall_seconds": None}


def run_entry(doc: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The system a run evaluated (the top level of its metrics.json): its key and its row."""
    condition = str(doc.get("condition") or "oracle")
    model = doc.get("model")
    entry: dict[str, Any] = {"status": "ok", "condition": condition, "model": model}
    if model:
        entry["mode"] = "pgmr"
    generator = doc.get("generator") or {}
    if condition == "chat":
        entry["generator"] = generator
        entry["prompting"] = (
            f"with the graph's schema and {generator.get('examples', '?')} examples written from it"
        )
    elif condition == "model" and model:
        entry.update(_trained_summary(str(model)))
    for key in ("memory", "min_confidence", "metrics", "generation_seconds", "seconds_per_question"):
        if key in doc:
            entry[key] = doc[key]
    return system_key(condition, model), entry


def systems_of(doc: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """Every row of a ck25 metrics.json: its `systems`, or (a run written before they existed) its one system."""
    systems = doc.get("systems")
    if isinstance(systems, Mapping) and systems:
        return {str(k): dict(v) for k, v in systems.items()}
    key, entry = run_entry(doc)
    return {key: entry}


def ordered(systems: Mapping[str, Mapping[str, Any]]) -> list[tuple[str, Mapping[str, Any]]]:
    """The rows in table order: the oracle, trained generators, chat models; as given within each."""
    return sorted(systems.items(), key=lambda kv: _CONDITION_ORDER.get(str(kv[1].get("condition")), 3))


def _ran_at(entry: Mapping[str, Any], doc: Mapping[str, Any]) -> str:
    return str((entry.get("carried_from") or {}).get("started_at") or doc.get("started_at") or "")


def read_earlier(path: Path) -> dict[str, Any]:
    """The metrics document of an earlier ck25 run (its metrics.json, or the directory holding one)."""
    file = path / "metrics.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExperimentError(f"--keep-from {path}: cannot read a ck25 run's metrics.json ({exc})") from None
    if not isinstance(doc, dict) or doc.get("experiment") != "ck25":
        raise ExperimentError(f"--keep-from {file} is not the metrics.json of a ck25 run")
    return doc


def _check_comparable(doc: Mapping[str, Any], path: Path, same: Mapping[str, Any]) -> None:
    """The earlier run scored the same questions over the same graph: file names and question count, and the
    files' sha256 where both runs recorded it (runs before it did not)."""
    settings = doc.get("settings") or {}
    before = {
        "questions file": Path(str(doc.get("questions_file") or "")).name,
        "graph file": Path(str(doc.get("graph_file") or "")).name,
        "questions": (doc.get("metrics") or {}).get("questions"),
        "questions sha256": settings.get("questions_sha256"),
        "graph sha256": settings.get("graph_sha256"),
    }
    for key, value in same.items():
        if key.endswith("sha256") and before[key] is None:
            continue
        if before[key] != value:
            raise ExperimentError(
                f"--keep-from {path}: the earlier run ({doc.get('started_at')}) has {key} {before[key]!r}, "
                f"this run {value!r}; its rows would not be comparable"
            )


def kept_systems(paths: Sequence[Path], same: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The rows of the earlier runs at `paths`, each marked `carried_from` with the run that evaluated it (the
    first run's, when it was itself kept); a system several of them hold is the most recently evaluated one.
    Read before any work, so a bad path costs nothing. `same`: what must match (see _check_comparable)."""
    kept: dict[str, dict[str, Any]] = {}
    for path in paths:
        doc = read_earlier(path)
        _check_comparable(doc, path, same)
        source = {"started_at": doc.get("started_at"), "command": doc.get("command")}
        for key, entry in systems_of(doc).items():
            row = {**entry, "carried_from": entry.get("carried_from") or source}
            if key not in kept or _ran_at(row, doc) > _ran_at(kept[key], {}):
                kept[key] = row
    return kept


def combined(
    key: str, entry: dict[str, Any], kept: Mapping[str, dict[str, Any]]
) -> dict[str, dict[str, Any]]:
    """This run's row and the kept ones (this run's replaces a kept row of the same system), in table order."""
    systems = {**{k: v for k, v in kept.items() if k != key}, key: entry}
    return {k: systems[k] for k, _ in ordered(systems)}


__all__ = [
    "combined",
    "kept_systems",
    "ordered",
    "read_earlier",
    "run_entry",
    "system_key",
    "system_label",
    "systems_of",
]
