"""`EnsembleGenerator`: several trained generators that each write a draft per question; the pipeline resolves
every draft and keeps the one its reranker scores best (pgmr.pipeline.rerank).

Why: the seq2seq and structured models fail on different questions (on LC-QuAD 2.0 validation, either one is
right on half the questions that both get wrong), and the memory can tell which draft it supports: a draft
whose labels are labels the memory knows is far more often right than one that lands on near misses. The
choice needs the resolver, which generators do not know, so this class only writes the drafts; the reranker
weights ship in the ensemble's directory and the pipeline reads them from `reranker`.

An ensemble directory holds a model card (backend "ensemble") naming its members by path, relative to the
directory, and `reranker.json`:

    {"backend": "ensemble", "mode": "pgmr", "members": [{"name": "seq2seq", "path": "../pgmr-default"}, ...]}
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pgmr.generators.base import Generator, check_generate_inputs

RERANKER_FILE = "reranker.json"


@dataclass(frozen=True)
class Draft:
    """One member's output for one question, with what the member reports of its own confidence (the
    structured model: `template` and `slots` probabilities; members that report none: empty)."""

    source: str
    text: str
    confidence: Mapping[str, float] = field(default_factory=dict, compare=False)


class EnsembleGenerator:
    """Members in order; `generate` alone (no reranking) returns the first member's output."""

    mode = "pgmr"

    def __init__(
        self,
        members: Sequence[tuple[str, Generator]],
        reranker: Mapping[str, Any] | None,
        card: Mapping[str, Any] | None = None,
        verifier: Any = None,
    ) -> None:
        if not members:
            raise ValueError("an ensemble needs at least one member")
        names = [name for name, _ in members]
        if len(set(names)) != len(names):
            raise ValueError(f"member names must differ: {names}")
        for name, member in members:
            if member.mode != "pgmr":
                raise ValueError(f"member {name!r} has mode {member.mode!r}; an ensemble drafts pgmr queries")
        self.members = tuple(members)
        self.reranker = dict(reranker) if reranker is not None else None
        self.card = dict(card or {})
        # pgmr.generators.verifier.Verifier: scores resolved drafts for the reranker (the pipeline calls it).
        self.verifier = verifier

    @classmethod
    def load(
        cls,
        path: Path | str,
        device: str = "cpu",
        *,
        load_member: Callable[..., Generator],
        **decoding: Any,
    ) -> EnsembleGenerator:
        """Each member loaded by `load_member` (pgmr.generators.trained.load_trained, which reads the member's
        card); decoding options (beams, copy bias) go to every member."""
        from pgmr.generators.seq2seq.card import ModelCardError, read_model_card, resolve_model_dir

        directory = resolve_model_dir(path)
        card = read_model_card(directory)
        members = card.get("members")
        if not isinstance(members, list) or not members:
            raise ModelCardError(f"{directory}: an ensemble card needs a non-empty 'members' list")
        loaded: list[tuple[str, Generator]] = []
        for entry in members:
            if not isinstance(entry, dict) or not entry.get("name") or not entry.get("path"):
                raise ModelCardError(f"{directory}: each member needs a 'name' and a 'path': {entry!r}")
            member_dir = (directory / str(entry["path"])).resolve()
            if read_model_card(member_dir).get("backend") == "ensemble":
                raise ModelCardError(f"{directory}: member {entry['name']!r} is itself an ensemble")
            loaded.append((str(entry["name"]), load_member(member_dir, device, **decoding)))
        from pgmr.generators.verifier import VERIFIER_DIR, Verifier, VerifierError

        verifier = None
        if (directory / VERIFIER_DIR).is_dir():
            try:
                verifier = Verifier.load(directory / VERIFIER_DIR)
            except VerifierError as exc:
                raise ModelCardError(f"{directory}: {exc}") from None
        try:
            return cls(loaded, read_reranker(directory), card, verifier)
        except ValueError as exc:
            raise ModelCardError(f"{directory}: {exc}") from None

    def generate(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[str]:
        return self.members[0][1].generate(questions, contexts=contexts, batch_size=batch_size)

    def drafts(
        self, questions: Sequence[str], *, contexts: Sequence[str] | None = None, batch_size: int = 16
    ) -> list[tuple[Draft, ...]]:
        """Per question, each member's output in member order."""
        check_generate_inputs(self.mode, questions, contexts, batch_size)
        outputs = [member_outputs(member, questions, contexts, batch_size) for _, member in self.members]
        return [
            tuple(Draft(name, *scored[i]) for (name, _), scored in zip(self.members, outputs, strict=True))
            for i in range(len(questions))
        ]


def member_outputs(
    member: Generator, questions: Sequence[str], contexts: Sequence[str] | None, batch_size: int
) -> list[tuple[str, dict[str, float]]]:
    """A member's outputs with its confidences, where it reports them (`generate_with_confidence`)."""
    scored = getattr(member, "generate_with_confidence", None)
    if scored is not None:
        return list(scored(questions, contexts=contexts, batch_size=batch_size))
    return [(t, {}) for t in member.generate(questions, contexts=contexts, batch_size=batch_size)]


def read_reranker(directory: Path) -> dict[str, Any] | None:
    """The reranker file beside an ensemble's card, as JSON (None when there is none: then the drafts can be
    written but not chosen among). Raises ModelCardError for a file that cannot be read as a JSON object."""
    from pgmr.generators.seq2seq.card import ModelCardError

    path = Path(directory) / RERANKER_FILE
    if not path.exists():
        return None
    try:
        reranker = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise ModelCardError(f"cannot read the ensemble's reranker {path}: {exc}") from None
    if not isinstance(reranker, dict):
        raise ModelCardError(f"{path} is not a JSON object")
    return reranker


def generate_drafts(
    generator: Generator,
    questions: Sequence[str],
    *,
    contexts: Sequence[str] | None = None,
    batch_size: int = 16,
) -> list[tuple[Draft, ...]]:
    """Every generator's drafts: an ensemble's members', or one draft ("model") per question."""
    if isinstance(generator, EnsembleGenerator):
        return generator.drafts(questions, contexts=contexts, batch_size=batch_size)
    texts = generator.generate(questions, contexts=contexts, batch_size=batch_size)
    return [(Draft("model", t),) for t in texts]


__all__ = [
    "RERANKER_FILE",
    "Draft",
    "EnsembleGenerator",
    "generate_drafts",
    "member_outputs",
    "read_reranker",
]
