"""Generation throughput on this machine: questions/s batched and one at a time, and resolve time beside it.

    python bench/generation_speed.py [--model models/pgmr-default] [--questions 256] [--single 40]
                                     [--batch-sizes 1,8,32,64] [--threads N]

Questions are the first N of LC-QuAD 2.0 test. Each batch size runs the same questions; rows are measured
in one process one after the other, so compare ratios rather than absolute numbers across runs (the machine
is noisy). pgmr-mode models also time the resolver on their own outputs (full memory, batched and single).
Writes bench/results/generation_speed.json.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import time

import torch

from _common import console, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.datasets import load_named
from pgmr.generators import PGMR_MODES
from pgmr.generators.seq2seq import Seq2SeqGenerator
from pgmr.query import IntermediateQueryError, parse


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--model", default="models/pgmr-default")
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--questions", type=int, default=256)
    parser.add_argument("--single", type=int, default=40, help="questions generated one at a time")
    parser.add_argument("--batch-sizes", default="8,32,64")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    records = load_named("lcquad2-test", resolve_data_dir(args.data_dir)).records[: args.questions]
    questions = [r.question for r in records]
    generator = Seq2SeqGenerator.load(args.model)
    generator.generate(questions[:4])  # warm-up: first calls pay for allocation

    rows: list[list[object]] = []
    results: dict[str, object] = {
        "model": args.model,
        "mode": generator.mode,
        "threads": torch.get_num_threads(),
    }
    single_latencies = []
    outputs: list[str] = []
    for question in questions[: args.single]:
        started = time.perf_counter()
        outputs.extend(generator.generate([question], batch_size=1))
        single_latencies.append(time.perf_counter() - started)
    single_qps = len(single_latencies) / sum(single_latencies)
    rows.append(
        [
            "1 (one at a time)",
            len(single_latencies),
            f"{single_qps:.1f}",
            f"{1000 * statistics.median(single_latencies):.0f}",
        ]
    )
    results["single"] = {
        "questions": len(single_latencies),
        "questions_per_s": round(single_qps, 2),
        "p50_ms": round(1000 * statistics.median(single_latencies), 1),
        "p95_ms": round(1000 * sorted(single_latencies)[int(0.95 * (len(single_latencies) - 1))], 1),
    }
    batched = {}
    for size in (int(s) for s in args.batch_sizes.split(",")):
        started = time.perf_counter()
        outputs = generator.generate(questions, batch_size=size)
        elapsed = time.perf_counter() - started
        qps = len(questions) / elapsed
        batched[str(size)] = {
            "questions": len(questions),
            "seconds": round(elapsed, 2),
            "questions_per_s": round(qps, 2),
        }
        rows.append(
            [f"{size}", len(questions), f"{qps:.1f}", f"{1000 * elapsed / len(questions):.0f} (amortised)"]
        )
    results["batched"] = batched

    if generator.mode in PGMR_MODES:
        from pgmr.memory import Memory
        from pgmr.resolver import Resolver

        resolver = Resolver(Memory.load(args.memory or default_memory_dir()))
        parsed = []
        for text in outputs:
            with contextlib.suppress(IntermediateQueryError):
                parsed.append(parse(text))
        resolver.resolve_many(parsed[:8])  # warm-up
        started = time.perf_counter()
        resolver.resolve_many(parsed)
        batch_s = time.perf_counter() - started
        latencies = []
        for query in parsed[: args.single]:
            started = time.perf_counter()
            resolver.resolve(query)
            latencies.append(time.perf_counter() - started)
        results["resolve"] = {
            "queries": len(parsed),
            "batched_queries_per_s": round(len(parsed) / batch_s, 2),
            "single_p50_ms": round(1000 * statistics.median(latencies), 1),
        }
        rows.append(["resolve, batched", len(parsed), f"{len(parsed) / batch_s:.1f}", ""])
        rows.append(
            [
                "resolve, one at a time",
                len(latencies),
                f"{len(latencies) / sum(latencies):.1f}",
                f"{1000 * statistics.median(latencies):.0f}",
            ]
        )
    console.print(
        table(
            f"generation speed: {args.model} ({generator.mode}, {torch.get_num_threads()} threads)",
            ["batch size", "questions", "questions/s", "ms per question (p50)"],
            rows,
        )
    )
    write_result("generation_speed", results)


if __name__ == "__main__":
    main()
