"""Which vector index for a Wikidata-sized memory: recall against exact search, build time, size, latency.

    python bench/ann_scale.py --memory DIR --rows 1000000 [--kinds ivfpq,ivfsq8,hnsw] [--queries 500]

The memory's real row vectors (entities and relations) are the seed. Rows beyond them are **drawn, not encoded**: each is a real
vector plus Gaussian noise, renormalized, with the noise scaled so that a drawn row's cosine to its seed is
about 0.8 (a namesake's text is near, not equal). Encoding 10M texts takes ~14 h at this machine's ~200 texts/s;
the index's recall and latency depend on how the vectors spread, which drawing from the real ones keeps.
Queries are real rows with smaller noise (cosine ~0.9 to their row: a placeholder's paraphrase). Ground truth
is exact inner-product search, computed in blocks. Every index kind runs in the same call on the same vectors.
Writes bench/results/ann_scale-ROWS.json.
"""

from __future__ import annotations

import argparse
import gc
import time
from pathlib import Path

import numpy as np
import psutil

from _common import console, table, write_result
from pgmr.memory import Memory

NOISE_ROW, NOISE_QUERY = 0.8, 0.9  # target cosine of a drawn row to its seed, of a query to its row


def noisy(seeds: np.ndarray, cosine: float, rng: np.random.Generator) -> np.ndarray:
    """Unit vectors at about `cosine` from each seed (seeds are unit vectors)."""
    dimension = seeds.shape[1]
    # For unit x and isotropic noise of norm s: cos(x, x + e) ~ 1 / sqrt(1 + s^2).
    scale = np.sqrt(1 / cosine**2 - 1) / np.sqrt(dimension)
    out = seeds + rng.normal(0.0, scale, size=seeds.shape).astype(np.float32)
    out /= np.linalg.norm(out, axis=1, keepdims=True)
    return out.astype(np.float32)


def exact_top(vectors: np.ndarray, queries: np.ndarray, k: int, block: int = 200_000) -> np.ndarray:
    best_scores = np.full((len(queries), k), -np.inf, dtype=np.float32)
    best_ids = np.full((len(queries), k), -1, dtype=np.int64)
    for start in range(0, len(vectors), block):
        scores = queries @ vectors[start : start + block].T
        top = np.argpartition(-scores, min(k, scores.shape[1] - 1), axis=1)[:, :k]
        merged_scores = np.concatenate([best_scores, np.take_along_axis(scores, top, axis=1)], axis=1)
        merged_ids = np.concatenate([best_ids, top + start], axis=1)
        order = np.argsort(-merged_scores, axis=1)[:, :k]
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_ids = np.take_along_axis(merged_ids, order, axis=1)
    return best_ids


def build(kind: str, vectors: np.ndarray) -> tuple[object, float]:
    import faiss

    dimension, rows = vectors.shape[1], len(vectors)
    nlist = int(4 * np.sqrt(rows))
    started = time.perf_counter()
    if kind == "hnsw":
        index = faiss.IndexHNSWFlat(dimension, 32, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = 40
        index.add(vectors)
        index.hnsw.efSearch = 64
    else:
        quantizer = faiss.IndexFlatIP(dimension)
        if kind == "ivfpq":
            index = faiss.IndexIVFPQ(quantizer, dimension, nlist, 48, 8, faiss.METRIC_INNER_PRODUCT)
        else:
            index = faiss.IndexIVFScalarQuantizer(
                quantizer, dimension, nlist, faiss.ScalarQuantizer.QT_8bit, faiss.METRIC_INNER_PRODUCT
            )
        sample = vectors[np.random.default_rng(0).choice(rows, min(rows, 100 * nlist), replace=False)]
        index.train(sample)
        for start in range(0, rows, 200_000):
            index.add(vectors[start : start + 200_000])
        index.nprobe = 32
    return index, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--memory", required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--kinds", default="ivfpq,ivfsq8,hnsw")
    parser.add_argument("--queries", type=int, default=500)
    parser.add_argument("--out", default="/work/runs/ann-scale")
    args = parser.parse_args()

    import faiss

    rng = np.random.default_rng(0)
    memory = Memory.load(args.memory, verify=False)
    # Both kinds' rows: every one is a real text's embedding, which is what the drawn rows must spread like.
    real = np.concatenate(
        [d.index.reconstruct(np.arange(len(d.index))) for d in (memory.entities, memory.relations)]
    )
    console.print(f"{len(real):,} real rows from {args.memory}; drawing {args.rows - len(real):,} more")
    path = Path(args.out) / f"vectors-{args.rows}.f32"
    path.parent.mkdir(parents=True, exist_ok=True)
    vectors = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(args.rows, real.shape[1]))
    vectors[: len(real)] = real
    for start in range(len(real), args.rows, 500_000):
        stop = min(args.rows, start + 500_000)
        vectors[start:stop] = noisy(real[rng.integers(0, len(real), stop - start)], NOISE_ROW, rng)
    vectors.flush()
    queries = noisy(real[rng.integers(0, len(real), args.queries)], NOISE_QUERY, rng)
    truth = exact_top(vectors, queries, 10)
    rows, results = [], []
    for kind in args.kinds.split(","):
        gc.collect()
        rss_before = psutil.Process().memory_info().rss
        ann, seconds = build(kind, np.asarray(vectors))
        rss_after = psutil.Process().memory_info().rss
        found = np.asarray(ann.search(queries, 10)[1])  # type: ignore[attr-defined]
        recall1 = float(np.mean(found[:, 0] == truth[:, 0]))
        recall10 = float(np.mean([len(set(f) & set(t)) / 10 for f, t in zip(found, truth, strict=True)]))
        latencies = []
        for q in queries[:200]:
            started = time.perf_counter()
            ann.search(q[None, :], 10)  # type: ignore[attr-defined]
            latencies.append((time.perf_counter() - started) * 1000)
        size = faiss.serialize_index(ann).nbytes
        result = {"kind": kind, "rows": args.rows, "build_seconds": round(seconds, 1), "bytes": int(size),
                  "index_rss_gb": round((rss_after - rss_before) / 1e9, 2), "recall_at_1": recall1,
                  "recall_at_10": recall10, "p50_ms": round(float(np.percentile(latencies, 50)), 2),
                  "p99_ms": round(float(np.percentile(latencies, 99)), 2)}  # fmt: skip
        results.append(result)
        rows.append([kind, f"{seconds:.0f}", f"{size / 1e9:.2f}", f"{recall1:.3f}", f"{recall10:.3f}",
                     f"{result['p50_ms']:.2f}", f"{result['p99_ms']:.2f}"])  # fmt: skip
        del ann
    console.print(table(f"ANN at {args.rows:,} rows ({len(real):,} real, the rest drawn), 1 query at a time",
                        ["index", "build s", "GB", "R@1", "R@10", "p50 ms", "p99 ms"], rows))  # fmt: skip
    write_result(f"ann_scale-{args.rows}", {"real_rows": len(real), "drawn_rows": args.rows - len(real),
                                            "queries": args.queries, "nprobe": 32, "results": results})  # fmt: skip
    path.unlink()


if __name__ == "__main__":
    main()
