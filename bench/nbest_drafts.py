"""More drafts per question from the structured members: does the right query hide in their runners-up, and can
the reranker find it? (LC-QuAD 2.0 validation; issue #18, docs/research-log.md, "2026-12-05 — Runners-up as
extra drafts".)

    pgmr generate models/pgmr-ensemble lcquad2-validation --batch-size 32 \
        -o artifacts/rerank/validation.drafts.jsonl                       # the shipped members' drafts
    python bench/nbest_drafts.py [--verifier DIR] [--out DIR]

Per structured member, two more drafts beside the ensemble's three, from the same forward pass: `+t2`, the frame of
its second most probable template, and `+r2`, its top frame with the least probable relation slot given its next
property (one not already used). Every draft is resolved with the shipped grounding and no refusal and scored
with the reranker's signals (pgmr.experiments.rerank_fit.draft_outcomes, as `pgmr ensemble fit-rerank`; with
--verifier, the verifier's signal too). Then, for the shipped three and for the three plus each kind of
runner-up: the oracle (any draft right) and the pairwise reranker refitted on them, on the first 600 (fitted on
the rest) and the rest (two-fold), as `pgmr ensemble fit-rerank` reports. Writes bench/results/nbest_drafts.json;
the drafts and signals are cached in --out.

With `--split test` (drafts of `pgmr generate ENSEMBLE lcquad2-test`), nothing is fitted, since test is only
reported: per set of drafts, the oracle, and the shipped reranker's choice among the three (--reranker, with the
shipped verifier's signal when --verifier is given), which reproduces the published test Query EM.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from _common import console, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.experiments.runners_up import KINDS

BASE = ("seq2seq", "structured", "structured-s7")
MEMBERS = {"structured": "models/pgmr-structured", "structured-s7": "models/pgmr-structured-s7"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--drafts", type=Path, default=Path("artifacts/rerank/validation.drafts.jsonl"))
    ap.add_argument("--verifier", type=Path, help="a trained draft verifier (pgmr train-verifier's model)")
    ap.add_argument("--out", type=Path, default=Path("artifacts/nbest"))
    ap.add_argument("--data-dir", type=Path)
    ap.add_argument("--split", choices=("validation", "test"), default="validation")
    ap.add_argument("--reranker", type=Path, default=Path("models/pgmr-ensemble/reranker.json"))
    args = ap.parse_args()
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.rerank_fit import draft_outcomes, report
    from pgmr.generators.ensemble import Draft
    from pgmr.memory import Memory
    from pgmr.pipeline import StageConfig
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    args.out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in args.drafts.read_text(encoding="utf-8").splitlines()]
    drafts_path = args.out / "drafts.jsonl"
    if not drafts_path.exists():
        from pgmr.experiments.runners_up import runner_up_drafts

        extra, differ = runner_up_drafts(rows, MEMBERS)
        console.print(f"top frames differing from the shipped drafts: {dict(differ)}")
        drafts_path.write_text(
            "".join(json.dumps({**r, "drafts": r["drafts"] + extra[r["id"]]}) + "\n" for r in rows),
            encoding="utf-8",
        )
    signals_path = args.out / ("signals.verifier.json" if args.verifier else "signals.json")
    if not signals_path.exists():
        data = [json.loads(line) for line in drafts_path.read_text(encoding="utf-8").splitlines()]
        if args.split == "test":
            gold = {r.id: r for r in load_named("lcquad2-test", resolve_data_dir(args.data_dir)).records}
        else:
            records = load_named("lcquad2-train", resolve_data_dir(args.data_dir)).records
            gold = {r.id: r for r in split_train_validation(records)[1]}
        stages = StageConfig(GroundingConfig(), resolver=ResolverConfig())
        verifier = None
        if args.verifier:
            from pgmr.generators.verifier import Verifier

            verifier = Verifier.load(args.verifier)
        questions = draft_outcomes(
            [r["id"] for r in data],
            [r["question"] for r in data],
            [
                tuple(Draft(d["source"], d["text"], d.get("confidence") or {}) for d in r["drafts"])
                for r in data
            ],
            gold,
            Resolver(Memory.load(default_memory_dir()), stages.resolver),
            stages,
            verifier,
        )
        signals_path.write_text(json.dumps(questions), encoding="utf-8")
    questions = json.loads(signals_path.read_text(encoding="utf-8"))
    variants = {
        "shipped three": BASE,
        **{f"three + {k}": (*BASE, *(f"{m}+{k}" for m in MEMBERS)) for k in KINDS},
        "three + t2 + r2": (*BASE, *(f"{m}+{k}" for m in MEMBERS for k in KINDS)),
    }
    if args.split == "test":
        test_only(questions, variants, args)
        return
    results: dict[str, Any] = {}
    table_rows = []
    for name, sources in variants.items():
        part = [{**q, "drafts": [d for d in q["drafts"] if d["source"] in sources]} for q in questions]
        figures = report(part, list(sources), 1.0, held_out=600)
        first, rest = figures["first"], figures["rest"]
        results[name] = {"sources": list(sources), "first": first, "rest": rest}
        table_rows.append(
            [
                name,
                *(f"{100 * v:.2f}" for v in (first["oracle"], first["reranked (fitted on the rest)"])),
                *(f"{100 * v:.2f}" for v in (rest["oracle"], rest["reranked (two-fold)"])),
            ]
        )
    console.print(
        table(
            f"Query EM %, LC-QuAD 2.0 validation ({'with' if args.verifier else 'without'} the verifier signal)",
            ["drafts", "first 600: oracle", "reranked", "rest: oracle", "reranked (two-fold)"],
            table_rows,
        )
    )
    write_result(
        "nbest_drafts" + ("-verifier" if args.verifier else ""),
        {"drafts": str(args.drafts), "verifier": str(args.verifier) if args.verifier else None, **results},
    )


def test_only(questions: list[dict[str, Any]], variants: dict[str, tuple[str, ...]], args: Any) -> None:
    """Test is only reported: the oracle of each set of drafts and the shipped reranker among the three."""
    from pgmr.experiments.rerank_fit import accuracy, chooser
    from pgmr.generators.verifier import Verifier
    from pgmr.pipeline.rerank import Reranker

    # The signals already hold the verifier's scores; it is loaded because a reranker that weighs it wants one.
    verifier = Verifier.load(args.verifier) if args.verifier else None
    reranker = Reranker.from_json(json.loads(args.reranker.read_text(encoding="utf-8")), verifier)
    three = [{**q, "drafts": [d for d in q["drafts"] if d["source"] in BASE]} for q in questions]
    shipped = accuracy(three, chooser(reranker))
    results: dict[str, Any] = {"questions": len(questions), "shipped reranker, three drafts": shipped}
    table_rows = [["shipped three: the shipped reranker's choice", f"{100 * shipped:.2f}"]]
    for name, sources in variants.items():
        part = [{**q, "drafts": [d for d in q["drafts"] if d["source"] in sources]} for q in questions]
        oracle = accuracy(part, lambda q: max(q["drafts"], key=lambda draft: draft["right"]))
        results[name] = {"sources": list(sources), "oracle": oracle}
        table_rows.append([f"{name}: oracle (some draft right)", f"{100 * oracle:.2f}"])
    console.print(
        table(f"Query EM %, LC-QuAD 2.0 test ({len(questions)} questions)", ["", "Query EM"], table_rows)
    )
    write_result(
        "nbest_drafts-test",
        {"drafts": str(args.drafts), "verifier": str(args.verifier) if args.verifier else None, **results},
    )


if __name__ == "__main__":
    main()
