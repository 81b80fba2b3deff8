"""Refusal: make a sample of questions unanswerable by removing their gold entities from memory, sweep the
entity threshold, and report refusal precision/recall and the coverage/accuracy curve.

    python bench/refusal.py [--sample 2000] [--memory DIR]

A seeded sample of LC-QuAD 2.0 test queries is split in two halves; the gold entities of the first half are
removed from the memory. Queries of the second half whose entities all remain are the answerable ones (queries
that lost an entity through a shared one count as unanswerable). A query is refused when any entity
placeholder's best similarity is under the threshold. Writes bench/results/refusal.json and refusal.png.
"""

from __future__ import annotations

import argparse
import random

from _common import (
    RESULTS,
    console,
    converted_split,
    embedding_cache,
    prior_counts_for,
    resolve_all,
    setup,
    table,
    write_result,
)
from pgmr.evaluation.oracle import condition_query, oracle_cases
from pgmr.memory import Memory
from pgmr.resolver import Prior, Resolution, Resolver

THRESHOLDS = [round(0.30 + 0.01 * i, 2) for i in range(71)]


def sweep(best_sims, answerable, correct):  # type: ignore[no-untyped-def]
    rows = []
    n_unans = sum(not a for a in answerable)
    n_ans = sum(answerable)
    for t in THRESHOLDS:
        refused = [s < t for s in best_sims]
        tp = sum(r and not a for r, a in zip(refused, answerable, strict=True))
        ref = sum(refused)
        ans_refused = sum(r and a for r, a in zip(refused, answerable, strict=True))
        answered = [i for i, r in enumerate(refused) if not r]
        rows.append(
            {
                "threshold": t,
                "refusal_precision": tp / ref if ref else 1.0,
                "refusal_recall": tp / n_unans if n_unans else 0.0,
                "answerable_refused": ans_refused / n_ans if n_ans else 0.0,
                "coverage": len(answered) / len(best_sims),
                "answered_accuracy": sum(correct[i] for i in answered) / len(answered) if answered else 1.0,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--sample", type=int, default=2000)
    parser.add_argument("--conditions", default="label+description,label")
    args = parser.parse_args()

    data_dir, catalog, full = setup(args.data_dir, args.memory)
    records, _ = converted_split("test", data_dir, catalog)
    cases = [c for c in oracle_cases(records) if any(n.startswith("entity") for n, _ in c.gold)]
    rng = random.Random(0)
    sample = rng.sample(cases, min(args.sample, len(cases)))
    half = len(sample) // 2
    removed = {wid for c in sample[:half] for n, wid in c.gold if n.startswith("entity")}
    answerable = [not any(wid in removed for _, wid in c.gold) for c in sample]
    cache = embedding_cache(args.memory, full)
    ids = (full.entities.ids() - removed) | full.relations.ids()
    memory = Memory.build_in_memory(catalog, full.encoder, cache=cache, ids=set(ids), progress=False)
    resolver = Resolver(memory, prior=Prior(prior_counts_for("test", data_dir)))

    results = {}
    for cond in args.conditions.split(","):
        outcome = resolve_all(resolver, [condition_query(c, cond, catalog) for c in sample])
        best = [
            min(
                (e.best.similarity for e in r.evidence if e.placeholder.kind == "entity" and e.best),
                default=1.0,
            )
            for r in outcome
        ]
        correct = [
            isinstance(r, Resolution) and r.mapping_dict() == c.gold_dict()
            for r, c in zip(outcome, sample, strict=True)
        ]
        curve = sweep(best, answerable, correct)
        ok = [
            p
            for p in curve
            if p["refusal_precision"] >= 0.9 and p["refusal_recall"] >= 0.8 and p["answerable_refused"] <= 0.1
        ]
        results[cond] = {
            "curve": curve,
            "thresholds_meeting_target": [p["threshold"] for p in ok],
            "best": max(ok, key=lambda p: p["refusal_recall"]) if ok else None,
        }
        shown = [p for p in curve if round(p["threshold"] * 100) % 5 == 0]
        console.print(
            table(
                f"Refusal sweep ({cond}): {sum(not a for a in answerable)} unanswerable, {sum(answerable)} answerable",
                ["threshold", "precision", "recall", "answerable refused", "coverage", "answered accuracy"],
                [
                    [
                        f"{p['threshold']:.2f}",
                        p["refusal_precision"],
                        p["refusal_recall"],
                        p["answerable_refused"],
                        p["coverage"],
                        p["answered_accuracy"],
                    ]
                    for p in shown
                ],
            )
        )
        console.print(
            f"{cond}: thresholds meeting precision>=90%, recall>=80%, answerable refused<=10%: "
            f"{results[cond]['thresholds_meeting_target'] or 'none'}"
        )
    plot(results)
    write_result(
        "refusal",
        {
            "sample": len(sample),
            "unanswerable": sum(not a for a in answerable),
            "removed_entities": len(removed),
            "results": results,
        },
    )


def plot(results) -> None:  # type: ignore[no-untyped-def]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for cond, r in results.items():
        c = r["curve"]
        t = [p["threshold"] for p in c]
        axes[0].plot(t, [p["refusal_precision"] for p in c], label=f"precision ({cond})")
        axes[0].plot(t, [p["refusal_recall"] for p in c], "--", label=f"recall ({cond})")
        axes[0].plot(t, [p["answerable_refused"] for p in c], ":", label=f"answerable refused ({cond})")
        axes[1].plot([p["coverage"] for p in c], [p["answered_accuracy"] for p in c], marker=".", label=cond)
    axes[0].set_xlabel("entity similarity threshold")
    axes[0].set_title("Refusal precision / recall")
    axes[0].legend(fontsize=7)
    axes[1].set_xlabel("coverage (share answered)")
    axes[1].set_ylabel("accuracy of answered (all URIs right)")
    axes[1].set_title("Coverage vs accuracy")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    RESULTS.mkdir(parents=True, exist_ok=True)
    fig.savefig(RESULTS / "refusal.png", dpi=120)
    console.print(f"wrote {RESULTS / 'refusal.png'}")


if __name__ == "__main__":
    main()
