"""What `pgmr eval` writes: scored prediction rows, metrics.json and a markdown report (the CLI prints the
overall rows of `OVERALL_ROWS` as a table of its own)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pgmr.evaluation.metrics import PRIMARY_METRIC, EvaluationResult, RecordEvaluation
from pgmr.jsonl import atomic_write_text, write_json, write_jsonl

N_SAMPLE_ERRORS = 10

# (key in the aggregate, label, kind): kind "rate" prints as a percentage, "bleu" as 0-100, "count" as is.
OVERALL_ROWS: tuple[tuple[str, str, str], ...] = (
    ("n", "records", "count"),
    ("query_em", "Query EM (primary)", "rate"),
    ("sqm", "SQM", "rate"),
    ("bleu", "BLEU", "bleu"),
    ("uri_em", "URI EM", "rate"),
    ("hallucination_rate_catalog", "predicted IDs unknown to the catalog", "rate"),
    ("hallucination_rate_gold", "predicted IDs not in the gold query", "rate"),
    ("rows_with_unknown_ids", "rows with an unknown ID", "rate"),
    ("predicted_ids", "predicted IDs (denominator)", "count"),
    ("valid_rate", "valid SPARQL", "rate"),
    ("invalid_rate", "invalid", "rate"),
    ("refusal_rate", "refused", "rate"),
    ("sqm_fallbacks", "SQM fallbacks (rdflib parse failed)", "count"),
    ("answer_precision", "answer precision (macro)", "rate"),
    ("answer_recall", "answer recall (macro)", "rate"),
    ("answer_f1", "answer F1 (macro)", "rate"),
    ("answer_qald_f1", "answer F1 (QALD: F of macro P, R)", "rate"),
    ("answer_scored", "questions with answers scored", "count"),
    ("answer_gold_errors", "gold queries that failed (not scored)", "count"),
    ("answer_prediction_errors", "predictions the store failed on", "count"),
)
GROUP_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("n", "n", "count"),
    ("query_em", "Query EM", "rate"),
    ("sqm", "SQM", "rate"),
    ("bleu", "BLEU", "bleu"),
    ("uri_em", "URI EM", "rate"),
    ("hallucination_rate_catalog", "unknown IDs", "rate"),
    ("hallucination_rate_gold", "IDs not in gold", "rate"),
)


def fmt(value: Any, kind: str) -> str:
    if value is None:
        return "-"
    if kind == "rate":
        return f"{100 * value:.1f}%"
    if kind == "bleu":
        return f"{value:.2f}"
    return str(value)


def scored_rows(rows: Sequence[Mapping[str, Any]], result: EvaluationResult) -> list[dict[str, Any]]:
    """Each input row with its per-record metrics under "eval" (rows and records are in the same order)."""
    return [{**row, "eval": record.to_json()} for row, record in zip(rows, result.records, strict=True)]


def metrics_document(result: EvaluationResult, *, command: str, inputs: Mapping[str, Any]) -> dict[str, Any]:
    counts = {
        "records": len(result.records),
        "gold_without_prediction": result.gold_without_prediction,
        **{f"outcome_{k}": int(v["n"]) for k, v in result.by_outcome.items()},
    }
    return {
        "primary_metric": PRIMARY_METRIC,
        "primary_value": result.primary,
        "overall": dict(result.overall),
        "counts": counts,
        "by_outcome": {k: dict(v) for k, v in result.by_outcome.items()},
        "by_template": {k: dict(v) for k, v in result.by_template.items()},
        "command": command,
        "inputs": dict(inputs),
        "scales": "rates in [0, 1]; bleu in [0, 100]; definitions in docs/metrics.md",
    }


def _md_table(header: Sequence[str], rows: Sequence[Sequence[str]], align_right_from: int = 1) -> str:
    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" if i < align_right_from else "---:" for i in range(len(header))) + "|")
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def _group_table(groups: Mapping[str, Mapping[str, Any]], first: str, total: int) -> str:
    header = [
        first,
        *(label for _, label, _ in GROUP_COLUMNS[:1]),
        "share",
        *(label for _, label, _ in GROUP_COLUMNS[1:]),
    ]
    rows = []
    for name, agg in groups.items():
        cells = [fmt(agg.get(key), kind) for key, _, kind in GROUP_COLUMNS]
        rows.append([name, cells[0], fmt(agg["n"] / total if total else None, "rate"), *cells[1:]])
    return _md_table(header, rows)


def sample_errors(result: EvaluationResult, n: int = N_SAMPLE_ERRORS) -> list[RecordEvaluation]:
    """Up to n records without a Query EM, spread evenly over the file (not just the first ones)."""
    errors = [r for r in result.records if not r.query_em]
    if len(errors) <= n:
        return errors
    step = len(errors) / n
    return [errors[int(i * step)] for i in range(n)]


def _clip(text: str, limit: int = 400) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def markdown_report(
    result: EvaluationResult, rows: Sequence[Mapping[str, Any]], *, command: str, title: str
) -> str:
    overall = result.overall
    parts = [f"# {title}", "", f"Command: `{command}`", ""]
    parts += ["## Overall", ""]
    parts.append(
        _md_table(
            ["metric", "value"],
            [[label, fmt(overall.get(key), kind)] for key, label, kind in OVERALL_ROWS if key in overall],
        )
    )
    parts += [
        "",
        "Rates are shares of all records except the two hallucination rates, whose denominator is "
        "every distinct Wikidata ID of every predicted query (valid or not); definitions in "
        "docs/metrics.md.",
        "",
    ]
    if result.gold_without_prediction:
        parts += [f"{result.gold_without_prediction} gold records have no prediction and are not scored.", ""]
    parts += ["## By outcome", "", _group_table(result.by_outcome, "outcome", len(result.records)), ""]
    if result.by_template:
        parts += [
            "## By template",
            "",
            _group_table(result.by_template, "template_id", len(result.records)),
            "",
        ]
    errors = sample_errors(result)
    by_id = {str(row.get("id")): row for row in rows}
    parts += [f"## Sample errors ({len(errors)} of {sum(not r.query_em for r in result.records)})", ""]
    for record in errors:
        row = by_id.get(record.id, {})
        parts.append(f"### {record.id}: {record.outcome}")
        parts.append("")
        if isinstance(row.get("question"), str):
            parts.append(f"- question: {_clip(row['question'], 300)}")
        facts = [
            f"SQM {'yes' if record.sqm else 'no'}",
            f"URI EM {'yes' if record.uri_em else 'no'}",
            f"BLEU {record.bleu:.1f}",
        ]
        parts.append("- " + ", ".join(facts))
        if record.unknown_ids:
            parts.append(f"- IDs unknown to the catalog: {', '.join(record.unknown_ids)}")
        if record.ids_not_in_gold:
            parts.append(f"- IDs not in the gold query: {', '.join(record.ids_not_in_gold)}")
        if record.error:
            parts.append(f"- error: {_clip(record.error, 300)}")
        if record.answers is not None:
            a = record.answers
            parts.append(
                f"- answers: P={fmt(a.precision, 'rate')} R={fmt(a.recall, 'rate')} "
                f"F1={fmt(a.f1, 'rate')}" + (f" ({_clip(a.error, 200)})" if a.error else "")
            )
        predicted, label = record.predicted_sparql, "predicted query:"
        if predicted is None and isinstance(row.get("prediction"), str):
            predicted, label = row["prediction"], "model output (no final query):"
        parts += [
            "",
            label,
            "```",
            _clip(predicted or "(nothing)"),
            "```",
            "gold:",
            "```",
            _clip(record.gold_sparql),
            "```",
            "",
        ]
    return "\n".join(parts).rstrip() + "\n"


def write_outputs(
    out_dir: Path,
    rows: Sequence[Mapping[str, Any]],
    result: EvaluationResult,
    *,
    command: str,
    inputs: Mapping[str, Any],
    title: str,
) -> None:
    """predictions.jsonl, metrics.json and report.md in out_dir, each written atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_jsonl(out_dir / "predictions.jsonl", scored_rows(rows, result))
    write_json(out_dir / "metrics.json", metrics_document(result, command=command, inputs=inputs))
    atomic_write_text(out_dir / "report.md", markdown_report(result, rows, command=command, title=title))
