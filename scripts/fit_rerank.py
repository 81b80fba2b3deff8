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
import random
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pgmr.pipeline.rerank import FEATURES, Reranker, best_draft, draft_signals

TUNED_ON = 600  # validation questions the seq2seq post-generation rules were tuned on
SEED = 0


def collect(drafts_path: Path, data_dir: Path, memory_dir: Path | None) -> list[dict[str, Any]]:
    """Per question: each draft's source, signals and whether it is right (Query EM)."""
    from pgmr.config import default_memory_dir
    from pgmr.datasets import load_named
    from pgmr.datasets.splits import split_train_validation
    from pgmr.evaluation.metrics import evaluate_record
    from pgmr.jsonl import read_jsonl
    from pgmr.memory import Memory
    from pgmr.pipeline import StageConfig
    from pgmr.pipeline.stages import finish_all, prepare
    from pgmr.resolver import Resolver, ResolverConfig
    from pgmr.resolver.grounding import GroundingConfig

    gold = {r.id: r for r in split_train_validation(load_named("lcquad2-train", data_dir).records)[1]}
    rows = list(read_jsonl(drafts_path))
    if not rows or "drafts" not in rows[0]:
        raise SystemExit(f"{drafts_path}: expected `pgmr generate ENSEMBLE ...` rows with a 'drafts' list")
    unknown = [r["id"] for r in rows if r["id"] not in gold]
    if unknown:
        raise SystemExit(f"{len(unknown)} rows are not validation questions (first: {unknown[0]})")
    memory = Memory.load(memory_dir or default_memory_dir())
    stages = StageConfig(GroundingConfig(), resolver=ResolverConfig())
    resolver = Resolver(memory, stages.resolver)
    questions = [r["question"] for r in rows for _ in r["drafts"]]
    texts = [d["text"] for r in rows for d in r["drafts"]]
    results = finish_all(prepared := prepare(questions, texts, "pgmr", resolver, stages.grounding), stages)
    out, k = [], 0
    for row in rows:
        n = len(row["drafts"])
        found = draft_signals(prepared[k : k + n], [d.get("confidence", {}) for d in row["drafts"]])
        drafts = []
        for d, signals, result in zip(row["drafts"], found, results[k : k + n], strict=True):
            right = evaluate_record({"id": row["id"], **result.to_row()}, gold[row["id"]]).query_em
            drafts.append({"source": d["source"], "signals": signals, "right": bool(right)})
        out.append({"id": row["id"], "drafts": drafts})
        k += n
    return out


def _phi(source: str, signals: Mapping[str, float], sources: Sequence[str]) -> list[float]:
    vector = []
    for s in sources:
        on = 1.0 if s == source else 0.0
        vector.extend([on, *(on * signals[f] for f in FEATURES)])
    return vector


def fit(questions: Sequence[Mapping[str, Any]], sources: Sequence[str], l2: float) -> Reranker:
    from pgmr.resolver.fitting import logistic_coefficients

    names = [f"{s}:{f}" for s in sources for f in ("bias", *FEATURES)]
    rows, labels = [], []
    for q in questions:
        for a in q["drafts"]:
            for b in q["drafts"]:
                if a is not b and a["right"] != b["right"]:
                    pa, pb = (
                        _phi(a["source"], a["signals"], sources),
                        _phi(b["source"], b["signals"], sources),
                    )
                    rows.append(dict(zip(names, (x - y for x, y in zip(pb, pa, strict=True)), strict=True)))
                    labels.append(b["right"])
    if not rows:
        raise SystemExit("no question where one draft is right and another wrong: nothing to fit")
    coef, _, _, scale = logistic_coefficients(rows, labels, names, l2=l2)
    # The pairs come in both orders, so the standardized model is linear in the difference with no offset:
    # a draft's score is its own signals times coefficient / scale.
    weights: dict[str, dict[str, float]] = {s: {} for s in sources}
    for name, c, s in zip(names, coef, scale, strict=True):
        source, signal = name.split(":", 1)
        weights[source][signal] = round(c / s, 6)
    return Reranker(weights)


def accuracy(questions: Sequence[Mapping[str, Any]], choose: Any) -> float:
    return sum(1 for q in questions if choose(q)["right"]) / len(questions) if questions else 0.0


def chooser(reranker: Reranker) -> Any:
    def choose(q: Mapping[str, Any]) -> Mapping[str, Any]:
        # the pipeline's rule; no refusals here, so a draft's rank is whether it resolved
        drafts = q["drafts"]
        scores = [reranker.score(d["source"], d["signals"]) for d in drafts]
        return drafts[best_draft([int(d["signals"]["resolved"]) for d in drafts], scores)]

    return choose


def report(questions: Sequence[Mapping[str, Any]], sources: Sequence[str], l2: float) -> dict[str, Any]:
    first, rest = list(questions[:TUNED_ON]), list(questions[TUNED_ON:])
    shuffled = list(rest)
    random.Random(SEED).shuffle(shuffled)
    half = len(shuffled) // 2
    h1, h2 = shuffled[:half], shuffled[half:]
    cross = (
        accuracy(h2, chooser(fit(h1, sources, l2))) * len(h2)
        + accuracy(h1, chooser(fit(h2, sources, l2))) * len(h1)
    ) / max(1, len(rest))
    final = fit(rest, sources, l2)
    figures: dict[str, Any] = {"questions": {"first": len(first), "rest": len(rest)}, "l2": l2}
    for name, part in (("first", first), ("rest", rest)):
        figures[name] = {
            **{
                f"{s} alone": accuracy(part, lambda q, s=s: next(d for d in q["drafts"] if d["source"] == s))
                for s in sources
            },
            "oracle": accuracy(part, lambda q: max(q["drafts"], key=lambda d: d["right"])),
        }
    figures["first"]["reranked (fitted on the rest)"] = accuracy(first, chooser(final))
    figures["rest"]["reranked (two-fold)"] = cross
    figures["reranker"] = final.to_json()["weights"]
    return figures


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
    from pgmr.generators.ensemble import RERANKER_FILE
    from pgmr.generators.seq2seq.card import read_model_card
    from pgmr.jsonl import atomic_write_text

    members = [m["name"] for m in read_model_card(args.ensemble)["members"]]
    args.out.mkdir(parents=True, exist_ok=True)
    if args.rows:
        questions = json.loads(args.rows.read_text(encoding="utf-8"))
    else:
        questions = collect(args.drafts, resolve_data_dir(args.data_dir), args.memory)
        (args.out / "drafts.signals.json").write_text(json.dumps(questions), encoding="utf-8")
    figures = report(questions, members, args.l2)
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
