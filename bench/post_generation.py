"""Post-generation settings swept side by side on one file of saved model outputs.

    python bench/post_generation.py PREDICTIONS [--split validation] [--literals off,on]
                                    [--canonical-weights 0,0.01,0.02,0.03,0.05] [--grounding 0.5]

PREDICTIONS is a `pgmr generate` JSONL file (its `id`, `question` and raw `prediction` are used; whatever it
says about resolution is ignored). Each setting re-parses the same outputs, grounds them (entity labels,
and literals when on: pgmr.resolver.grounding), resolves them against the full memory with the given
canonical-label bonus (ResolverConfig.canonical_weight) and scores against the gold queries. No model runs,
so a grid takes seconds per setting. Tune on `validation` (carved from LC-QuAD 2.0 train); `test` is for
reporting only. Writes bench/results/post_generation[-SPLIT].json (or --name).
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from _common import console, gold_records, setup, table, write_result
from pgmr.evaluation.metrics import aggregate, evaluate_record
from pgmr.experiments.common import parse_outputs, resolution_fields, resolve_parsed
from pgmr.jsonl import read_jsonl
from pgmr.resolver import Resolver, ResolverConfig
from pgmr.resolver.grounding import GroundingConfig


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("predictions")
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--literals", default="off,on", help="literal grounding: off, on or both")
    parser.add_argument("--canonical-weights", default="0,0.01,0.02,0.03,0.05")
    parser.add_argument("--grounding", type=float, default=0.5, help="entity-label grounding threshold")
    parser.add_argument(
        "--memory-grounding", default="on", help="grounding with the memory's labels: off, on or both"
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--name", help="result file name under bench/results")
    args = parser.parse_args()

    data_dir, catalog, memory = setup(args.data_dir, args.memory)
    records = {r.id: r for r in gold_records(args.split, data_dir)}
    rows_in = list(read_jsonl(args.predictions))
    missing = [r["id"] for r in rows_in if r["id"] not in records]
    if missing:
        raise SystemExit(f"{len(missing)} predictions are not {args.split} questions (first: {missing[0]})")
    questions = [r["question"] for r in rows_in]
    outputs = [r["prediction"] for r in rows_in]

    rows: list[list[Any]] = []
    settings: list[dict[str, Any]] = []
    grid = [
        (literals, float(weight), with_memory)
        for literals in args.literals.split(",")
        for weight in args.canonical_weights.split(",")
        for with_memory in args.memory_grounding.split(",")
    ]
    for literals, weight, with_memory in grid:
        started = time.perf_counter()
        grounding = GroundingConfig(
            min_similarity=args.grounding, literals=literals == "on", use_memory=with_memory == "on"
        )
        resolver = Resolver(memory, ResolverConfig(canonical_weight=weight))
        parsed = parse_outputs(outputs, questions, grounding, known=resolver.knows)
        results = resolve_parsed(resolver, parsed, questions)
        evaluations = [
            evaluate_record({"id": r["id"], **resolution_fields(res)}, records[r["id"]], catalog=catalog)
            for r, res in zip(rows_in, results, strict=True)
        ]
        overall = aggregate(evaluations)
        seconds = time.perf_counter() - started
        rows.append(
            [
                f"literals {literals}, canonical {weight:g}, memory grounding {with_memory}",
                overall["query_em"],
                overall["uri_em"],
            ]
        )
        settings.append(
            {
                "literal_grounding": literals == "on",
                "memory_grounding": with_memory == "on",
                "canonical_weight": weight,
                "query_em": overall["query_em"],
                "sqm": overall["sqm"],
                "uri_em": overall["uri_em"],
                "bleu": overall["bleu"],
                "seconds": round(seconds, 1),
            }
        )
    console.print(
        table(
            f"post-generation settings on {args.split}, {len(rows_in)} questions ({args.predictions})",
            ["setting", "Query EM", "URI EM"],
            rows,
        )
    )
    name = args.name or ("post_generation" if args.split == "validation" else f"post_generation-{args.split}")
    write_result(
        name,
        {
            "predictions": args.predictions,
            "split": args.split,
            "questions": len(rows_in),
            "grounding": args.grounding,
            "settings": settings,
        },
    )


if __name__ == "__main__":
    main()
