"""Inference precision on LC-QuAD 2.0 validation: the whole pipeline (drafts, grounding, resolution against the
full memory, reranking, shipped refusal) with the models and the query encoder in float32 and in bfloat16,
side by side in one process: Query EM, refusals, final queries that differ, questions/s.

    python bench/precision.py [--model models/pgmr-ensemble] [--start 600] [--limit 0] [--batch-size 32]

`--start 600` skips the validation questions the seq2seq member's post-generation rules were tuned on (as the
reranker's fit does). What chose `--precision auto` (docs/research-log.md,
"2026-12-03 — Inference precision: bfloat16"). Writes
bench/results/precision.json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from _common import console, gold_records, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.evaluation.metrics import evaluate_record
from pgmr.generators.trained import load_trained
from pgmr.memory import Memory
from pgmr.pipeline import Pipeline
from pgmr.precision import native_bf16

PRECISIONS = ("fp32", "bf16")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/pgmr-ensemble")
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--start", type=int, default=600)
    parser.add_argument("--limit", type=int, default=0, help="at most N questions from --start (0: all)")
    parser.add_argument("--batch-size", type=int, default=32)
    args = parser.parse_args()

    records = gold_records("validation", resolve_data_dir(args.data_dir))[args.start :]
    if args.limit:
        records = records[: args.limit]
    questions = [r.question for r in records]
    rows: dict[str, list[dict[str, Any]]] = {}
    results: dict[str, Any] = {
        "model": args.model,
        "questions": len(records),
        "start": args.start,
        "threads": torch.get_num_threads(),
        "native_bf16": native_bf16("cpu"),
        "precisions": {},
    }
    for precision in PRECISIONS:
        memory = Memory.load(args.memory or default_memory_dir(), precision=precision)
        pipeline = Pipeline(load_trained(args.model, precision=precision), memory)
        pipeline.ask_many(questions[:4])  # warm-up: allocation and the resolver's lexicons
        started = time.perf_counter()
        answered = pipeline.ask_many(questions, batch_size=args.batch_size)
        seconds = time.perf_counter() - started
        rows[precision] = [a.to_row() for a in answered]
        exact = [
            bool(evaluate_record({"id": r.id, **row}, r).query_em)
            for row, r in zip(rows[precision], records, strict=True)
        ]
        results["precisions"][precision] = {
            "query_em": round(100 * sum(exact) / len(exact), 2),
            "refused": sum(row.get("status") == "refused" for row in rows[precision]),
            "seconds": round(seconds, 1),
            "questions_per_s": round(len(records) / seconds, 2),
            "exact": exact,
        }
    base, other = (results["precisions"][p] for p in PRECISIONS)
    results["same_outcome"] = sum(
        a.get("status") == b.get("status") and a.get("sparql") == b.get("sparql")
        for a, b in zip(rows["fp32"], rows["bf16"], strict=True)
    )
    results["bf16_gains"] = sum(b and not a for a, b in zip(base["exact"], other["exact"], strict=True))
    results["bf16_losses"] = sum(a and not b for a, b in zip(base["exact"], other["exact"], strict=True))
    console.print(
        table(
            f"{args.model}, LC-QuAD 2.0 validation questions {args.start + 1}-{args.start + len(records)}, "
            f"batch {args.batch_size}, {torch.get_num_threads()} threads",
            ["precision", "Query EM", "refused", "questions/s", "same status and query as fp32"],
            [
                [
                    p,
                    f"{results['precisions'][p]['query_em']:.2f}%",
                    results["precisions"][p]["refused"],
                    f"{results['precisions'][p]['questions_per_s']:.1f}",
                    "-" if p == "fp32" else f"{results['same_outcome']}/{len(records)}",
                ]
                for p in PRECISIONS
            ],
        )
    )
    console.print(
        f"bf16 right where fp32 is wrong: {results['bf16_gains']}; the reverse: {results['bf16_losses']}"
    )
    for entry in results["precisions"].values():
        del entry["exact"]
    write_result("precision", results)


if __name__ == "__main__":
    main()
