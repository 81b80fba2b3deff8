"""Exact (flat) memory search: FAISS's per-query scan against one BLAS matrix product, side by side, on the
shipped memory's indexes, by number of queries per call.

    python bench/flat_search.py [--memory DIR] [--queries 1,2,4,8,32,128,512] [--k 200] [--repeats 5]

FAISS picks between the two paths with its global `distance_compute_blas_threshold`: 1.15 scans query by query
until nq * d reaches 128,000. The bench times each call both ways (threshold 128,000, then 1: always BLAS);
pgmr's own setting (pgmr.memory.indexes.faiss_index.BLAS_THRESHOLD, 1,024) keeps the scan up to 2 queries at
d = 384. Queries are rows of the index itself, slightly perturbed and renormalized, so their neighbours are
realistic. Reports ms per call and whether both paths return the same top-50 row sets. Writes
bench/results/flat_search.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import faiss
import numpy as np

from _common import console, table, write_result
from pgmr.config import default_memory_dir
from pgmr.memory.indexes.faiss_index import BLAS_THRESHOLD

ALWAYS_BLAS = 1

FAISS_DEFAULT = 128_000  # faiss 1.15's own setting (nq * d below it: per-query scan)


def _time(index: Any, queries: np.ndarray, k: int, threshold: int, repeats: int) -> tuple[float, np.ndarray]:
    faiss.cvar.distance_compute_blas_threshold = threshold
    index.search(queries, k)  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        _, ids = index.search(queries, k)
    return 1000 * (time.perf_counter() - started) / repeats, ids


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memory")
    parser.add_argument("--queries", default="1,2,4,8,32,128,512")
    parser.add_argument("--k", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    memory_dir = Path(args.memory or default_memory_dir())
    rng = np.random.default_rng(0)
    results: dict[str, Any] = {"k": args.k, "threads": faiss.omp_get_max_threads(), "indexes": {}}
    rows = []
    for name in ("entities", "relations"):
        index = faiss.read_index(str(memory_dir / f"{name}.faiss"))
        stored = faiss.rev_swig_ptr(index.get_xb(), index.ntotal * index.d).reshape(index.ntotal, index.d)
        per_size = {}
        for nq in (int(q) for q in args.queries.split(",") if q):
            queries = stored[rng.choice(index.ntotal, nq, replace=False)] + 0.05 * rng.standard_normal(
                (nq, index.d)
            ).astype(np.float32)
            queries /= np.linalg.norm(queries, axis=1, keepdims=True)
            scan_ms, scan_ids = _time(index, queries, args.k, FAISS_DEFAULT, args.repeats)
            blas_ms, blas_ids = _time(index, queries, args.k, ALWAYS_BLAS, args.repeats)
            same = sum(set(a[:50]) == set(b[:50]) for a, b in zip(scan_ids, blas_ids, strict=True))
            per_size[str(nq)] = {
                "scan_ms": round(scan_ms, 1),
                "blas_ms": round(blas_ms, 1),
                "speedup": round(scan_ms / blas_ms, 2),
                "same_top50_sets": f"{same}/{nq}",
            }
            rows.append(
                [
                    name,
                    index.ntotal,
                    nq,
                    f"{scan_ms:.1f}",
                    f"{blas_ms:.1f}",
                    f"{scan_ms / blas_ms:.2f}x",
                    f"{same}/{nq}",
                ]
            )
        results["indexes"][name] = {"rows": index.ntotal, "by_queries": per_size}
    faiss.cvar.distance_compute_blas_threshold = BLAS_THRESHOLD
    console.print(
        table(
            f"flat search, k={args.k}, {results['threads']} threads",
            ["index", "rows", "queries", "scan ms", "BLAS ms", "speed-up", "same top-50 sets"],
            rows,
        )
    )
    write_result("flat_search", results)


if __name__ == "__main__":
    main()
