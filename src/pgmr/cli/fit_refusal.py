"""`pgmr experiment fit-refusal`: the refusal's threshold (and, from drafts, its support models) chosen on
LC-QuAD 2.0 validation (pgmr.experiments.refusal_fit)."""

from __future__ import annotations

import json
import shlex
import sys
from datetime import UTC, datetime
from pathlib import Path

import typer

from pgmr.cli.common import Settings, console, out, print_error
from pgmr.cli.memory import MEMORY_OPTION


def fit_refusal(
    ctx: typer.Context,
    from_sweep: Path | None = typer.Option(
        None,
        "--from-sweep",
        exists=True,
        dir_okay=False,
        help="Choose only the threshold, for the shipped support models, from the metrics.json of `pgmr "
        "experiment refusal --split validation` (every draft of the shipped generator, as ask resolves them)",
    ),
    predictions: list[Path] = typer.Option(
        [],
        "--predictions",
        exists=True,
        dir_okay=False,
        help="Refit the support models: drafts files (`pgmr generate` of an ensemble: every member's draft) or "
        "files of one prediction per question; every draft of every file is pooled (repeatable)",
    ),
    rows: Path | None = typer.Option(
        None,
        "--rows",
        exists=True,
        dir_okay=False,
        help="placeholders.jsonl of an earlier fit (skips resolving)",
    ),
    write: Path | None = typer.Option(
        None,
        "--write",
        help="The calibration file to write (the package's: src/pgmr/resolver/calibration.json); without it "
        "nothing but OUT/fit.json is written",
    ),
    write_names: bool = typer.Option(
        False,
        "--write-names",
        help="Write names.json beside --write (the names of the generator's training targets, the named_absent "
        "signal) and the calibration naming it, with the shipped models and threshold",
    ),
    generator: str = typer.Option(
        "models/pgmr-ensemble", help="What wrote the predictions (recorded in the provenance)"
    ),
    verifier: Path | None = typer.Option(
        None,
        "--verifier",
        exists=True,
        file_okay=False,
        help="A draft verifier: each row also gets its logit for the resolved draft (for "
        "bench/refusal_models.py --verifier-signal; not a signal of the shipped models)",
    ),
    memory_dir: Path | None = MEMORY_OPTION,
    out_dir: Path = typer.Option(
        Path("artifacts") / "refusal-calibration",
        "--out",
        "-o",
        help="Where fit.json and placeholders.jsonl go",
    ),
    seed: int = typer.Option(0, help="Seed of the removals that make the unanswerable sets"),
    l2: float = typer.Option(1.0, min=0.0),
    features: str = typer.Option("", help="Comma-separated signals of the models (default: all)"),
    label: str = typer.Option("correct", help="What a placeholder's model predicts: correct | supported"),
) -> None:
    """Choose the refusal threshold on validation (and refit the support models from drafts)."""
    from pgmr.experiments.refusal_fit import (
        RefusalFitError,
        curve_lines,
        threshold_from_sweep,
        write_calibration,
    )
    from pgmr.resolver.support import shipped_calibration

    settings: Settings = ctx.obj
    command = shlex.join(["pgmr", *sys.argv[1:]])
    modes = sum([from_sweep is not None, bool(predictions) or rows is not None, write_names])
    if modes != 1:
        print_error("give one of --from-sweep, --predictions (or --rows), --write-names")
        raise typer.Exit(2)
    if write_names:
        if write is None:
            print_error("--write-names writes beside --write CALIBRATION: give it")
            raise typer.Exit(2)
        _write_names(settings, write, command)
        return
    if from_sweep is not None:
        try:
            doc = json.loads(from_sweep.read_text(encoding="utf-8"))
            calibration, curve, ok, best = threshold_from_sweep(
                doc, str(from_sweep), shipped_calibration(), command=command
            )
        except (RefusalFitError, ValueError) as exc:
            print_error(f"{from_sweep}: {exc}")
            raise typer.Exit(2) from None
        for line in curve_lines(curve):
            console.print(line, highlight=False)
        out.print(f"meeting: {[p['threshold'] for p in ok]} chosen: {json.dumps(best)}", highlight=False)
        if write is not None:
            write_calibration(write, calibration)
            console.print(f"wrote {write} (threshold {calibration.threshold}; the support models unchanged)")
        return
    _refit(
        settings,
        predictions=predictions,
        rows_path=rows,
        write=write,
        generator=generator,
        verifier=verifier,
        memory_dir=memory_dir,
        out_dir=out_dir,
        seed=seed,
        l2=l2,
        features=features,
        label=label,
        command=command,
    )


def _write_names(settings: Settings, write: Path, command: str) -> None:
    from pgmr.experiments.refusal_fit import write_calibration
    from pgmr.experiments.refusal_rows import training_names
    from pgmr.jsonl import atomic_write_text
    from pgmr.resolver.support import NAMES_FILE, Calibration, names_to_json, shipped_calibration

    with console.status("converting LC-QuAD 2.0 train"):
        names, provenance = training_names(settings.data_dir)
    names_path = write.with_name(NAMES_FILE)
    text = json.dumps(names_to_json(names, {**provenance, "command": command}), ensure_ascii=False, indent=0)
    atomic_write_text(names_path, text + "\n")
    shipped = shipped_calibration()
    write_calibration(write, Calibration(shipped.models, shipped.threshold, shipped.provenance, names))
    console.print(
        f"wrote {names_path} and {write}: " + ", ".join(f"{len(v)} {k} names" for k, v in names.items())
    )


def _refit(
    settings: Settings,
    *,
    predictions: list[Path],
    rows_path: Path | None,
    write: Path | None,
    generator: str,
    verifier: Path | None,
    memory_dir: Path | None,
    out_dir: Path,
    seed: int,
    l2: float,
    features: str,
    label: str,
    command: str,
) -> None:
    from pgmr.experiments.common import ExperimentError
    from pgmr.experiments.refusal_fit import (
        RefusalFitError,
        curve_lines,
        fit_support_models,
        write_calibration,
    )
    from pgmr.experiments.refusal_rows import collect
    from pgmr.jsonl import atomic_write_text, read_jsonl, write_jsonl
    from pgmr.resolver.support import FEATURES, Calibration, shipped_calibration

    if label not in ("correct", "supported"):
        print_error(f"--label is correct or supported, got {label!r}")
        raise typer.Exit(2)
    names = [n for n in features.split(",") if n] or list(FEATURES)
    unknown = sorted(set(names) - set(FEATURES))
    if unknown:
        print_error(f"unknown signals {unknown}; the support signals are {list(FEATURES)}")
        raise typer.Exit(2)
    try:
        if rows_path is not None:
            rows = list(read_jsonl(rows_path))
        else:
            rows = [
                row
                for path in predictions
                for row in collect(
                    path, settings.data_dir, memory_dir, seed, verifier, note=lambda m: console.print(m)
                )
            ]
            write_jsonl(out_dir / "placeholders.jsonl", rows)
        models, report = fit_support_models(rows, names, label=label, l2=l2)
    except (ExperimentError, RefusalFitError, FileNotFoundError) as exc:
        print_error(exc)
        raise typer.Exit(2) from None
    atomic_write_text(out_dir / "fit.json", json.dumps(report, indent=1) + "\n")
    for kind, sep in report["separability"].items():
        aucs = ", ".join(f"{n} {v:.3f}" for n, v in sep["auc"].items() if v is not None)
        console.print(f"{kind}: {sep['placeholders']} placeholders, {sep['correct']} correct; AUC {aucs}")
        console.print(f"  fitted model AUC {report['models'][kind]['auc']:.3f}")
    for line in curve_lines(report["curve"]):
        console.print(line, highlight=False)
    best = report["chosen"]
    out.print(f"meeting: {report['meeting']} chosen: {json.dumps(best)}", highlight=False)
    if write is None:
        return
    calibration = Calibration(
        models,
        best["threshold"],
        {
            "fitted_on": "lcquad2-validation (LC-QuAD 2.0 train, carved: pgmr.datasets.splits)",
            "generator": generator,
            "predictions": [str(p) for p in predictions] if predictions else str(rows_path),
            # The drafts' sources the rows were resolved from (also when read back with --rows).
            "sources": sorted({str(r.get("source")) for r in rows if r.get("source")}),
            "seed": seed,
            "l2": l2,
            "label": label,
            "placeholders": {k: v["placeholders"] for k, v in report["separability"].items()},
            "validation": {k: v for k, v in best.items() if k != "threshold"},
            "command": command,
            "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
        # The names the rows' named_absent signal was computed with.
        shipped_calibration().names,
    )
    write_calibration(write, calibration)
    console.print(f"wrote {write}")
