"""lcquad2-original: direct vs RAG vs PGMR (and rag-pgmr when given) on LC-QuAD 2.0 test, beside the paper's
Table 1 (T5-small direct and PGMR)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pgmr.experiments.common import (
    SYSTEMS_NOTE,
    ExperimentError,
    Workspace,
    carry_over,
    earlier_run,
    fmt_decoding,
    metrics_document,
    millions,
    needs_memory,
    report_header,
    run_system,
    system_notes,
    system_spec,
    systems_table,
    write_experiment,
)

NAME = "lcquad2-original"
TITLE = "LC-QuAD 2.0 test (original split): direct vs RAG vs PGMR"
DATASET = "lcquad2-test"
DEFAULT_SYSTEMS: tuple[str, ...] = ("direct", "rag", "pgmr")


def systems_to_run(models: Mapping[str, Any]) -> list[str]:
    """direct, rag, pgmr always (missing ones are reported); rag-pgmr only when --models names it."""
    return [*DEFAULT_SYSTEMS, *(["rag-pgmr"] if "rag-pgmr" in models else [])]


def run(ws: Workspace) -> dict[str, Any]:
    settings = ws.settings
    specs = [system_spec(name, settings.models.get(name)) for name in systems_to_run(settings.models)]
    records = ws.load_test(DATASET)
    if not records:
        raise ExperimentError(f"{DATASET} has no records")
    earlier = earlier_run(ws, NAME, same={"dataset": DATASET, "questions": len(records)})
    catalog = ws.catalog
    if needs_memory(specs):
        ws.memory  # noqa: B018 (load it now: a missing memory fails before any generation)
    systems: dict[str, dict[str, Any]] = {}
    for spec in specs:
        systems[spec.name] = run_system(ws, spec, records, experiment=NAME, dataset=DATASET, catalog=catalog)
    systems = carry_over(systems, earlier, reporter=ws.reporter)
    doc = metrics_document(
        ws, NAME, TITLE, settings={"dataset": DATASET, "questions": len(records)}, systems=systems
    )
    plots = _plot(ws, doc)
    doc["plots"] = plots
    write_experiment(ws, doc, report(doc))
    if not any(s.get("status") == "ok" for s in systems.values()):
        ws.reporter.warn("no system could be evaluated: every model is missing")
    return doc


def _plot(ws: Workspace, doc: Mapping[str, Any]) -> list[str]:
    from pgmr.experiments.plots import systems_bar_plot

    path = systems_bar_plot(doc["systems"], ws.out_dir / f"{NAME}.png", title=TITLE, reporter=ws.reporter)
    return [path.name] if path else []


def tables(doc: Mapping[str, Any]) -> str:
    systems = doc.get("systems", {})
    notes = system_notes(systems)
    return "\n".join([systems_table(systems), "", *([notes, ""] if notes else []), SYSTEMS_NOTE])


def report(doc: Mapping[str, Any]) -> str:
    parts: list[str] = report_header(doc)
    parts += [f"{doc['settings']['questions']} questions of {DATASET}.", "", tables(doc), ""]
    parts += _timings(doc.get("systems", {}))
    for plot in doc.get("plots", []):
        parts += [f"![{NAME}]({plot})", ""]
    parts += ["Per system: `<system>/predictions.jsonl` (scored rows), `metrics.json`, `report.md`.", ""]
    return "\n".join(parts)


def _timings(systems: Mapping[str, Mapping[str, Any]]) -> list[str]:
    rows: Sequence[str] = [
        f"- {name}: model `{entry.get('model')}` ({entry.get('preset')}, {millions(entry.get('parameters'))} "
        f"parameters, {entry.get('train_steps')} training steps); generation {entry.get('generation_seconds')} s"
        + (f", resolution {entry['resolution_seconds']} s" if "resolution_seconds" in entry else "")
        + (f"; decoding: {fmt_decoding(entry)}" if fmt_decoding(entry) else "")
        for name, entry in systems.items()
        if entry.get("status") == "ok"
    ]
    return ["Models:", "", *rows, ""] if rows else []
