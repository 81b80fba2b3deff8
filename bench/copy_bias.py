"""Copy bias and beam width of pgmr-mode decoding, swept side by side on one split.

    python bench/copy_bias.py [--model models/pgmr-default] [--split validation] [--limit 600]
                              [--biases 0,1,2,4,8] [--beams 1] [--grounding 0.5] [--threads N]

Each setting generates the same questions with the same model, then grounds (as `pgmr generate --resolve`
does), resolves against the full memory and scores against the gold queries. Columns: Query EM; the share of
gold entity labels written exactly (case-insensitive) before grounding, over the questions whose skeleton and
placeholder counts match gold; and generation seconds. Tune on `validation` (carved from LC-QuAD 2.0 train);
`test` is for reporting only. Writes bench/results/copy_bias[-SPLIT].json.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from _common import console, converted_split, gold_records, setup, table, write_result
from pgmr.evaluation.metrics import aggregate, evaluate_record
from pgmr.experiments.common import parse_outputs, resolution_fields, resolve_parsed
from pgmr.generators.seq2seq import Seq2SeqGenerator
from pgmr.query import IntermediateQuery, IntermediateQueryError, parse
from pgmr.resolver import Resolver


def entity_label_hits(outputs: list[str], golds: list[IntermediateQuery]) -> tuple[int, int]:
    """(entity labels equal to gold's, entity slots compared), over outputs whose entity count matches."""
    hits = slots = 0
    for text, gold in zip(outputs, golds, strict=True):
        try:
            predicted = parse(text)
        except IntermediateQueryError:
            continue
        mine = [p.label.strip().casefold() for p in predicted.placeholders if p.kind == "entity"]
        theirs = [p.label.strip().casefold() for p in gold.placeholders if p.kind == "entity"]
        if len(mine) != len(theirs):
            continue
        slots += len(theirs)
        hits += sum(a == b for a, b in zip(mine, theirs, strict=True))
    return hits, slots


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/pgmr-default")
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--limit", type=int, default=600)
    parser.add_argument("--biases", default="0,1,2,4,8")
    parser.add_argument("--beams", default="1")
    parser.add_argument("--relation-biases", default="0", help="bonus inside relation labels")
    parser.add_argument(
        "--close", default="on", help="on,off: whether [/ENT] gets the bonus after a whole span"
    )
    parser.add_argument("--grounding", type=float, default=0.5)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--name", help="result file name under bench/results (default: copy_bias[-SPLIT])")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    data_dir, catalog, memory = setup(args.data_dir, args.memory)
    converted, _ = converted_split(args.split, data_dir, catalog)
    converted = converted[: args.limit]
    records = {r.id: r for r in gold_records(args.split, data_dir)}
    questions = [c.question for c in converted]
    golds = [parse(c.intermediate) for c in converted]
    resolver = Resolver(memory)
    from pgmr.resolver.grounding import GroundingConfig

    grounding = GroundingConfig(min_similarity=args.grounding)

    rows: list[list[Any]] = []
    settings: list[dict[str, Any]] = []
    grid = [
        (beams, bias, relation_bias, close)
        for beams in [int(b) for b in args.beams.split(",")]
        for bias in [float(b) for b in args.biases.split(",")]
        for relation_bias in [float(b) for b in args.relation_biases.split(",")]
        for close in args.close.split(",")
    ]
    for beams, bias, relation_bias, close in grid:
        generator = Seq2SeqGenerator.load(
            args.model,
            num_beams=beams,
            copy_bias=bias,
            relation_copy_bias=relation_bias,
            copy_close=close in ("on", "ent"),
            relation_copy_close=close in ("on", "rel"),
        )
        started = time.perf_counter()
        outputs = generator.generate(questions, batch_size=args.batch_size)
        seconds = time.perf_counter() - started
        parsed = parse_outputs(outputs, questions, grounding, known=resolver.knows)
        results = resolve_parsed(resolver, parsed, questions)
        evaluations = [
            evaluate_record({"id": c.id, **resolution_fields(r)}, records[c.id], catalog=catalog)
            for c, r in zip(converted, results, strict=True)
        ]
        overall = aggregate(evaluations)
        hits, slots = entity_label_hits(outputs, golds)
        label_rate = hits / slots if slots else 0.0
        name = f"beams {beams}, bias {bias:g}, relation bias {relation_bias:g}, close {close}"
        rows.append([name, overall["query_em"], label_rate, f"{seconds:.1f}"])
        settings.append(
            {
                "num_beams": beams,
                "copy_bias": bias,
                "relation_copy_bias": relation_bias,
                "close_bonus": close,  # on | off | ent | rel (earlier results files: true/false)
                "query_em": overall["query_em"],
                "sqm": overall["sqm"],
                "bleu": overall["bleu"],
                "invalid_rate": overall["invalid_rate"],
                "entity_labels_exact": label_rate,
                "entity_slots_compared": slots,
                "generation_seconds": round(seconds, 1),
            }
        )
        console.print(
            table(
                f"copy bias, {args.split} ({len(questions)} questions)",
                ["setting", "Query EM", "entity labels exact", "gen s"],
                rows[-1:],
            )
        )
    console.print(
        table(
            f"copy bias and beams on {args.split}, first {len(questions)} questions ({args.model})",
            ["setting", "Query EM", "entity labels exact (before grounding)", "generation s"],
            rows,
        )
    )
    name = args.name or ("copy_bias" if args.split == "validation" else f"copy_bias-{args.split}")
    write_result(
        name,
        {
            "model": args.model,
            "split": args.split,
            "questions": len(questions),
            "grounding": args.grounding,
            "threads": torch.get_num_threads(),
            "settings": settings,
        },
    )


if __name__ == "__main__":
    main()
