"""More drafts per question from an ensemble's structured members: each member's `+t2` (the frame of its second
most probable template) and `+r2` (its top frame with the least probable relation slot given its next property),
from the same forward pass as its own draft (pgmr.generators.structured.decoding.RunnersUp).

They are the draft verifier's extra wrong (and sometimes right) examples, near neighbours of the drafts it has
to tell apart (`pgmr ensemble verifier-drafts`, pgmr.experiments.verifier_drafts), and the n-best bench's
candidates (bench/nbest_drafts.py). Rows are `pgmr generate ENSEMBLE DATASET` output: {"id", "question", "drafts": [{"source",
"text", "confidence", ...}]}.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.generators.structured.decoding import Frame, RunnersUp
from pgmr.generators.structured.generator import StructuredGenerator

KINDS = ("t2", "r2")


def draft_row(source: str, frame: Frame) -> dict[str, Any]:
    """A frame as a draft of `pgmr generate`'s rows, with the confidences the reranker reads."""
    slots = [v.confidence for v in (*frame.entities, *frame.relations)]
    return {
        "source": source,
        "text": frame.query().to_text(),
        "confidence": {"template": frame.template_confidence, "slots": min(slots, default=1.0)},
    }


def runner_up_rows(source: str, own: Mapping[str, Any], runners: RunnersUp) -> list[dict[str, Any]]:
    """A member's `+t2` and `+r2` drafts; without a relation slot to swap, the member's own draft stands in for
    `+r2` (it resolves the same)."""
    swapped = runners.swapped_relation
    return [
        draft_row(f"{source}+t2", runners.second_template),
        draft_row(f"{source}+r2", swapped) if swapped else {**own, "source": f"{source}+r2"},
    ]


def runner_up_drafts(
    rows: Sequence[Mapping[str, Any]], members: Mapping[str, Path | str], *, batch_size: int = 32
) -> tuple[dict[str, list[dict[str, Any]]], Counter[str]]:
    """Per question id, each structured member's `+t2` and `+r2` drafts (`members`: the member's name in the
    rows -> its model directory); and per member how many of its top frames differ from its draft in the rows
    (batching moves near ties in bfloat16: generate with the same batch size, 32 by default)."""
    extra: dict[str, list[dict[str, Any]]] = defaultdict(list)
    differ: Counter[str] = Counter()
    for source, directory in members.items():
        found = StructuredGenerator.load(directory).runners_up(
            [r["question"] for r in rows], batch_size=batch_size
        )
        for row, runners in zip(rows, found, strict=True):
            own = next((d for d in row["drafts"] if d["source"] == source), None)
            if own is None:
                raise ValueError(f"question {row['id']}: no draft from member {source!r} in the rows")
            differ[source] += own["text"] != runners.top.query().to_text()
            extra[str(row["id"])].extend(runner_up_rows(source, own, runners))
    return extra, differ
