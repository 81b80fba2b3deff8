"""The draft verifier's training rows: an ensemble's resolved drafts with its structured members' runners-up
added (`pgmr ensemble verifier-drafts`):

    pgmr generate ENSEMBLE lcquad2-train-part --batch-size 32 --resolve -o train.drafts.jsonl   # 11 min
    pgmr ensemble verifier-drafts ENSEMBLE train.drafts.jsonl -o train.nbest.jsonl             # 10 min
    pgmr train-verifier train.nbest.jsonl -o runs/verifier                                     # 53 min

Per question, each structured member's `+t2` and `+r2` drafts (pgmr.experiments.runners_up) are resolved as
`pgmr generate --resolve` resolves (the shipped grounding, no refusal) and appended to the row with their final
SPARQL. They are near neighbours of the members' own drafts (another template, a relation's runner-up), mostly
wrong: the examples that teach the verifier the distinctions the reranker's support signals cannot make. The
verifier shipped on 2026-12-05 was trained on these rows; docs/research-log.md, "2026-12-05 — The draft
verifier ships". Which members are structured comes from the ensemble's card.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pgmr.experiments.runners_up import runner_up_drafts
from pgmr.experiments.verifier_fit import DraftRowsError, resolved_sparql


@dataclass(frozen=True)
class VerifierDrafts:
    """The rows with the runners-up appended, and what making them took."""

    rows: list[dict[str, Any]]
    members: tuple[str, ...]  # the structured members whose runners-up were added
    differing: Mapping[str, int]  # per member, questions whose top frame is not its draft in the rows
    resolved: int  # distinct (question, draft) pairs resolved
    runners_up_seconds: float
    resolve_seconds: float


def with_runners_up(
    rows: Sequence[Mapping[str, Any]],
    members: Mapping[str, Path | str],
    resolver: Any,
    *,
    batch_size: int = 32,
) -> VerifierDrafts:
    """`rows` (`pgmr generate ENSEMBLE DATASET --resolve` output) with the runners-up of each of `members` (a
    structured member's name in the rows -> its model directory) appended to its question's drafts, each with
    the SPARQL `resolver` resolves it to (None when it does not resolve). Raises DraftRowsError for rows
    without drafts or without a member's draft."""
    from pgmr.resolver.grounding import GroundingConfig

    if not rows or any("drafts" not in r for r in rows):
        raise DraftRowsError("not `pgmr generate ENSEMBLE DATASET --resolve` output with drafts")
    if not members:
        raise DraftRowsError("the ensemble has no structured member: no runners-up to add")
    started = time.monotonic()
    try:
        extra, differ = runner_up_drafts(rows, members, batch_size=batch_size)
    except ValueError as exc:  # a row without one of the members' drafts
        raise DraftRowsError(str(exc)) from None
    runners_seconds = time.monotonic() - started
    started = time.monotonic()
    sparql = resolved_sparql(
        [(r["question"], d["text"]) for r in rows for d in extra[str(r["id"])]], resolver, GroundingConfig()
    )
    out = []
    for r in rows:
        more = [{**d, "sparql": sparql[(r["question"], d["text"])]} for d in extra[str(r["id"])]]
        out.append({**r, "drafts": [*r["drafts"], *more]})
    return VerifierDrafts(
        out,
        tuple(members),
        dict(differ),
        len(sparql),
        round(runners_seconds, 1),
        round(time.monotonic() - started, 1),
    )


__all__ = ["VerifierDrafts", "with_runners_up"]
