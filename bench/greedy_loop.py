"""pgmr's greedy loop (pgmr.generators.seq2seq.greedy) against transformers' generate for a seq2seq model: how
often the two write the same text, and questions/s of each, side by side in one process.

    python bench/greedy_loop.py [--model models/pgmr-default] [--split validation] [--questions 0]
                                [--single 100] [--batch-size 32] [--precisions fp32,bf16] [--threads N]
                                [--pipeline models/pgmr-ensemble --start 600]

Every question of the split (or the first --questions) is decoded in batches by both loops, and the first --single
one at a time, in each precision. The loops alternate on every row. With --pipeline, the whole pipeline with that
generator as shipped (precision `auto`: grounding, resolution against the full memory, reranking, refusal) also
answers validation questions from --start on with each loop: Query EM of both, and the questions one gets right
and the other not. Writes bench/results/greedy_loop.json.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from _common import console, gold_records, table, use_generate, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.evaluation.metrics import evaluate_record
from pgmr.generators.seq2seq.generator import Seq2SeqGenerator
from pgmr.generators.trained import load_trained
from pgmr.memory import Memory
from pgmr.pipeline import Pipeline
from pgmr.precision import check_precision


def _timed(run: Callable[[], list[str]]) -> tuple[list[str], float]:
    started = time.perf_counter()
    out = run()
    return out, time.perf_counter() - started


def _compare(
    own: Seq2SeqGenerator, library: Seq2SeqGenerator, questions: Sequence[str], batch_size: int
) -> dict[str, Any]:
    def run(generator: Seq2SeqGenerator) -> Callable[[], list[str]]:
        if batch_size == 1:
            return lambda: [generator.generate([q], batch_size=1)[0] for q in questions]
        return lambda: generator.generate(list(questions), batch_size=batch_size)

    library_out, library_s = _timed(run(library))
    own_out, own_s = _timed(run(own))
    differ = [i for i, (a, b) in enumerate(zip(library_out, own_out, strict=True)) if a != b]
    return {
        "questions": len(questions),
        "same_text": len(questions) - len(differ),
        "generate_questions_per_s": round(len(questions) / library_s, 2),
        "own_loop_questions_per_s": round(len(questions) / own_s, 2),
        "speedup": round(library_s / own_s, 2),
        "differ_examples": [
            {"question": questions[i], "generate": library_out[i], "own_loop": own_out[i]} for i in differ[:5]
        ],
    }


def _pipeline_compare(
    model: str, records: Sequence[Any], memory_dir: str | None, batch_size: int
) -> dict[str, Any]:
    memory = Memory.load(memory_dir or default_memory_dir())
    questions = [r.question for r in records]
    exact: dict[str, list[bool]] = {}
    out: dict[str, Any] = {"model": model, "questions": len(records)}
    for loop in ("generate", "own_loop"):
        generator = load_trained(model)
        if loop == "generate":
            use_generate(generator)
        pipeline = Pipeline(generator, memory)
        pipeline.ask_many(questions[:4])  # warm-up: allocation and the resolver's lexicons
        started = time.perf_counter()
        rows = [a.to_row() for a in pipeline.ask_many(questions, batch_size=batch_size)]
        seconds = time.perf_counter() - started
        exact[loop] = [
            bool(evaluate_record({"id": r.id, **row}, r).query_em)
            for row, r in zip(rows, records, strict=True)
        ]
        out[loop] = {
            "query_em": round(100 * sum(exact[loop]) / len(records), 2),
            "refused": sum(row.get("status") == "refused" for row in rows),
            "questions_per_s": round(len(records) / seconds, 2),
        }
    pairs = list(zip(exact["generate"], exact["own_loop"], strict=True))
    out["own_loop_gains"] = sum(b and not a for a, b in pairs)
    out["own_loop_losses"] = sum(a and not b for a, b in pairs)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/pgmr-default")
    parser.add_argument("--data-dir")
    parser.add_argument("--split", default="validation", choices=["validation", "test"])
    parser.add_argument("--questions", type=int, default=0, help="0: the whole split")
    parser.add_argument("--single", type=int, default=100, help="questions decoded one at a time")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    parser.add_argument("--pipeline", help="also compare the loops inside the pipeline with this generator")
    parser.add_argument("--memory")
    parser.add_argument("--start", type=int, default=600, help="--pipeline: first validation question")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    records = gold_records(args.split, resolve_data_dir(args.data_dir))
    questions = [r.question for r in (records[: args.questions] if args.questions else records)]

    results: dict[str, Any] = {
        "model": args.model,
        "split": args.split,
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "precisions": {},
    }
    rows = []
    for precision in [check_precision(p) for p in args.precisions.split(",") if p]:
        own = Seq2SeqGenerator.load(args.model, precision=precision)
        library = Seq2SeqGenerator.load(args.model, precision=precision, own_loop=False)
        for generator in (own, library):
            generator.generate(questions[:4], batch_size=1)  # warm-up
        by_size = {
            "1": _compare(own, library, questions[: args.single], 1),
            str(args.batch_size): _compare(own, library, questions, args.batch_size),
        }
        results["precisions"][precision] = by_size
        for size, r in by_size.items():
            rows.append(
                [
                    precision,
                    size,
                    f"{r['same_text']}/{r['questions']}",
                    f"{r['generate_questions_per_s']:.1f}",
                    f"{r['own_loop_questions_per_s']:.1f}",
                    f"{r['speedup']:.2f}x",
                ]
            )
    console.print(
        table(
            f"{args.model}, LC-QuAD 2.0 {args.split}, {torch.get_num_threads()} threads",
            ["precision", "batch size", "same text", "generate q/s", "own loop q/s", "speed-up"],
            rows,
        )
    )
    if args.pipeline:
        if args.split != "validation":
            parser.error("--pipeline compares on validation")
        p = _pipeline_compare(args.pipeline, records[args.start :], args.memory, args.batch_size)
        p["start"] = args.start
        results["pipeline"] = p
        console.print(
            table(
                f"{args.pipeline} as shipped, validation questions {args.start + 1}-{args.start + p['questions']}",
                ["loop", "Query EM", "refused", "questions/s"],
                [
                    [
                        loop,
                        f"{p[loop]['query_em']:.2f}%",
                        p[loop]["refused"],
                        f"{p[loop]['questions_per_s']:.1f}",
                    ]
                    for loop in ("generate", "own_loop")
                ],
            )
        )
        console.print(
            f"own loop right where generate is wrong: {p['own_loop_gains']}; the reverse: {p['own_loop_losses']}"
        )
    write_result("greedy_loop", results)


if __name__ == "__main__":
    main()
