"""Training examples for the draft verifier (pgmr.generators.verifier) from an ensemble's resolved drafts of
training questions: `pgmr generate ENSEMBLE lcquad2-train-part --resolve` rows, which carry every member's
draft, its final SPARQL and the gold query.

Per question, each distinct verbalized final query is one example, right when it equals the gold query (Query
EM, as the evaluation scores it); when no draft is right, the gold query is added as the question's right
example. Verbalization makes a right draft and the gold query read the same, so the gold query is not told
apart by its writing. Optionally each question also gets wrong queries made from its gold query
(pgmr.experiments.gold_negatives: a relation swapped for a near neighbour, a triple turned round, an entity
swapped for a homonym).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pgmr.evaluation.metrics import query_exact_match
from pgmr.generators.verifier import Describe, VerifierExample, verbalize


class DraftRowsError(ValueError):
    """Rows that are not resolved drafts of questions with gold queries."""


# (question index, gold SPARQL, how many) -> (kind, SPARQL) wrong queries; pgmr.experiments.gold_negatives.
Negatives = Callable[[int, str, int], Sequence[tuple[str, str]]]


def verifier_examples(
    rows: Iterable[Mapping[str, Any]],
    describe: Describe,
    *,
    description_words: int = 6,
    negatives: Negatives | None = None,
    negatives_per_question: int = 0,
) -> tuple[list[VerifierExample], dict[str, int]]:
    """The examples of `rows`, and counts (questions, examples, right, questions with a wrong draft, questions
    whose right example is the gold query, negatives made from gold queries). With `negatives`, each question
    gets up to `negatives_per_question` of them, kept when they read differently from its drafts and are not
    Query-EM equal to the gold query."""
    examples: list[VerifierExample] = []
    counts = dict.fromkeys(
        ("questions", "examples", "right", "with_wrong_draft", "gold_added", "gold_negatives"), 0
    )
    for n, row in enumerate(rows, 1):
        question, gold, drafts = row.get("question"), row.get("gold"), row.get("drafts")
        if not isinstance(question, str) or not isinstance(gold, str) or not isinstance(drafts, list):
            raise DraftRowsError(
                f"row {n}: expected 'question', 'gold' and 'drafts' (`pgmr generate ENSEMBLE DATASET --resolve` "
                "on a dataset with gold queries)"
            )
        seen: dict[str, bool] = {}
        for draft in drafts:
            sparql = draft.get("sparql") if isinstance(draft, Mapping) else None
            if not sparql:
                continue
            text = verbalize(sparql, describe, description_words=description_words)
            if text is not None and text not in seen:
                seen[text] = bool(query_exact_match(sparql, gold))
        if not any(seen.values()):
            text = verbalize(gold, describe, description_words=description_words)
            if text is not None and text not in seen:
                seen[text] = True
                counts["gold_added"] += 1
        counts["questions"] += 1
        counts["with_wrong_draft"] += not all(seen.values())
        if negatives is not None and negatives_per_question > 0:
            for _, sparql in negatives(n - 1, gold, negatives_per_question):
                text = verbalize(sparql, describe, description_words=description_words)
                if text is not None and text not in seen and not query_exact_match(sparql, gold):
                    seen[text] = False
                    counts["gold_negatives"] += 1
        for text, right in seen.items():
            examples.append(VerifierExample(question, text, right))
            counts["right"] += right
    counts["examples"] = len(examples)
    return examples, counts


def resolved_sparql(
    pairs: Sequence[tuple[str, str]], resolver: Any, grounding: Any, *, advance: Any = None
) -> dict[tuple[str, str], str | None]:
    """Each distinct (question, draft text) of `pairs` resolved as `pgmr generate --resolve` resolves it (the
    pipeline's prepare stage with `resolver` and `grounding`): its final SPARQL, None when it did not resolve.
    What `pgmr ensemble verifier-drafts` and scripts/unknown_uri_verifier_drafts.py add to their rows."""
    from pgmr.pipeline.stages import prepare

    keys = list(dict.fromkeys(pairs))
    prepared = prepare(
        [q for q, _ in keys], [t for _, t in keys], "pgmr", resolver, grounding, advance=advance
    )
    return {
        k: (p.resolution.sparql if p.resolution is not None else None)
        for k, p in zip(keys, prepared, strict=True)
    }


__all__ = ["DraftRowsError", "Negatives", "resolved_sparql", "verifier_examples"]
