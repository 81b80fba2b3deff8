"""Fit the refusal support model and choose the shipped threshold, on LC-QuAD 2.0 validation only.

Choosing the threshold for the shipped generator (what ships since 2026-12-03; the default is an ensemble, so
the choice must see every draft as `pgmr ask` resolves them):

    pgmr experiment refusal --split validation --models pgmr=models/pgmr-ensemble \
        --predictions artifacts/rerank/validation.drafts.jsonl
    .venv/bin/python scripts/fit_refusal.py --from-sweep artifacts/refusal-calibration/validation/metrics.json --write

Refitting the support model itself (every draft of every file is pooled: the shipped models are fitted on both
members' drafts of the ensemble; a file of one prediction per question gives one draft each):

    .venv/bin/python scripts/fit_refusal.py --label supported --predictions artifacts/rerank/validation.drafts.jsonl

The outputs are resolved (no refusal) against the full memory and against the entity-removed and
relation-removed memories (pgmr.experiments.unanswerable); every placeholder's signals and whether its best
candidate is a gold ID are written to <out>/placeholders.jsonl (reused with --rows). A logistic model per kind
is fitted on the placeholders of both unanswerable sets. Either way the threshold is chosen by `choose`: the
most recall on the weaker set among the thresholds meeting every target, else among those that keep
answerable refused <= 10% and the Query EM cost <= 3 points. Writes src/pgmr/resolver/calibration.json (with
--write) and <out>/fit.json.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmr.resolver.fitting import auc, fit_logistic
from pgmr.resolver.support import (
    FEATURES,
    NAMES_FILE,
    Calibration,
    LogisticModel,
    names_to_json,
    shipped_calibration,
)

CALIBRATION = Path(__file__).resolve().parents[1] / "src/pgmr/resolver/calibration.json"
NAMES = CALIBRATION.with_name(NAMES_FILE)
# Finer at the low end, where P(right) of a garbled label sits.
THRESHOLDS = sorted({*(round(0.0025 * i, 4) for i in range(40)), *(round(0.01 * i, 2) for i in range(101))})
MAX_EM_LOSS = 0.03


def collect(
    predictions: Path, data_dir: Path, memory_dir: Path | None, seed: int, verifier_dir: Path | None = None
) -> list[dict[str, Any]]:
    """Every draft of `predictions` (each member's, for an ensemble's drafts file; else the one prediction)
    resolved against the full and the two reduced memories: one row per draft and memory, with its source.
    With `verifier_dir` (a draft verifier, pgmr.generators.verifier), each row also has the verifier's logit
    for the resolved draft (`verifier`; None when it did not resolve): a question-level signal to measure."""
    from pgmr.config import default_memory_dir
    from pgmr.datasets import load_named
    from pgmr.evaluation.metrics import query_exact_match
    from pgmr.experiments.common import load_drafts, parse_outputs, resolve_parsed, shared_encoder
    from pgmr.experiments.unanswerable import VARIANTS, build_set, placeholder_rows
    from pgmr.memory import Memory, read_manifest
    from pgmr.query import IntermediateQueryError
    from pgmr.resolver import Resolution, Resolver

    records = list(load_named("lcquad2-validation", data_dir).records)
    drafts = {
        r.id: {d.source: d.text for d in ds}
        for r, ds in zip(records, load_drafts(predictions, records), strict=True)
    }
    sources = list(dict.fromkeys(source for texts in drafts.values() for source in texts))
    lacking = [qid for qid, texts in drafts.items() if set(texts) != set(sources)]
    if lacking:
        raise SystemExit(
            f"{predictions}: not every question has a draft of each of {sources} (e.g. {lacking[0]})"
        )
    path = memory_dir or default_memory_dir()
    full = Memory.load(path, encoder=shared_encoder(read_manifest(path).encoder))
    sets: list[tuple[str, Any, list[Any], list[bool] | None]] = [("full", full, records, None)]
    for variant in VARIANTS:
        s = build_set(variant, records, full, seed)
        print(f"{variant}: {s.summary()}", file=sys.stderr)
        sets.append((variant, s.memory, list(s.records), list(s.answerable)))
    verifier = verbalize = None
    if verifier_dir is not None:
        from pgmr.generators.verifier import Verifier, memory_describer

        verifier = Verifier.load(verifier_dir)
        # The full memory's labels: a reduced memory resolves to a subset of its rows, labelled the same.
        verbalize = verifier.describe_with(memory_describer(full))
    rows: list[dict[str, Any]] = []
    for source in sources:
        for name, memory, recs, answerable in sets:
            resolver = Resolver(memory)
            questions = [r.question for r in recs]
            outputs = [drafts[r.id][source] for r in recs]
            parsed = parse_outputs(outputs, questions, known=resolver.knows)
            results = resolve_parsed(resolver, parsed, questions, label=f"resolving {source} ({name})")
            placeholders = placeholder_rows(results, recs, answerable)
            logits: dict[int, float] = {}
            if verifier is not None and verbalize is not None:
                texts = {
                    i: verbalize(res.sparql) for i, res in enumerate(results) if isinstance(res, Resolution)
                }
                scored = [i for i, t in texts.items() if t is not None]
                found = verifier.score([questions[i] for i in scored], [texts[i] or "" for i in scored])
                logits = dict(zip(scored, found, strict=True))
            for i, (result, record) in enumerate(zip(results, recs, strict=True)):
                em = isinstance(result, Resolution) and query_exact_match(result.sparql, record.sparql)
                mine = [p for p in placeholders if p["question"] == i]
                rows.append(
                    {
                        "set": name,
                        "id": record.id,
                        "source": source,
                        "parsed": not isinstance(result, IntermediateQueryError),
                        "answerable": True if answerable is None else answerable[i],
                        "query_em": bool(em),
                        "placeholders": [{k: p[k] for k in ("kind", "correct", "features")} for p in mine],
                        **({"verifier": logits.get(i)} if verifier is not None else {}),
                    }
                )
    return rows


def question_confidence(row: dict[str, Any], models: dict[str, LogisticModel]) -> float | None:
    if not row["parsed"]:
        return None
    values = [
        models[p["kind"]].probability(p["features"]) for p in row["placeholders"] if p["kind"] in models
    ]
    return min(values, default=1.0)


def evaluate(rows: list[dict[str, Any]], models: dict[str, LogisticModel], t: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name in ("entity-removed", "relation-removed"):
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
            / n_ans,
        }
    full = [r for r in rows if r["set"] == "full"]
    conf = [question_confidence(r, models) for r in full]
    em_off = sum(r["query_em"] for r in full) / len(full)
    em_on = sum(r["query_em"] and c is not None and c >= t for r, c in zip(full, conf, strict=True)) / len(
        full
    )
    out["full"] = {"query_em_off": em_off, "query_em_on": em_on, "loss": em_off - em_on}
    return out


def meets(point: dict[str, Any]) -> bool:
    for name in ("entity-removed", "relation-removed"):
        p = point[name]
        if (
            p["precision"] is None
            or p["precision"] < 0.9
            or p["recall"] < 0.8
            or p["answerable_refused"] > 0.1
        ):
            return False
    return point["full"]["loss"] <= MAX_EM_LOSS


def choose(curve: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The thresholds meeting every target, and the one to ship: of those, the one with the most recall on the
    weaker set (the lower threshold on a tie); when none meets them, the one that refuses most while keeping
    answerable refused <= 10% on both sets and the Query EM cost <= 3 points (marked "fallback")."""
    ok = [p for p in curve if meets(p)]

    def recall(p: dict[str, Any]) -> tuple[float, float]:
        return min(p[v]["recall"] for v in ("entity-removed", "relation-removed")), -p["threshold"]

    if ok:
        return ok, max(ok, key=recall)
    safe = [
        p
        for p in curve
        if p["full"]["loss"] <= MAX_EM_LOSS
        and all(p[v]["answerable_refused"] <= 0.1 for v in ("entity-removed", "relation-removed"))
    ]
    return ok, {**max(safe, key=recall), "fallback": True}


def print_curve(curve: list[dict[str, Any]]) -> None:
    for p in curve[::5]:
        e, r, f = p["entity-removed"], p["relation-removed"], p["full"]
        print(
            f"t={p['threshold']:.2f} ent P/R/lost {e['precision'] or math.nan:.3f}/{e['recall']:.3f}/"
            f"{e['answerable_refused']:.3f} rel {r['precision'] or math.nan:.3f}/{r['recall']:.3f}/"
            f"{r['answerable_refused']:.3f} EM off/on {f['query_em_off']:.3f}/{f['query_em_on']:.3f}"
        )


def from_sweep(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The curve of a `pgmr experiment refusal --split validation` run (its metrics.json) in this script's
    shape. That run resolves every draft of the shipped generator (an ensemble's members included) with the
    shipped support models and keeps the reranker's best draft that reaches the threshold, as the pipeline
    does."""
    full = {p["threshold"]: p for p in doc["answerable"]["curve"]}
    off = doc["answerable"]["query_em_off"]
    variants = {name: {p["threshold"]: p for p in v["curve"]} for name, v in doc["variants"].items()}
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


def main_from_sweep(path: Path, write: bool) -> int:
    """Only the threshold, for the shipped support models, chosen on a validation run of the experiment."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    dataset = str(doc.get("settings", {}).get("dataset"))
    if "validation" not in dataset:
        raise SystemExit(f"{path} is a run on {dataset}: the threshold is chosen on validation only")
    curve = from_sweep(doc)
    ok, best = choose(curve)
    print_curve(curve)
    print("meeting:", [p["threshold"] for p in ok], "chosen:", json.dumps(best))
    if write:
        shipped = shipped_calibration()
        source = doc.get("source", {})
        provenance = {
            **shipped.provenance,
            "threshold_chosen_on": {
                "run": str(path),
                "dataset": dataset,
                "questions": doc["settings"]["questions"],
                "generator": source.get("model") or source.get("reranker"),
                "predictions": source.get("predictions"),
                "validation": {k: v for k, v in best.items() if k != "threshold"},
                "meeting": [p["threshold"] for p in ok],
                "command": "python " + " ".join(sys.argv),
                "chosen_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
        }
        calibration = Calibration(shipped.models, best["threshold"], provenance, shipped.names)
        CALIBRATION.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
        print(f"wrote {CALIBRATION} (threshold {best['threshold']}; the support models unchanged)")
    return 0


def write_names(data_dir: Path) -> int:
    """The names the shipped generator was trained to write: every placeholder label of its training targets
    (LC-QuAD 2.0 train without the validation carve, converted as `pgmr train` converts it), normalized.
    Written beside the calibration, which then names the file (the support models are left as they are)."""
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.query import parse
    from pgmr.resolver.ranking import normalize_label

    train, _ = split_train_validation(load_named("lcquad2-train", data_dir).records)
    names: dict[str, set[str]] = {"entity": set(), "relation": set()}
    summary = ConversionSummary()
    for record in convert_records(train, LabelCatalog.from_data_dir(data_dir), summary):
        for placeholder in parse(record.intermediate).placeholders:
            names[placeholder.kind].add(normalize_label(placeholder.label))
    frozen = {kind: frozenset(v) for kind, v in names.items()}
    provenance = {
        "what": "normalized placeholder labels of the training targets of the shipped generator",
        "dataset": "lcquad2-train without the validation carve (pgmr.datasets.splits)",
        "records": summary.converted,
        "command": "python " + " ".join(sys.argv),
    }
    NAMES.write_text(json.dumps(names_to_json(frozen, provenance), ensure_ascii=False, indent=0) + "\n")
    shipped = shipped_calibration()
    calibration = Calibration(shipped.models, shipped.threshold, shipped.provenance, frozen)
    CALIBRATION.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
    print(f"wrote {NAMES}: " + ", ".join(f"{len(v)} {k} names" for k, v in frozen.items()))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--predictions",
        type=Path,
        nargs="+",
        help="drafts files (`pgmr generate` of an ensemble: every member's draft) or files of one prediction per "
        "question; every draft of every file is pooled",
    )
    ap.add_argument(
        "--generator", default="models/pgmr-ensemble", help="what wrote the predictions (provenance)"
    )
    ap.add_argument("--rows", type=Path, help="placeholders.jsonl of an earlier run (skips resolution)")
    ap.add_argument(
        "--verifier",
        type=Path,
        help="a draft verifier (e.g. models/pgmr-ensemble/verifier): each row also gets its logit for the "
        "resolved draft, for bench/refusal_models.py --verifier-signal (not a signal of the shipped models)",
    )
    ap.add_argument("--data-dir", type=Path, default=Path("../shared/data"))
    ap.add_argument("--memory", type=Path)
    ap.add_argument("--out", type=Path, default=Path("artifacts/refusal-calibration"))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--l2", type=float, default=1.0)
    ap.add_argument("--features", default=",".join(FEATURES))
    ap.add_argument("--label", choices=("correct", "supported"), default="correct")
    ap.add_argument("--write", action="store_true", help=f"write {CALIBRATION.name} into the package")
    ap.add_argument(
        "--from-sweep",
        type=Path,
        help="choose only the threshold, for the shipped support models, from the metrics.json of "
        "`pgmr experiment refusal --split validation` (every draft of the shipped generator, as ask resolves them)",
    )
    ap.add_argument(
        "--write-names",
        action="store_true",
        help=f"write {NAMES_FILE} (the generator's training names, the named_absent signal) and exit",
    )
    args = ap.parse_args()
    if args.write_names:
        return write_names(args.data_dir)
    if args.from_sweep is not None:
        return main_from_sweep(args.from_sweep, args.write)
    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "placeholders.jsonl"
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines()]
    else:
        if args.predictions is None:
            ap.error("--predictions or --rows")
        rows = [
            row
            for path in args.predictions
            for row in collect(path, args.data_dir, args.memory, args.seed, args.verifier)
        ]
        rows_path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    names = [n for n in args.features.split(",") if n]
    removed_kind = {"entity-removed": "entity", "relation-removed": "relation"}
    train = [
        {
            **p,
            # "supported": the memory holds the placeholder's target (the question is answerable, or its kind
            # lost nothing) or the best candidate is right anyway; "correct": the best candidate is a gold ID.
            "label": p["correct"]
            if args.label == "correct"
            else p["correct"] or r["answerable"] or p["kind"] != removed_kind[r["set"]],
        }
        for r in rows
        if r["set"] != "full"
        for p in r["placeholders"]
    ]
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
        model = fit_logistic([p["features"] for p in mine], labels, names, l2=args.l2)
        models[kind] = model
        report["models"][kind] = {
            **model.to_json(),
            "auc": auc([model.probability(p["features"]) for p in mine], labels),
        }
    curve = [{"threshold": t, **evaluate(rows, models, t)} for t in THRESHOLDS]
    ok, best = choose(curve)
    report.update({"curve": curve, "meeting": [p["threshold"] for p in ok], "chosen": best})
    (args.out / "fit.json").write_text(json.dumps(report, indent=1))
    for kind, sep in report["separability"].items():
        aucs = ", ".join(f"{n} {v:.3f}" for n, v in sep["auc"].items() if v is not None)
        print(f"{kind}: {sep['placeholders']} placeholders, {sep['correct']} correct; AUC {aucs}")
        print(f"  fitted model AUC {report['models'][kind]['auc']:.3f}")
    print_curve(curve)
    print("meeting:", report["meeting"], "chosen:", json.dumps(best))
    if args.write and best is not None:
        calibration = Calibration(
            models,
            best["threshold"],
            {
                "fitted_on": "lcquad2-validation (LC-QuAD 2.0 train, carved: pgmr.datasets.splits)",
                "generator": args.generator,
                "predictions": [str(p) for p in args.predictions] if args.predictions else str(args.rows),
                # The drafts' sources the rows were resolved from (also when read back with --rows).
                "sources": sorted({str(r.get("source")) for r in rows if r.get("source")}),
                "seed": args.seed,
                "l2": args.l2,
                "label": args.label,
                "placeholders": {k: v["placeholders"] for k, v in report["separability"].items()},
                "validation": {k: v for k, v in best.items() if k != "threshold"},
                "command": "python " + " ".join(sys.argv),
                "fitted_at": datetime.now(UTC).isoformat(timespec="seconds"),
            },
            # The names the rows' named_absent signal was computed with.
            shipped_calibration().names,
        )
        CALIBRATION.write_text(json.dumps(calibration.to_json(), indent=1) + "\n")
        print(f"wrote {CALIBRATION}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
