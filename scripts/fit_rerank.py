"""Fit an ensemble's reranker (pgmr.pipeline.rerank) on LC-QuAD 2.0 validation, and write its reranker.json.

    pgmr generate ENSEMBLE lcquad2-validation --batch-size 32 -o artifacts/rerank/validation.drafts.jsonl
    .venv/bin/python scripts/fit_rerank.py ENSEMBLE --drafts artifacts/rerank/validation.drafts.jsonl

Every draft is resolved with the shipped grounding (no refusal, as `pgmr generate --resolve`) and scored with
Query EM against the gold query. The weights are a pairwise ranking: on questions where exactly one draft is
right, logistic regression on the difference of the two drafts' signals (per member, a bias and a weight per
signal). They are fitted on the validation questions after the first 600: the first 600 are where the
seq2seq default's post-generation rules were tuned, so they flatter it. Reported (and written to
<out>/fit.json): each member alone, the oracle (any draft right), and the reranker's choice, on the first
600 (fitted on the rest) and on the rest by two-fold cross-validation (fitted on one half, scored on the other).
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

TUNED_ON = 600  # validation questions the seq2seq post-generation rules were tuned on


def collect(
    drafts_path: Path, data_dir: Path, memory_dir: Path | None, ensemble: Path
) -> list[dict[str, Any]]:
    """Per question: each draft's source, signals (the ensemble's verifier's among them, when it has one) and
    whether it is right (Query EM)."""
    from pgmr.config import default_memory_dir
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.experiments.rerank_fit import draft_outcomes
    from pgmr.generators.ensemble import Draft
    from pgmr.generators.verifier import VERIFIER_DIR, Verifier
    from pgmr.jsonl import read_jsonl
    from pgmr.memory import Memory
    from pgmr.pipeline import StageConfig
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    gold = {r.id: r for r in split_train_validation(load_named("lcquad2-train", data_dir).records)[1]}
    rows = list(read_jsonl(drafts_path))
    if not rows or "drafts" not in rows[0]:
        raise SystemExit(f"{drafts_path}: expected `pgmr generate ENSEMBLE ...` rows with a 'drafts' list")
    memory = Memory.load(memory_dir or default_memory_dir())
    stages = StageConfig(GroundingConfig(), resolver=ResolverConfig())
    drafts = [
        tuple(Draft(d["source"], d["text"], d.get("confidence") or {}) for d in r["drafts"]) for r in rows
    ]
    try:
        return draft_outcomes(
            [r["id"] for r in rows],
            [r["question"] for r in rows],
            drafts,
            gold,
            Resolver(memory, stages.resolver),
            stages,
            Verifier.load(ensemble / VERIFIER_DIR) if (ensemble / VERIFIER_DIR).is_dir() else None,
        )
    except ValueError as exc:  # rows that are not validation questions
        raise SystemExit(f"{drafts_path}: {exc}") from None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("ensemble", type=Path, help="the ensemble directory; its reranker.json is written")
    parser.add_argument(
        "--drafts", type=Path, required=True, help="`pgmr generate ENSEMBLE lcquad2-validation` rows"
    )
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--memory", type=Path)
    parser.add_argument("--l2", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=Path("artifacts/rerank"))
    parser.add_argument("--rows", type=Path, help="reuse the collected signals (<out>/drafts.signals.json)")
    args = parser.parse_args()

    from pgmr.config import resolve_data_dir
    from pgmr.experiments.rerank_fit import report
    from pgmr.generators.ensemble import RERANKER_FILE
    from pgmr.generators.seq2seq.card import read_model_card
    from pgmr.jsonl import atomic_write_text
    from pgmr.pipeline.rerank import Reranker

    members = [m["name"] for m in read_model_card(args.ensemble)["members"]]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.rows:
        questions = json.loads(args.rows.read_text(encoding="utf-8"))
    else:
        questions = collect(args.drafts, resolve_data_dir(args.data_dir), args.memory, args.ensemble)
        (args.out / "drafts.signals.json").write_text(json.dumps(questions), encoding="utf-8")
    figures = report(questions, members, args.l2, held_out=TUNED_ON)
    reranker = Reranker(
        figures["reranker"],
        {
            "fitted_on": f"LC-QuAD 2.0 validation after the first {TUNED_ON} questions ({figures['questions']['rest']})",
            "drafts": str(args.drafts),
            "l2": args.l2,
            "validation": {k: figures[k] for k in ("first", "rest")},
            "date": datetime.now(UTC).strftime("%Y-%m-%d"),
            "command": " ".join(["scripts/fit_rerank.py", *sys.argv[1:]]),
        },
    )
    atomic_write_text(args.ensemble / RERANKER_FILE, json.dumps(reranker.to_json(), indent=1) + "\n")
    (args.out / "fit.json").write_text(json.dumps(figures, indent=1) + "\n", encoding="utf-8")
    for part in ("first", "rest"):
        print(f"validation {part} ({figures['questions'][part]} questions):")
        for name, value in figures[part].items():
            print(f"  {name:32s} {100 * value:6.2f}%")
    print(f"wrote {args.ensemble / RERANKER_FILE} and {args.out / 'fit.json'}")


if __name__ == "__main__":
    main()
