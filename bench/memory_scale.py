"""Dump-built memories side by side: size on disk, load time and RSS, ANN recall against exact search, and
resolve latency per placeholder.

    python bench/memory_scale.py MEMORY [MEMORY ...] [--queries 300] [--placeholders 300]

Build figures (per-stage times, peak RSS of the build) come from each build's report and `/usr/bin/time -v`
(docs/scale.md gives the commands). Recall: the query texts are real entities' "label, description" texts,
searched through the memory's index (k=10) and exactly (every stored vector, in slices); recall@k is the share
of the exact top k that the index returns. Latency: LC-QuAD 2.0 test gold queries converted to placeholders,
one at a time through Resolver.resolve (encoding included), divided by their placeholders.
Each memory runs in its own process so that its RSS is its own. Writes bench/results/memory_scale.json.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _common import console, converted_split, table, write_result

SLICE = 200_000


def measure(memory_dir: Path, queries: int, placeholders: int, data_dir: str | None) -> dict:
    from pgmr.config import resolve_data_dir
    from pgmr.evaluation.oracle import oracle_cases
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory
    from pgmr.resolver import Resolver

    started = time.perf_counter()
    memory = Memory.load(memory_dir, verify=False)
    load_seconds = time.perf_counter() - started
    entities = memory.entities
    rng = random.Random(0)
    real = [i for i in rng.sample(range(len(entities.rows)), min(len(entities.rows), 50 * queries))]
    picked = [entities.rows[i] for i in real if int(entities.rows[i].id[1:]) < 900_000_000]
    texts = [r.text for r in picked if r.description][:queries]
    vectors = memory.encoder.encode(texts, batch_size=128)
    _, found = entities.index.search(vectors, 10)
    # Exact top 10 over the stored vectors, slice by slice.
    best_scores = np.full((len(texts), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(texts), 10), dtype=np.int64)
    total = len(entities.index)
    for start in range(0, total, SLICE):
        ids = np.arange(start, min(total, start + SLICE))
        scores = vectors @ entities.index.reconstruct(ids).T
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        order = np.argsort(-merged_scores, axis=1)[:, :10]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_ids = np.take_along_axis(merged_ids, order, axis=1)
    recall1 = float(np.mean(found[:, 0] == best_ids[:, 0]))
    recall10 = float(np.mean([len(set(f) & set(b)) / 10 for f, b in zip(found, best_ids, strict=True)]))

    data = resolve_data_dir(data_dir)
    catalog = LabelCatalog.from_data_dir(data)
    converted, _ = converted_split("test", data, catalog)
    cases = random.Random(1).sample(oracle_cases(converted), placeholders)
    resolver = Resolver(memory)
    resolver.resolve(cases[0].query)
    per_placeholder = []
    for case in cases:
        count = max(1, len(case.query.placeholders))
        began = time.perf_counter()
        resolver.resolve(case.query)
        per_placeholder.append((time.perf_counter() - began) * 1000 / count)
    per_placeholder.sort()
    disk = sum(p.stat().st_size for p in memory_dir.rglob("*") if p.is_file())
    return {
        "memory": str(memory_dir),
        "entities": len(entities),
        "entity_rows": len(entities.rows),
        "index_kind": memory.manifest.index_kind,
        "vectors": memory.manifest.vectors,
        "prior": memory.prior_source,
        "disk_bytes": disk,
        "load_seconds": load_seconds,
        "recall_at_1": recall1,
        "recall_at_10": recall10,
        "recall_queries": len(texts),
        "resolve_ms_per_placeholder_p50": statistics.median(per_placeholder),
        "resolve_ms_per_placeholder_p99": per_placeholder[int(0.99 * (len(per_placeholder) - 1))],
        "latency_queries": len(cases),
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("memories", nargs="+", type=Path)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--placeholders", type=int, default=300)
    parser.add_argument("--data-dir")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(measure(args.memories[0], args.queries, args.placeholders, args.data_dir)))
        return
    results = []
    for memory in args.memories:
        command = [sys.executable, __file__, str(memory), "--one", "--queries", str(args.queries),
                   "--placeholders", str(args.placeholders)] + (["--data-dir", args.data_dir] if args.data_dir else [])  # fmt: skip
        done = subprocess.run(command, check=True, capture_output=True, text=True)
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))
    rows = [
        [
            f"{r['entities']:,}",
            f"{r['disk_bytes'] / 1e9:.2f}",
            f"{r['peak_rss_bytes'] / 1e9:.2f}",
            f"{r['load_seconds']:.1f}",
            f"{r['recall_at_1']:.3f}",
            f"{r['recall_at_10']:.3f}",
            f"{r['resolve_ms_per_placeholder_p50']:.1f}",
            f"{r['resolve_ms_per_placeholder_p99']:.1f}",
        ]
        for r in results
    ]
    console.print(
        table(
            "Dump-built memories",
            ["entities", "disk GB", "RSS GB", "load s", "R@1", "R@10", "p50 ms", "p99 ms"],
            rows,
        )
    )
    write_result("memory_scale", {"memories": results})


if __name__ == "__main__":
    main()
