"""The refusal's support models and threshold, fitted and chosen on LC-QuAD 2.0 validation only
(`pgmr experiment fit-refusal`).

Choosing the threshold for the shipped generator (the default is an ensemble, so the choice must see every
draft as `pgmr ask` resolves them):

    pgmr experiment refusal --split validation --models pgmr=models/pgmr-ensemble \
        --predictions validation.drafts.jsonl -o artifacts/refusal-calibration/validation
    pgmr experiment fit-refusal --from-sweep artifacts/refusal-calibration/validation/metrics.json \
        --write calibration.json

Refitting the support models themselves (pgmr.experiments.refusal_rows: every draft of every file resolved
against the full memory and the entity-removed and relation-removed ones; a logistic model per kind fitted on
the placeholders of both unanswerable sets):

    pgmr experiment fit-refusal --label supported --predictions validation.drafts.jsonl --write calibration.json

Either way the threshold is chosen by `choose`: the most recall on the weaker set among the thresholds meeting
every target, else among those that keep answerable refused <= 10% and the Query EM cost <= 3 points. The
package's own calibration is src/pgmr/resolver/calibration.json: pass that path to --write to ship a choice.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from pgmr.jsonl import atomic_write_text
from pgmr.resolver.fitting import auc, fit_logistic
from pgmr.resolver.support import FEATURES, NAMES_FILE, Calibration, LogisticModel

# Finer at the low end, where P(right) of a garbled label sits.
THRESHOLDS = sorted({*(round(0.0025 * i, 4) for i in range(40)), *(round(0.01 * i, 2) for i in range(101))})
MAX_EM_LOSS = 0.03
VARIANTS = ("entity-removed", "relation-removed")
# The issue #19 targets a threshold must meet on both unanswerable sets.
MIN_PRECISION, MIN_RECALL, MAX_ANSWERABLE_REFUSED = 0.9, 0.8, 0.1


class RefusalFitError(ValueError):
    """Input the threshold cannot be chosen from: a run on another split, or a curve without a safe point."""


def question_confidence(row: Mapping[str, Any], models: Mapping[str, LogisticModel]) -> float | None:
    if not row["parsed"]:
        return None
    values = [
        models[p["kind"]].probability(p["features"]) for p in row["placeholders"] if p["kind"] in models
    ]
    return min(values, default=1.0)


def evaluate(
    rows: Sequence[Mapping[str, Any]], models: Mapping[str, LogisticModel], t: float
) -> dict[str, Any]:
    """Refusal precision, recall and answerable refused on each unanswerable set, and the Query EM cost on the
    full memory, when questions whose weakest placeholder is below `t` are refused."""
    out: dict[str, Any] = {}
    for name in VARIANTS:
        part = [r for r in rows if r["set"] == name]
        conf = [question_confidence(r, models) for r in part]
        refused = [c is not None and c < t for c in conf]
        hits = sum(x and not r["answerable"] for x, r in zip(refused, part, strict=True))
        n_ref = sum(refused)
        n_un = sum(not r["answerable"] for r in part)
        n_ans = len(part) - n_un
        out[name] = {
            "precision": hits / n_ref if n_ref else None,
            "recall": hits / n_un if n_un else None,
            "answerable_refused": sum(x and r["answerable"] for x, r in zip(refused, part, strict=True))
            / max(1, n_ans),
        }
    full = [r for r in rows if r["set"] == "full"]
    conf = [question_confidence(r, models) for r in full]
    em_off = sum(r["query_em"] for r in full) / max(1, len(full))
    em_on = sum(r["query_em"] and c is not None and c >= t for r, c in zip(full, conf, strict=True)) / max(
        1, len(full)
    )
    out["full"] = {"query_em_off": em_off, "query_em_on": em_on, "loss": em_off - em_on}
    return out


def meets(point: Mapping[str, Any]) -> bool:
    for name in VARIANTS:
        p = point[name]
        if (
            p["precision"] is None
            or p["precision"] < MIN_PRECISION
            or p["recall"] is None
            or p["recall"] < MIN_RECALL
            or p["answerable_refused"] > MAX_ANSWERABLE_REFUSED
        ):
            return False
    return bool(point["full"]["loss"] <= MAX_EM_LOSS)


def choose(curve: Sequence[Mapping[str, Any]]) -> tuple[list[Mapping[str, Any]], dict[str, Any]]:
    """The thresholds meeting every target, and the one to ship: of those, the one with the most recall on the
    weaker set (the lower threshold on a tie); when none meets them, the one that refuses most while keeping
    answerable refused <= 10% on both sets and the Query EM cost <= 3 points (marked "fallback")."""
    ok = [p for p in curve if meets(p)]

    def recall(p: Mapping[str, Any]) -> tuple[float, float]:
        # A set without unanswerable questions (a tiny run) has no recall: it counts as none.
        return min(p[v]["recall"] or 0.0 for v in VARIANTS), -p["threshold"]

    if ok:
        best: Mapping[str, Any] = max(ok, key=recall)
        return ok, dict(best)
    safe = [
        p
        for p in curve
        if p["full"]["loss"] <= MAX_EM_LOSS
        and all(p[v]["answerable_refused"] <= MAX_ANSWERABLE_REFUSED for v in VARIANTS)
    ]
    if not safe:
        raise RefusalFitError(
            "no threshold keeps answerable refused <= 10% and the Query EM cost <= 3 points: nothing to choose"
        )
    fallback: Mapping[str, Any] = max(safe, key=recall)
    return ok, {**fallback, "fallback": True}


def curve_lines(curve: Sequence[Mapping[str, Any]], every: int = 5) -> list[str]:
    """Every `every`-th point of the curve, one line each, for a reader to see where the choice sits."""

    def fmt(value: float | None) -> str:
        return f"{math.nan if value is None else value:.3f}"

    lines = []
    for p in curve[::every]:
        e, r, f = p["entity-removed"], p["relation-removed"], p["full"]
        lines.append(
            f"t={p['threshold']:.2f} ent P/R/lost {fmt(e['precision'])}/{fmt(e['recall'])}/"
            f"{fmt(e['answerable_refused'])} rel {fmt(r['precision'])}/{fmt(r['recall'])}/"
            f"{fmt(r['answerable_refused'])} EM off/on {f['query_em_off']:.3f}/{f['query_em_on']:.3f}"
        )
    return lines


def from_sweep(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The curve of a `pgmr experiment refusal --split validation` run (its metrics.json) in `choose`'s shape.
    That run resolves every draft of the shipped generator (an ensemble's members included) with the shipped
    support models and keeps the reranker's best draft that reaches the threshold, as the pipeline does."""
    dataset = str(doc.get("settings", {}).get("dataset"))
    if "validation" not in dataset:
        raise RefusalFitError(f"a run on {dataset}: the threshold is chosen on validation only")
    try:
        full = {p["threshold"]: p for p in doc["answerable"]["curve"]}
        off = doc["answerable"]["query_em_off"]
        variants = {name: {p["threshold"]: p for p in v["curve"]} for name, v in doc["variants"].items()}
    except (KeyError, TypeError) as exc:
        raise RefusalFitError(f"not a `pgmr experiment refusal` metrics.json (no {exc})") from None
    curve = []
    for t in sorted(full):
        point: dict[str, Any] = {"threshold": t}
        for name, by_t in variants.items():
            point[name] = {
                "precision": by_t[t]["refusal_precision"],
                "recall": by_t[t]["refusal_recall"],
                "answerable_refused": by_t[t]["answerable_refused"],
            }
        on = full[t]["query_em"]
        point["full"] = {"query_em_off": off, "query_em_on": on, "loss": off - on}
        curve.append(point)
    return curve


def threshold_from_sweep(
    doc: Mapping[str, Any], run: str, base: Calibration, *, command: str
) -> tuple[Calibration, list[dict[str, Any]], list[Mapping[str, Any]], dict[str, Any]]:
    """`base`'s support models with the threshold chosen on a validation sweep (`run`: where `doc` was read):
    the calibration, the curve, the points meeting every target and the chosen one."""
    curve = from_sweep(doc)
    ok, best = choose(curve)
    source = doc.get("source", {})
    provenance = {
        **base.provenance,
        "threshold_chosen_on": {
            "run": run,
            "dataset": doc["settings"]["dataset"],
            "questions": doc["settings"].get("questions"),
            "generator": source.get("model") or source.get("reranker"),
            "predictions": source.get("predictions"),
            "validation": {k: v for k, v in best.items() if k != "threshold"},
            "meeting": [p["threshold"] for p in ok],
            "command": command,
            "chosen_at": datetime.now(UTC).isoformat(timespec="seconds"),
        },
    }
    return Calibration(base.models, best["threshold"], provenance, base.names), curve, ok, best


def support_labels(rows: Sequence[Mapping[str, Any]], label: str) -> list[dict[str, Any]]:
    """The placeholders of both unanswerable sets, each with its training label: "correct", the best
    candidate is a gold ID; "supported", the memory holds the placeholder's target (the question is
    answerable, or its kind lost nothing) or the best candidate is right anyway."""
    removed_kind = {"entity-removed": "entity", "relation-removed": "relation"}
    return [
        {
            **p,
            "label": p["correct"]
            if label == "correct"
            else p["correct"] or r["answerable"] or p["kind"] != removed_kind[r["set"]],
        }
        for r in rows
        if r["set"] != "full"
        for p in r["placeholders"]
    ]


def fit_support_models(
    rows: Sequence[Mapping[str, Any]], features: Sequence[str], *, label: str = "correct", l2: float = 1.0
) -> tuple[dict[str, LogisticModel], dict[str, Any]]:
    """A logistic model per kind on `rows` (pgmr.experiments.refusal_rows), and the report: each signal's
    separability (AUC), each model with its own AUC, the threshold curve and the chosen point."""
    train = support_labels(rows, label)
    report: dict[str, Any] = {"separability": {}, "models": {}}
    models: dict[str, LogisticModel] = {}
    for kind in ("entity", "relation"):
        mine = [p for p in train if p["kind"] == kind]
        labels = [p["label"] for p in mine]
        report["separability"][kind] = {
            "placeholders": len(mine),
            "correct": sum(labels),
            "auc": {n: auc([p["features"][n] for p in mine], labels) for n in FEATURES},
        }
        model = fit_logistic([p["features"] for p in mine], labels, list(features), l2=l2)
        models[kind] = model
        report["models"][kind] = {
            **model.to_json(),
            "auc": auc([model.probability(p["features"]) for p in mine], labels),
        }
    curve = [{"threshold": t, **evaluate(rows, models, t)} for t in THRESHOLDS]
    ok, best = choose(curve)
    report.update({"curve": curve, "meeting": [p["threshold"] for p in ok], "chosen": best})
    return models, report


def write_calibration(path: Path, calibration: Calibration) -> None:
    """The calibration file, and beside it the names file it names when none is there yet (the package's:
    the names of the shipped generator's training targets), so the pair reads back as one."""
    atomic_write_text(path, json.dumps(calibration.to_json(), indent=1) + "\n")
    names = path.with_name(NAMES_FILE)
    if calibration.names and not names.exists():
        packaged = resources.files("pgmr.resolver").joinpath(NAMES_FILE).read_text(encoding="utf-8")
        atomic_write_text(names, packaged)


__all__ = [
    "MAX_EM_LOSS",
    "THRESHOLDS",
    "RefusalFitError",
    "choose",
    "curve_lines",
    "evaluate",
    "fit_support_models",
    "from_sweep",
    "meets",
    "question_confidence",
    "support_labels",
    "threshold_from_sweep",
    "write_calibration",
]
