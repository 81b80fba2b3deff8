"""The questions of `pgmr experiment ck25`: JSONL over one graph, with gold SPARQL and gold answers (CK25's
questions-dev.jsonl, or any set written the same way)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pgmr.experiments.settings import ExperimentError
from pgmr.jsonl import JsonlError, read_jsonl


@dataclass(frozen=True)
class GraphQuestion:
    id: str
    question: str
    sparql: str
    answers: tuple[str, ...]
    order_matters: bool


def load_questions(path: Path, limit: int | None = None) -> list[GraphQuestion]:
    """JSONL with `id`, `question`, `sparql`, `answers` (a list of values) and optionally
    `result_order_matters`. Raises ExperimentError naming the line of a bad record."""
    found: list[GraphQuestion] = []
    try:
        for n, record in enumerate(read_jsonl(path), 1):
            answers = record.get("answers")
            question, sparql = record.get("question"), record.get("sparql")
            if not isinstance(question, str) or not isinstance(sparql, str) or not isinstance(answers, list):
                raise ExperimentError(
                    f"{path}: record {n} needs question and sparql (text) and answers (a list)"
                )
            order = record.get("result_order_matters")
            found.append(
                GraphQuestion(
                    str(record.get("id", n)), question, sparql, tuple(str(a) for a in answers), order is True
                )
            )
    except (JsonlError, OSError) as exc:
        raise ExperimentError(f"cannot read the questions: {exc}") from None
    if not found:
        raise ExperimentError(f"{path} holds no question")
    return found[:limit] if limit else found


__all__ = ["GraphQuestion", "load_questions"]
