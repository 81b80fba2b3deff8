"""Would a nonlinear support model refuse better than the shipped logistic one? Out-of-fold on LC-QuAD 2.0
validation (issue #19, docs/research-log.md, "2026-12-05 — The recall side of refusal").

    pgmr experiment fit-refusal --label supported --predictions artifacts/rerank/validation.drafts.jsonl \
        --out artifacts/refusal-calibration        # writes placeholders.jsonl (one row per draft and memory)
    python bench/refusal_models.py --rows artifacts/refusal-calibration/placeholders.jsonl

Questions are split into 5 folds; each fold's placeholders are scored by models fitted on the other four (same
signals and the same "supported" target as `pgmr experiment fit-refusal`), so no question is scored by a model
that saw it. Per model: the refusal sweep as `pgmr ask` refuses (a question is refused when every draft has a placeholder
under the threshold) on the entity-removed and relation-removed sets, and its operating point: the most recall
on the weaker set while answerable refused stays <= 10% on both. Writes bench/results/refusal_models.json.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.ensemble import HistGradientBoostingClassifier

from _common import console, table, write_result
from pgmr.resolver.fitting import logistic_coefficients
from pgmr.resolver.support import FEATURES

SETS = ("entity-removed", "relation-removed")
REMOVED_KIND = {"entity-removed": "entity", "relation-removed": "relation"}
THRESHOLDS = [round(0.01 * i, 2) for i in range(101)]
FOLDS = 5

# (features, labels, feature names) -> scorer
Fit = Callable[[np.ndarray, np.ndarray, Sequence[str]], Callable[[np.ndarray], np.ndarray]]
VERIFIER = "verifier"  # the draft verifier's probability that the resolved draft is right (a row's signal)


def supported(row: dict[str, Any], placeholder: dict[str, Any]) -> bool:
    # As `pgmr experiment fit-refusal --label supported`: the memory still holds what this placeholder's kind
    # needs, or its best candidate is right anyway.
    return bool(
        placeholder["correct"] or row["answerable"] or placeholder["kind"] != REMOVED_KIND[row["set"]]
    )


def logistic(x: np.ndarray, y: np.ndarray, names: Sequence[str]) -> Callable[[np.ndarray], np.ndarray]:
    # The shipped fit (pgmr.resolver.fitting), over any signal names (LogisticModel knows only the shipped ones).
    coef, intercept, mean, scale = logistic_coefficients(
        [dict(zip(names, v, strict=True)) for v in x], list(y), list(names)
    )
    c, m, sc = np.array(coef), np.array(mean), np.array(scale)
    return lambda z: 1.0 / (1.0 + np.exp(-np.clip(intercept + ((z - m) / sc) @ c, -50, 50)))


def boosted(**params: Any) -> Fit:
    def fit(x: np.ndarray, y: np.ndarray, names: Sequence[str]) -> Callable[[np.ndarray], np.ndarray]:
        clf = HistGradientBoostingClassifier(random_state=0, **params).fit(x, y)
        return lambda z: clf.predict_proba(z)[:, 1]

    return fit


def verifier_probability(row: dict[str, Any]) -> float:
    logit = row.get(VERIFIER)
    if logit is None:
        return 0.0
    return float(1.0 / (1.0 + np.exp(-float(logit))))


def out_of_fold(
    rows: Sequence[dict[str, Any]], fit: Fit, seed: int, verifier_kinds: Sequence[str] = ()
) -> dict[tuple[int, int], float]:
    """(row index, placeholder index) -> support, each from a model that never saw the row's question.
    `verifier_kinds`: the placeholder kinds whose model also reads the row's verifier probability."""
    ids = sorted({r["id"] for r in rows})
    fold = dict(zip(ids, np.random.default_rng(seed).integers(0, FOLDS, len(ids)).tolist(), strict=True))
    scores: dict[tuple[int, int], float] = {}
    for kind in ("entity", "relation"):
        items = [
            (i, j, r, p)
            for i, r in enumerate(rows)
            for j, p in enumerate(r["placeholders"])
            if p["kind"] == kind
        ]
        names = [*FEATURES, *([VERIFIER] if kind in verifier_kinds else [])]
        x = np.array(
            [
                [p["features"][n] for n in FEATURES]
                + ([verifier_probability(r)] if kind in verifier_kinds else [])
                for _, _, r, p in items
            ],
            dtype=np.float64,
        )
        for f in range(FOLDS):
            held = np.array([fold[r["id"]] == f for _, _, r, _ in items])
            train = ~held & np.array([r["set"] != "full" for _, _, r, _ in items])
            y = np.array([supported(r, p) for _, _, r, p in items])
            predict = fit(x[train], y[train], names)
            for (i, j, _, _), s in zip(
                (it for it, h in zip(items, held, strict=True) if h), predict(x[held]), strict=True
            ):
                scores[(i, j)] = float(s)
    return scores


def sweep(rows: Sequence[dict[str, Any]], scores: dict[tuple[int, int], float]) -> list[dict[str, Any]]:
    # Per set and question, each draft's weakest support (-1 for an unparsable draft: never answered).
    weakest: dict[str, dict[str, list[tuple[float, bool]]]] = defaultdict(lambda: defaultdict(list))
    for i, r in enumerate(rows):
        w = min((scores[(i, j)] for j in range(len(r["placeholders"]))), default=1.0) if r["parsed"] else -1.0
        weakest[r["set"]][r["id"]].append((w, r["answerable"]))
    curve = []
    for t in THRESHOLDS:
        point: dict[str, Any] = {"threshold": t}
        for name in (*SETS, "full"):
            refused_un = refused_ans = unanswerable = answerable = 0
            for drafts in weakest[name].values():
                refused = all(w < t for w, _ in drafts)
                if drafts[0][1]:
                    answerable += 1
                    refused_ans += refused
                else:
                    unanswerable += 1
                    refused_un += refused
            point[name] = {
                "precision": refused_un / (refused_un + refused_ans) if refused_un + refused_ans else None,
                "recall": refused_un / unanswerable if unanswerable else None,
                "answerable_refused": refused_ans / answerable,
            }
        curve.append(point)
    return curve


def operating_point(curve: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    safe = [p for p in curve if all(p[s]["answerable_refused"] <= 0.1 for s in SETS)]
    return max(safe, key=lambda p: (min(p[s]["recall"] for s in SETS), -p["threshold"]), default=None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--rows", type=Path, required=True, help="`pgmr experiment fit-refusal`'s placeholders.jsonl"
    )
    ap.add_argument("--seed", type=int, default=0, help="of the fold assignment")
    ap.add_argument(
        "--verifier-signal",
        action="store_true",
        help="also the logistic and depth-3 models with the draft verifier's probability as one more signal "
        "(rows from pgmr experiment fit-refusal --verifier)",
    )
    args = ap.parse_args()
    rows = [json.loads(line) for line in args.rows.read_text(encoding="utf-8").splitlines()]
    depth3 = boosted(max_iter=100, learning_rate=0.1, max_depth=3)
    models: dict[str, tuple[Fit, tuple[str, ...]]] = {
        "logistic (shipped kind)": (logistic, ()),
        "boosted trees, depth 3": (depth3, ()),
        "boosted trees, 15 leaves": (
            boosted(max_iter=200, learning_rate=0.05, max_leaf_nodes=15, min_samples_leaf=40),
            (),
        ),
    }
    if args.verifier_signal:
        if not any(VERIFIER in r for r in rows):
            ap.error(
                f"{args.rows}: no verifier logits (write the rows with pgmr experiment fit-refusal --verifier)"
            )
        models |= {
            "logistic + verifier (entity placeholders)": (logistic, ("entity",)),
            "logistic + verifier (both kinds)": (logistic, ("entity", "relation")),
            "boosted trees, depth 3 + verifier (both kinds)": (depth3, ("entity", "relation")),
        }
    results = {}
    table_rows = []
    for name, (fit, kinds) in models.items():
        curve = sweep(rows, out_of_fold(rows, fit, args.seed, kinds))
        best = operating_point(curve)
        results[name] = {"curve": curve[::5], "operating_point": best}  # every 0.05 kept
        if best is None:
            table_rows.append([name, "-", "-", "-", "-"])
            continue
        table_rows.append(
            [
                name,
                f"{best['threshold']:.2f}",
                *(
                    f"{100 * best[s]['precision']:.1f} / {100 * best[s]['recall']:.1f} / "
                    f"{100 * best[s]['answerable_refused']:.1f}"
                    for s in SETS
                ),
                f"{100 * best['full']['answerable_refused']:.1f}",
            ]
        )
    console.print(
        table(
            "out-of-fold support models, validation: the most recall on the weaker set with answerable refused "
            "<= 10% on both (precision / recall / answerable refused, %)",
            ["support model", "threshold", *SETS, "full memory: refused"],
            table_rows,
        )
    )
    name = "refusal_models-verifier" if args.verifier_signal else "refusal_models"
    write_result(name, {"rows": str(args.rows), "folds": FOLDS, "seed": args.seed, **results})


if __name__ == "__main__":
    main()
