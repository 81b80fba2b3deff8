"""An ensemble directory's reranker.json fitted on LC-QuAD 2.0 validation (`pgmr ensemble fit-rerank`):

    pgmr generate ENSEMBLE lcquad2-validation --batch-size 32 -o validation.drafts.jsonl
    pgmr ensemble fit-rerank ENSEMBLE --drafts validation.drafts.jsonl

Every draft is resolved with the shipped grounding (no refusal, as `pgmr generate --resolve`) and scored with
Query EM against the gold query (pgmr.experiments.rerank_fit.draft_outcomes); the ensemble's verifier, when it
has one, gives each draft its signal. The weights are fitted on the validation questions after the first 600:
the first 600 are where the seq2seq default's post-generation rules were tuned, so they flatter it. Reported
(fit.json): each member alone, the oracle (any draft right), and the reranker's choice, on the first 600
(fitted on the rest) and on the rest by two-fold cross-validation.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.experiments.rerank_fit import NothingToFit, accuracy, chooser, member_figures, report
from pgmr.generators.ensemble import RERANKER_FILE
from pgmr.jsonl import atomic_write_text
from pgmr.pipeline.rerank import FEATURES, Reranker

if TYPE_CHECKING:
    from pgmr.resolver import ResolverConfig

TUNED_ON = 600  # validation questions the seq2seq post-generation rules were tuned on
SIGNALS_FILE = "drafts.signals.json"
FIT_FILE = "fit.json"


class RerankFitError(ValueError):
    """Drafts that cannot be fitted on: not `pgmr generate ENSEMBLE` rows, not validation questions, or no
    question where one draft is right and another wrong."""


@dataclass(frozen=True)
class RerankFit:
    """The fitted reranker (with its provenance) and the validation figures that describe it."""

    reranker: Reranker
    figures: dict[str, Any]


def validation_outcomes(
    drafts_path: Path,
    data_dir: Path,
    memory: Any,
    ensemble: Path,
    also: Sequence[str] = (),
    resolver: ResolverConfig | None = None,
) -> list[dict[str, Any]]:
    """Per question of `drafts_path` (`pgmr generate ENSEMBLE lcquad2-validation` rows): each draft's source,
    signals (the ensemble's verifier's among them, when it has one) and whether it is right (Query EM), each
    draft resolved against `memory` (a pgmr.memory.Memory) with `resolver` (default: `ResolverConfig()`, refusal
    off, as the pipeline resolves drafts before it refuses)."""
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.rerank_fit import draft_outcomes
    from pgmr.generators.ensemble import Draft
    from pgmr.generators.verifier import VERIFIER_DIR, Verifier
    from pgmr.jsonl import read_jsonl
    from pgmr.pipeline import StageConfig
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    gold = {r.id: r for r in split_train_validation(load_named("lcquad2-train", data_dir).records)[1]}
    for name in also:
        if name not in ("qald10-validation", "lcquad2-validation", "plain-dev"):
            raise RerankFitError(f"--also {name!r}: only validation sets may fit a reranker")
        gold.update({r.id: r for r in load_named(name, data_dir).records})
    rows = list(read_jsonl(drafts_path))
    if not rows or any("drafts" not in r for r in rows):
        raise RerankFitError(
            f"{drafts_path}: expected `pgmr generate ENSEMBLE ...` rows with a 'drafts' list"
        )
    stages = StageConfig(GroundingConfig(), resolver=resolver or ResolverConfig())
    drafts = [
        tuple(Draft(d["source"], d["text"], d.get("confidence") or {}) for d in r["drafts"]) for r in rows
    ]
    verifier_dir = ensemble / VERIFIER_DIR
    try:
        return draft_outcomes(
            [str(r["id"]) for r in rows],
            [r["question"] for r in rows],
            drafts,
            gold,
            Resolver(memory, stages.resolver),
            stages,
            Verifier.load(verifier_dir) if verifier_dir.is_dir() else None,
        )
    except ValueError as exc:  # rows that are not validation questions
        raise RerankFitError(f"{drafts_path}: {exc}") from None


def _unfitted(questions: list[dict[str, Any]], members: list[str], held_out: int) -> dict[str, Any]:
    """The figures without a fit: each member alone and the oracle, and zero weights (every draft scores the
    same, so the first member's resolved draft wins, as `best_draft` breaks ties)."""
    zero = {m: dict.fromkeys(("bias", *FEATURES), 0.0) for m in members}
    first, rest = questions[:held_out], questions[held_out:]
    figures: dict[str, Any] = {"questions": {"first": len(first), "rest": len(rest)}, "unfitted": True}
    for name, part in (("first", first), ("rest", rest)):
        if part:
            figures[name] = {
                **member_figures(part, members),
                "first resolved draft (unfitted)": accuracy(part, chooser(Reranker(zero))),
            }
    figures["reranker"] = zero
    return figures


def fit_reranker(
    questions: list[dict[str, Any]],
    members: list[str],
    *,
    l2: float = 1.0,
    held_out: int = TUNED_ON,
    allow_unfitted: bool = False,
    provenance: dict[str, Any] | None = None,
) -> RerankFit:
    """The reranker fitted on the questions after the first `held_out`. With `allow_unfitted`, questions where
    no draft is right while another is wrong (a tiny model's drafts) give zero weights instead of an error."""
    try:
        if len(questions) <= held_out:
            raise NothingToFit(f"{len(questions)} questions leave none after the first {held_out} to fit on")
        figures = report(questions, members, l2, held_out=held_out)
    except NothingToFit as exc:
        if not allow_unfitted:
            raise RerankFitError(str(exc)) from None
        figures = _unfitted(questions, members, held_out)
    rest = figures["questions"]["rest"]
    where = f"after the first {held_out} questions ({rest})" if held_out else f"({rest} questions)"
    reranker = Reranker(
        figures["reranker"],
        {
            "fitted_on": f"LC-QuAD 2.0 validation {where}"
            + ("; unfitted: no question had a right and a wrong draft" if figures.get("unfitted") else ""),
            "l2": l2,
            "validation": {k: figures[k] for k in ("first", "rest") if k in figures},
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            **(provenance or {}),
        },
    )
    return RerankFit(reranker, figures)


def write_fit(ensemble: Path, fit: RerankFit, out_dir: Path) -> tuple[Path, Path]:
    """`ensemble/reranker.json`, then `out_dir/fit.json` (written last: its presence means both are done)."""
    reranker_path = ensemble / RERANKER_FILE
    atomic_write_text(reranker_path, json.dumps(fit.reranker.to_json(), indent=1) + "\n")
    fit_path = out_dir / FIT_FILE
    atomic_write_text(fit_path, json.dumps(fit.figures, indent=1) + "\n")
    return reranker_path, fit_path


__all__ = [
    "FIT_FILE",
    "SIGNALS_FILE",
    "TUNED_ON",
    "RerankFit",
    "RerankFitError",
    "fit_reranker",
    "validation_outcomes",
    "write_fit",
]
