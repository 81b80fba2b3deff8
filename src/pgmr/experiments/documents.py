"""What every experiment writes and how it reads: the metrics document (metrics.json), report.md and the
markdown tables shared by the reports and `pgmr experiment results-doc`."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr import __version__
from pgmr.jsonl import atomic_write_text, write_json, write_jsonl

if TYPE_CHECKING:
    from pgmr.experiments.workspace import Workspace


# Sharma et al. (EACL Findings 2026), v1 Table 1, LC-QuAD 2.0 test, in percent: Query EM / BLEU / URI EM /
# URI hallucination. The paper reports no SQM.
PAPER_TABLE1: dict[str, dict[str, float]] = {
    "T5-small direct": {"query_em": 35.08, "bleu": 81.87, "uri_em": 38.44, "hallucination": 27.75},
    "T5-small PGMR": {"query_em": 74.23, "bleu": 92.76, "uri_em": 80.15, "hallucination": 0.38},
    "Llama 3.1 8B PGMR": {"query_em": 69.48, "bleu": 89.96, "uri_em": 78.76, "hallucination": 0.01},
    "GPT-4o PGMR": {"query_em": 43.53, "bleu": 73.53, "uri_em": 69.60, "hallucination": 0.0},
}
PAPER_COUNTERPART: dict[str, str] = {"direct": "T5-small direct", "pgmr": "T5-small PGMR"}


def metrics_document(
    ws: Workspace, name: str, title: str, *, settings: Mapping[str, Any], **payload: Any
) -> dict[str, Any]:
    return {
        "experiment": name,
        "title": title,
        "pgmr_version": __version__,
        "command": ws.settings.command,
        "started_at": ws.started_at,
        "wall_seconds": ws.wall_seconds(),
        "settings": {**ws.settings.to_json(), **settings},
        **payload,
    }


def write_experiment(ws: Workspace, doc: Mapping[str, Any], report: str) -> None:
    ws.out_dir.mkdir(parents=True, exist_ok=True)
    write_json(ws.out_dir / "metrics.json", doc)
    atomic_write_text(ws.out_dir / "report.md", report)


def write_rows(path: Path, rows: Sequence[Mapping[str, Any]]) -> None:
    write_jsonl(path, [dict(r) for r in rows])


def report_header(doc: Mapping[str, Any]) -> list[str]:
    limit = doc.get("settings", {}).get("limit")
    lines = [
        f"# {doc['title']}",
        "",
        f"Command: `{doc.get('command') or '(not recorded)'}`",
        "",
        f"Run {doc.get('started_at', '?')}, wall time {fmt_seconds(doc.get('wall_seconds'))}"
        + (f"; quick run on the first {limit} questions (`--limit {limit}`)" if limit else ""),
        "",
    ]
    return lines


def fmt_decoding(entry: Mapping[str, Any]) -> str:
    """ "greedy, copy bias 4" from an entry that recorded decoding_info; "" when it did not."""
    if "num_beams" not in entry:
        return ""
    beams = int(entry["num_beams"])
    text = "greedy" if beams == 1 else f"beam search ({beams})"
    entity, relation = entry.get("copy_bias") or 0.0, entry.get("relation_copy_bias") or 0.0
    if not entity and not relation:
        return f"{text}, no copy bias"
    return f"{text}, copy bias {entity:g} (entities) / {relation:g} (relations)"


def md_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, left: Collection[int] = (0,)) -> str:
    """A markdown table; columns in `left` (by position) are left-aligned, the others (numbers) right."""

    def cell(value: Any) -> str:
        return str(value).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in header) + " |"]
    lines.append("|" + "|".join("---" if i in left else "---:" for i in range(len(header))) + "|")
    lines.extend("| " + " | ".join(cell(c) for c in row) + " |" for row in rows)
    return "\n".join(lines)


def pct(value: Any, digits: int = 2) -> str:
    """A rate in [0, 1] as a percentage number (the paper's scale), '-' when absent."""
    return "-" if value is None else f"{100 * float(value):.{digits}f}"


def num(value: Any, digits: int = 2) -> str:
    return "-" if value is None else f"{float(value):.{digits}f}"


def millions(value: Any) -> str:
    return "?" if not value else f"{value / 1e6:.1f}M"


def fmt_seconds(value: Any) -> str:
    if value is None:
        return "?"
    seconds = float(value)
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


# Columns of a systems table: (key in `overall`, header, kind).
SYSTEM_COLUMNS: tuple[tuple[str, str, str], ...] = (
    ("query_em", "Query EM", "rate"),
    ("sqm", "SQM", "rate"),
    ("bleu", "BLEU", "bleu"),
    ("uri_em", "URI EM", "rate"),
    ("hallucination_rate_catalog", "halluc. (unknown IDs)", "rate"),
    ("hallucination_rate_gold", "halluc. (IDs not in gold)", "rate"),
    ("valid_rate", "valid", "rate"),
    ("invalid_rate", "invalid", "rate"),
    ("refusal_rate", "refused", "rate"),
)


def systems_table(
    systems: Mapping[str, Mapping[str, Any]],
    *,
    paper: bool = True,
    extra: Sequence[tuple[str, str, str]] = (),
) -> str:
    """One row per system (and, with `paper`, the paper's row for its counterpart right under it)."""
    columns = (*SYSTEM_COLUMNS, *extra)
    header = ["system", "n", *(h for _, h, _ in columns)]
    rows: list[list[str]] = []
    for name, entry in systems.items():
        status_ = entry.get("status")
        if status_ != "ok":
            rows.append([name, "-", f"{status_} (see below)", *("" for _ in columns[1:])])
        else:
            overall = entry.get("overall", {})
            cells = [
                num(overall.get(key)) if kind == "bleu" else pct(overall.get(key)) for key, _, kind in columns
            ]
            rows.append([f"{name} ({run_label(entry)})", str(overall.get("n", "-")), *cells])
        counterpart = PAPER_COUNTERPART.get(name)
        if paper and counterpart:
            ref = PAPER_TABLE1[counterpart]
            cells = []
            for key, _, _ in columns:
                if key == "hallucination_rate_catalog":
                    cells.append(f"{ref['hallucination']:.2f}")
                elif key in ref:
                    cells.append(f"{ref[key]:.2f}")
                else:
                    cells.append("-")
            rows.append([f"{counterpart} (paper)", "-", *cells])
    return md_table(header, rows)


def run_label(entry: Mapping[str, Any]) -> str:
    """A row's label: 'this run', or 'run <when>' for a result kept from an earlier run."""
    carried = entry.get("carried_from")
    if not carried:
        return "this run"
    return f"run {str(carried.get('started_at') or '?')[:16].replace('T', ' ')}"


def system_notes(systems: Mapping[str, Mapping[str, Any]]) -> str:
    """Why a system has no numbers (the missing model and the command that makes it, or the note), and which
    rows were kept from an earlier run."""
    lines = []
    for name, entry in systems.items():
        carried = entry.get("carried_from")
        if carried:
            lines.append(
                f"- {name}: not re-run here; kept from the run of {carried.get('started_at')} "
                f"(`{carried.get('command') or 'command not recorded'}`)"
            )
        elif entry.get("status") == "missing":
            lines.append(
                f"- {name}: no model at `{entry.get('model')}`; make it with `{entry.get('train_command')}`"
            )
        elif entry.get("status") != "ok":
            lines.append(f"- {name}: {entry.get('status')}: {entry.get('note') or 'no details'}")
    return "\n".join(lines)


SYSTEMS_NOTE = (
    "Rates in percent; BLEU 0-100. `halluc. (unknown IDs)`: predicted IDs not in the label catalog (the memory "
    "files) over all predicted IDs, the counterpart of the paper's URI hallucination; `halluc. (IDs not in "
    "gold)`: predicted IDs absent from the gold query. Definitions: docs/metrics.md."
)


__all__ = [
    "PAPER_COUNTERPART",
    "PAPER_TABLE1",
    "SYSTEMS_NOTE",
    "SYSTEM_COLUMNS",
    "fmt_decoding",
    "fmt_seconds",
    "md_table",
    "metrics_document",
    "millions",
    "num",
    "pct",
    "report_header",
    "run_label",
    "system_notes",
    "systems_table",
    "write_experiment",
    "write_rows",
]
