"""Speed: memory build throughput vs the encoder's raw throughput on the same texts, and resolve latency.

    python bench/memory_speed.py [--entries 4000] [--latency-queries 300] [--memory DIR]

Build and raw encoding alternate (raw, build, raw, build, ...) and the best of each is kept, because this
machine is noisy. Latency: one LC-QuAD 2.0 test query at a time through Resolver.resolve (embedding included).
Writes bench/results/memory_speed.json.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from _common import console, converted_split, setup, table, write_result
from pgmr.evaluation.oracle import oracle_cases
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import Memory, memory_rows
from pgmr.resolver import Resolver


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--entries", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--latency-queries", type=int, default=300)
    args = parser.parse_args()

    data_dir, catalog, memory = setup(args.data_dir, args.memory)
    encoder = memory.encoder
    entries = random.Random(0).sample([e for e in catalog if e.label], args.entries)
    sub = LabelCatalog(entries)
    texts = list(dict.fromkeys(r.text for r in memory_rows(entries)))
    raw, build = [], []
    for _ in range(args.rounds):
        started = time.perf_counter()
        encoder.encode(texts, batch_size=128)
        raw.append(len(texts) / (time.perf_counter() - started))
        started = time.perf_counter()
        Memory.build_in_memory(sub, encoder, batch_size=128, progress=False)
        build.append(len(texts) / (time.perf_counter() - started))
    ratio = max(build) / max(raw)

    records, _ = converted_split("test", data_dir, catalog)
    cases = random.Random(1).sample(oracle_cases(records), args.latency_queries)
    resolver = Resolver(memory)
    resolver.resolve(cases[0].query)  # builds the lexicons once, as a long-running service would
    latencies = []
    for case in cases:
        started = time.perf_counter()
        resolver.resolve(case.query)
        latencies.append((time.perf_counter() - started) * 1000)
    latencies.sort()
    p50 = statistics.median(latencies)
    p95 = latencies[int(0.95 * (len(latencies) - 1))]
    batch_started = time.perf_counter()
    resolver.resolve_many([c.query for c in cases])
    batch_ms = (time.perf_counter() - batch_started) * 1000 / len(cases)

    console.print(
        table(
            f"Memory build vs raw encoding ({len(texts)} texts, best of {args.rounds})",
            ["measure", "texts/s"],
            [
                ["raw encoder", f"{max(raw):.0f}"],
                ["memory build", f"{max(build):.0f}"],
                ["build / raw", f"{ratio:.1%}"],
            ],
        )
    )
    console.print(
        table(
            f"Resolve latency per question ({len(cases)} test queries, memory of {len(memory.entities)} entities)",
            ["measure", "ms"],
            [
                ["p50 (one at a time)", f"{p50:.1f}"],
                ["p95 (one at a time)", f"{p95:.1f}"],
                ["mean per query, batched", f"{batch_ms:.1f}"],
            ],
        )
    )
    write_result(
        "memory_speed",
        {
            "texts": len(texts),
            "raw_texts_per_s": raw,
            "build_texts_per_s": build,
            "build_over_raw": ratio,
            "resolve_ms_p50": p50,
            "resolve_ms_p95": p95,
            "resolve_ms_batched_mean": batch_ms,
            "generation": "no generator yet (issue 4); compare when one exists",
        },
    )


if __name__ == "__main__":
    main()
