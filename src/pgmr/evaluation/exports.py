"""Standard exports of an evaluation, written beside metrics.json so that other tools can score the same run:

- `t2s-metrics.jsonl`: one `{"id", "golden", "generated", "order_matters"}` object per question, the input of
  t2s-metrics (Wimmics/t2s-metrics). `generated` is "" where the system gave no final query (a refusal, a pgmr
  row that did not parse): t2s-metrics reads the field as text and splits it, so null would stop it, while ""
  is an empty query that scores zero.
- `qald.json`: the questions in QALD JSON, the shape of the official QALD-10 file, for GERBIL QA. `answers` is
  `[SPARQL JSON results]` where the evaluation ran the generated query on a store (those results, not a second
  run), else `[]`: QALD readers expect the list, and an empty one is "no answer", which is what the system
  gave where nothing ran.

docs/metrics.md shows both for a real run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.evaluation.metrics import EvaluationResult, RecordEvaluation
from pgmr.jsonl import write_json, write_jsonl

T2S_METRICS_FILE = "t2s-metrics.jsonl"
QALD_FILE = "qald.json"
EXPORT_FILES = (T2S_METRICS_FILE, QALD_FILE)
# pgmr's loaders read the English question of a QALD file, and LC-QuAD 2.0 and CK25 are English only.
QUESTION_LANGUAGE = "en"


def _generated(record: RecordEvaluation) -> str:
    return record.predicted_sparql or ""


def _row_id(row: Mapping[str, Any], record: RecordEvaluation) -> Any:
    """The id as the prediction row spells it (QALD-10's are integers; `evaluate` compares them as text)."""
    value = row.get("id")
    return value if isinstance(value, str | int) and not isinstance(value, bool) else record.id


def t2s_metrics_rows(rows: Sequence[Mapping[str, Any]], result: EvaluationResult) -> list[dict[str, Any]]:
    """One t2s-metrics case per prediction row, in the rows' order."""
    return [
        {
            "id": _row_id(row, record),
            "golden": record.gold_sparql,
            "generated": _generated(record),
            "order_matters": record.order_matters,
        }
        for row, record in zip(rows, result.records, strict=True)
    ]


def _answers(record: RecordEvaluation) -> list[dict[str, Any]]:
    executed = record.answers.predicted_result if record.answers is not None else None
    return [dict(executed)] if executed is not None else []


def qald_document(
    rows: Sequence[Mapping[str, Any]], result: EvaluationResult, *, dataset_id: str
) -> dict[str, Any]:
    """The system's questions, final queries and (where executed) answers as QALD JSON."""
    questions = [
        {
            "id": _row_id(row, record),
            "question": [{"language": QUESTION_LANGUAGE, "string": record.question}],
            "query": {"sparql": _generated(record)},
            "answers": _answers(record),
        }
        for row, record in zip(rows, result.records, strict=True)
    ]
    return {"dataset": {"id": dataset_id}, "questions": questions}


def write_exports(
    out_dir: Path, rows: Sequence[Mapping[str, Any]], result: EvaluationResult, *, dataset_id: str
) -> tuple[Path, Path]:
    """t2s-metrics.jsonl and qald.json in out_dir, each written atomically; returns their paths."""
    t2s, qald = out_dir / T2S_METRICS_FILE, out_dir / QALD_FILE
    write_jsonl(t2s, t2s_metrics_rows(rows, result))
    write_json(qald, qald_document(rows, result, dataset_id=dataset_id))
    return t2s, qald


def answers_executed(result: EvaluationResult) -> bool:
    """Whether the evaluation ran the queries on a store, so that qald.json carries answers."""
    return any(record.answers is not None for record in result.records)


__all__ = [
    "EXPORT_FILES",
    "QALD_FILE",
    "QUESTION_LANGUAGE",
    "T2S_METRICS_FILE",
    "answers_executed",
    "qald_document",
    "t2s_metrics_rows",
    "write_exports",
]
