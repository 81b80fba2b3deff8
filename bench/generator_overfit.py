"""Sanity check before a long generator run: can the seq2seq setup memorise a few training examples?

    python bench/generator_overfit.py [--examples 64] [--steps 200] [--lr 1e-3] [--preset small]

Trains on the first N converted LC-QuAD 2.0 train records (pgmr mode, descriptions dropped) and generates for
16 of them. A setup that learns gives a distinct output per question and exact matches; one that collapses
gives the same output for every question. Writes bench/results/generator_overfit.json.
"""

from __future__ import annotations

import argparse
import tempfile
import time

from _common import console, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, convert_records
from pgmr.datasets import load_named
from pgmr.generators.examples import build_examples
from pgmr.generators.seq2seq import Seq2SeqGenerator, TrainConfig, train_seq2seq
from pgmr.kg.catalog import LabelCatalog


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--examples", type=int, default=64)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--preset", default="small")
    args = parser.parse_args()

    data_dir = resolve_data_dir(args.data_dir)
    catalog = LabelCatalog.from_data_dir(data_dir)
    records = load_named("lcquad2-train", data_dir).records[: args.examples * 2]
    converted = list(convert_records(records, catalog, ConversionSummary()))[: args.examples]
    examples = build_examples(converted, "pgmr", max_description_words=0)
    config = TrainConfig(
        preset=args.preset,
        learning_rate=args.lr,
        max_steps=args.steps,
        eval_steps=10_000,
        warmup_steps=20,
        batch_size=16,
        progress=False,
        max_eval_examples=16,
    )
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        train_seq2seq(examples, examples[:16], tmp, config)
        outputs = Seq2SeqGenerator.load(tmp).generate([e.source for e in examples[:16]])
    seconds = time.perf_counter() - started
    exact = sum(o == e.target for o, e in zip(outputs, examples[:16], strict=True))
    distinct = len(set(outputs))
    console.print(
        table(
            f"Overfit check ({len(examples)} examples, {args.steps} steps, lr {args.lr}, {args.preset})",
            ["measure", "value"],
            [["exact (of 16)", exact], ["distinct outputs (of 16)", distinct], ["seconds", f"{seconds:.0f}"]],
        )
    )
    write_result(
        "generator_overfit",
        {
            "examples": len(examples),
            "steps": args.steps,
            "lr": args.lr,
            "preset": args.preset,
            "exact_of_16": exact,
            "distinct_of_16": distinct,
            "seconds": seconds,
        },
    )


if __name__ == "__main__":
    main()
