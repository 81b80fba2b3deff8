"""Ensemble directories (pgmr.generators.ensemble): writing one's card and its draft verifier, and reading
which member lives where (`pgmr ensemble create`, the recipe of `pgmr train-default`).

The card names its members by paths relative to the directory, so an ensemble moves with its members (the
shipped `models/pgmr-ensemble` names `../pgmr-default`). Nothing here loads a model: the cards say what each
directory holds, and a wrong one is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pgmr.fsutil import replace_dir, temp_sibling
from pgmr.jsonl import atomic_write_text

ENSEMBLE_BACKEND = "ensemble"
STRUCTURED_BACKEND = "structured"
# As pgmr.generators.seq2seq.card and pgmr.generators.verifier name them; not imported from there, since
# that package imports torch (seconds per command), and writing a card needs none of it.
MODEL_CARD = "model_card.json"
FINAL_MODEL_DIR = "model"
VERIFIER_DIR = "verifier"


class EnsembleDirError(ValueError):
    """A directory that cannot be (or be made into) an ensemble: the message names the path and the reason."""


def read_card(path: Path | str) -> tuple[Path, dict[str, Any]]:
    """The directory holding the model card (`path`, or a training run's `path/model`) and the card."""
    path = Path(path)
    directory = path / FINAL_MODEL_DIR if (path / FINAL_MODEL_DIR / MODEL_CARD).is_file() else path
    try:
        card = json.loads((directory / MODEL_CARD).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EnsembleDirError(f"{path}: no readable {MODEL_CARD} ({exc})") from None
    if not isinstance(card, dict):
        raise EnsembleDirError(f"{directory / MODEL_CARD} is not a JSON object")
    return directory, card


def member_dirs(ensemble: Path | str) -> dict[str, Path]:
    """Each member's name and model directory, in the card's order."""
    directory, card = read_card(ensemble)
    members = card.get("members")
    if card.get("backend") != ENSEMBLE_BACKEND or not isinstance(members, list) or not members:
        raise EnsembleDirError(
            f"{directory}: not an ensemble (its card has no backend 'ensemble' and members)"
        )
    found: dict[str, Path] = {}
    for entry in members:
        if not isinstance(entry, dict) or not entry.get("name") or not entry.get("path"):
            raise EnsembleDirError(f"{directory}: each member needs a 'name' and a 'path': {entry!r}")
        found[str(entry["name"])] = (directory / str(entry["path"])).resolve()
    return found


def structured_members(ensemble: Path | str) -> dict[str, Path]:
    """The members that are structured models (the ones with runners-up, pgmr.experiments.runners_up)."""
    found = {}
    for name, path in member_dirs(ensemble).items():
        try:
            directory, card = read_card(path)
        except EnsembleDirError as exc:
            raise EnsembleDirError(f"member {name!r}: {exc}") from None
        if card.get("backend") == STRUCTURED_BACKEND:
            found[name] = directory
    return found


def _check_member(name: str, path: Path) -> Path:
    """The member's model directory (`path`, or a training run's `path/model`), checked by its card."""
    try:
        directory, card = read_card(path)
    except EnsembleDirError as exc:
        raise EnsembleDirError(f"member {name!r}: {exc}") from None
    if card.get("backend") == ENSEMBLE_BACKEND:
        raise EnsembleDirError(f"member {name!r} ({path}) is itself an ensemble")
    if card.get("mode") != "pgmr":
        raise EnsembleDirError(
            f"member {name!r} ({path}) writes {card.get('mode')!r}; an ensemble drafts pgmr queries"
        )
    return directory


def _check_verifier(path: Path) -> Path:
    """The verifier's model directory (`path`, or a `pgmr train-verifier` run's `path/model`)."""
    path, card = read_card(path)
    if card.get("backend") != "verifier":
        raise EnsembleDirError(
            f"{path}: its {MODEL_CARD} is not a draft verifier's (`pgmr train-verifier` RUN/model)"
        )
    return path


def write_ensemble(
    directory: Path,
    members: Mapping[str, Path],
    *,
    verifier: Path | None = None,
    description: str | None = None,
    command: str | None = None,
) -> dict[str, Any]:
    """Write `directory`'s card naming `members` (name -> model directory), and copy `verifier` (a trained
    verifier's model directory) into `directory/verifier/` when given. A reranker.json already there is kept:
    one fitted before the verifier weighs it zero, so the ensemble loads either way; refit it afterwards."""
    if not members:
        raise EnsembleDirError("an ensemble needs at least one member")
    directory = Path(directory)
    entries = []
    for name, path in members.items():
        resolved = _check_member(name, Path(path))
        relative = os.path.relpath(resolved.resolve(), directory.resolve())
        entries.append({"name": name, "path": Path(relative).as_posix()})
    verifier_dir = _check_verifier(Path(verifier)) if verifier is not None else None
    card: dict[str, Any] = {"backend": ENSEMBLE_BACKEND, "mode": "pgmr", "members": entries}
    if description:
        card["description"] = description
    if command:
        card["command"] = command
    directory.mkdir(parents=True, exist_ok=True)
    if verifier_dir is not None:
        # Copied whole beside the card, then swapped in: a reader sees the old verifier or the new one.
        tmp = temp_sibling(directory / VERIFIER_DIR)
        shutil.copytree(verifier_dir, tmp)
        replace_dir(tmp, directory / VERIFIER_DIR)
    atomic_write_text(directory / MODEL_CARD, json.dumps(card, indent=2) + "\n")
    return card


__all__ = ["EnsembleDirError", "member_dirs", "structured_members", "write_ensemble"]
