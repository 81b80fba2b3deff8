"""Scoring and recording one system, and results kept from an earlier run (`--keep-from`)."""

from __future__ import annotations

import json
from collections.abc import Container, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pgmr.datasets import QARecord
from pgmr.experiments.predict import predict
from pgmr.experiments.reporting import QUIET, Reporter
from pgmr.experiments.settings import ExperimentError
from pgmr.experiments.systems import SystemSpec, load_generator

if TYPE_CHECKING:
    from pgmr.evaluation.metrics import EvaluationResult
    from pgmr.experiments.workspace import Workspace
    from pgmr.resolver import Resolver


def score(
    rows: Sequence[Mapping[str, Any]],
    gold: Sequence[QARecord],
    *,
    catalog: Container[str] | None,
    store: Any = None,
    timeout: float | None = None,
    label: str = "scoring",
    reporter: Reporter = QUIET,
) -> EvaluationResult:
    from pgmr.evaluation.metrics import evaluate

    with reporter.progress(label, len(rows)) as advance:
        return evaluate(rows, gold, catalog=catalog, store=store, timeout=timeout, progress=advance)


def write_system(
    out_dir: Path,
    rows: Sequence[Mapping[str, Any]],
    result: EvaluationResult,
    *,
    command: str,
    inputs: Mapping[str, Any],
    title: str,
) -> None:
    """predictions.jsonl (scored rows), metrics.json, report.md and the standard exports (t2s-metrics.jsonl,
    qald.json, whose dataset id is the gold's name in `inputs`) of one system, as `pgmr eval` writes them."""
    from pgmr.evaluation.exports import write_exports
    from pgmr.evaluation.report import write_outputs

    write_outputs(out_dir, rows, result, command=command, inputs=inputs, title=title)
    write_exports(out_dir, rows, result, dataset_id=str(inputs.get("gold") or out_dir.name))


def system_result(result: EvaluationResult, **extra: Any) -> dict[str, Any]:
    return {
        "status": "ok",
        **extra,
        "overall": dict(result.overall),
        "by_outcome": {k: dict(v) for k, v in result.by_outcome.items()},
    }


def run_system(
    ws: Workspace,
    spec: SystemSpec,
    records: Sequence[QARecord],
    *,
    experiment: str,
    dataset: str,
    resolver: Resolver | None = None,
    store: Any = None,
    timeout: float | None = None,
    catalog: Container[str] | None = None,
) -> dict[str, Any]:
    """Generate, resolve (pgmr modes), score and write one system's outputs under out_dir/<name>/; a
    missing model gives its `missing` entry (with the train command) instead."""
    if spec.missing:
        ws.reporter.warn(
            f"{spec.name}: no model at {spec.requested}; reported as missing (make it with: {spec.how_to_make})"
        )
        return spec.describe()
    generator = load_generator(spec, ws.settings)
    rows, timings = predict(
        ws, generator, spec.mode, records, card=spec.card, resolver=resolver, label=spec.name
    )
    return score_system(
        ws,
        spec.name,
        rows,
        records,
        catalog=catalog,
        store=store,
        timeout=timeout,
        inputs={"experiment": experiment, "system": spec.name, "model": str(spec.model_dir), "gold": dataset},
        title=f"{experiment}: {spec.name} on {dataset}",
        **spec.describe(),
        **timings,
    )


def score_system(
    ws: Workspace,
    name: str,
    rows: Sequence[Mapping[str, Any]],
    records: Sequence[QARecord],
    *,
    catalog: Container[str] | None,
    store: Any,
    timeout: float | None,
    inputs: Mapping[str, Any],
    title: str,
    **extra: Any,
) -> dict[str, Any]:
    """Score one system's prediction rows, write its outputs under out_dir/<name>/ and give its entry of the
    metrics document (`extra` joins it)."""
    result = score(
        rows,
        records,
        catalog=catalog,
        store=store,
        timeout=timeout,
        label=f"scoring ({name})",
        reporter=ws.reporter,
    )
    write_system(ws.out_dir / name, rows, result, command=ws.settings.command, inputs=inputs, title=title)
    return system_result(result, **extra)


def earlier_run(ws: Workspace, experiment: str, *, same: Mapping[str, Any]) -> dict[str, Any] | None:
    """The metrics document `--keep-from` names (a metrics.json or the directory holding one); None without
    `--keep-from`. It must be a run of `experiment` that scored the same questions the same way: each of
    `same` (dataset, question count...) must equal its settings, or its rows would not be comparable. Read
    before any generation, so a bad path costs nothing."""
    path = ws.settings.keep_from
    if path is None:
        return None
    file = path / "metrics.json" if path.is_dir() else path
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ExperimentError(
            f"--keep-from {path}: cannot read an experiment's metrics.json ({exc})"
        ) from None
    if not isinstance(doc, dict) or not isinstance(doc.get("systems"), dict):
        raise ExperimentError(f"--keep-from {file}: not an experiment's metrics.json (no systems)")
    if doc.get("experiment") != experiment:
        raise ExperimentError(
            f"--keep-from {file} is a run of {doc.get('experiment')!r}, not of {experiment!r}"
        )
    before = doc.get("settings") or {}
    for key, value in same.items():
        if before.get(key) != value:
            raise ExperimentError(
                f"--keep-from: the earlier run ({doc.get('started_at')}) has {key}={before.get(key)!r}, "
                f"this run {key}={value!r}; its rows would not be comparable"
            )
    return doc


def carry_over(
    systems: Mapping[str, dict[str, Any]],
    earlier: Mapping[str, Any] | None,
    *,
    add_missing: bool = False,
    reporter: Reporter = QUIET,
) -> dict[str, dict[str, Any]]:
    """`systems` where each one this run could not evaluate (missing model, no chat server) but the earlier
    run did keeps the earlier result, marked `carried_from` with that run's time and command (the first run's,
    when it was itself carried). What this run evaluated is never replaced. With `add_missing`, systems the
    earlier run evaluated and this run did not try at all (an experiment run for some modes only) are kept
    too, first, in the earlier run's order."""
    if earlier is None:
        return dict(systems)
    before: Mapping[str, Any] = earlier.get("systems") or {}
    source = {"started_at": earlier.get("started_at"), "command": earlier.get("command")}
    names = [*(n for n in before if add_missing and n not in systems), *systems]
    out: dict[str, dict[str, Any]] = {}
    for name in names:
        entry = systems.get(name, {"status": "not run"})
        old = before.get(name)
        if entry.get("status") != "ok" and isinstance(old, dict) and old.get("status") == "ok":
            out[name] = {**old, "carried_from": old.get("carried_from") or source}
            reporter.warn(f"{name}: not evaluated in this run; kept from the run of {source['started_at']}")
        elif name in systems:
            out[name] = entry
    return out


__all__ = ["carry_over", "earlier_run", "run_system", "score", "system_result", "write_system"]
