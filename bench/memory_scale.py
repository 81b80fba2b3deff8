"""Dump-built memories side by side: size on disk, load time and RSS, ANN recall against exact search, and
resolve latency per placeholder.

    python bench/memory_scale.py MEMORY [MEMORY ...] [--queries 300] [--placeholders 300]
        [--encoder-backends onnx,torch,onnx-int8] [--no-recall] [--exact-from MEMORY]

Build figures (per-stage times, peak RSS of the build) come from each build's report and `/usr/bin/time -v`
(docs/scale.md gives the commands). Recall: the query texts are what the resolver searches for LC-QuAD 2.0
validation entity placeholders (labels, and labels with descriptions), searched through the memory's index
(k=10) and exactly (every stored vector, in slices); recall@k is the share of the exact top k that the index
returns, ties included (`recall`). `--sweep` measures other nprobe:rerank settings on the same queries. An index
whose stored vectors are approximate (sq8) is measured against another memory's float16 ones, `--exact-from`
(the same rows: e.g. the memory it was re-coded from, kept as a hard-linked copy); the rows it returns are
then scored over those float16 vectors too, so that its own approximate scores do not count a right row as a miss.
Latency: LC-QuAD 2.0 test gold queries converted to placeholders, one at a time through Resolver.resolve
(encoding included), divided by their placeholders; first `--placeholders` queries right after the memory's
files are dropped from the page cache (cold: every read goes to disk, as after a restart before any warm-up),
then as many other queries once the rows and lexical tier are read into the page cache as `Memory.load` does
by default (warm; pgmr.memory.page_cache). RSS: the peak of
the serving part (load and resolving), measured before the exact search, which reads every vector.
Each memory (and each query encoder backend of `--encoder-backends`) runs in its own process so that its RSS is
its own. Writes bench/results/memory_scale.json.
"""

from __future__ import annotations

import argparse
import json
import os
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


def recall(scores: np.ndarray, exact: np.ndarray) -> tuple[float, float]:
    """Recall@1 and @10 against the exact scores, counting ties as found: rows with equal text (an item's label
    row and a namesake's, say) have equal vectors, and which of them an exact sort lists first is arbitrary."""
    tie = 1e-5
    at1 = float(np.mean(scores[:, 0] >= exact[:, 0] - tie))
    at10 = float(np.mean(np.sum(scores[:, :10] >= exact[:, 9:10] - tie, axis=1) / 10))
    return at1, at10


def true_scores(reference, vectors: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """The scores of the returned rows over the reference's vectors: an index whose stored vectors are
    approximate (sq8) returns approximate scores, which would count its right rows as misses."""
    out = np.full(ids.shape, -np.inf, dtype=np.float32)
    for n, row in enumerate(ids):
        kept = row >= 0
        if kept.any():
            out[n, kept] = reference.reconstruct(row[kept]) @ vectors[n]
    # Re-scored, the rows may no longer be in order; recall@1 asks for the best returned row.
    return -np.sort(-out, axis=1)


def sweep(
    index, vectors: np.ndarray, exact: np.ndarray, settings: list[tuple[int, int]], reference=None
) -> list[dict]:
    """Recall and search time of the index at other (nprobe, rerank) settings, on the same queries."""
    shipped = index.nprobe, index.rerank
    out = []
    for nprobe, rerank in settings:
        index.nprobe, index.rerank = nprobe, rerank
        began = time.perf_counter()
        scores, ids = index.search(vectors, 10)
        seconds = time.perf_counter() - began
        if reference is not None:
            scores = true_scores(reference, vectors, ids)
        at1, at10 = recall(scores, exact)
        out.append({"nprobe": nprobe, "rerank": rerank, "recall_at_1": at1, "recall_at_10": at10,
                    "search_ms_per_query": seconds * 1000 / len(vectors)})  # fmt: skip
    index.nprobe, index.rerank = shipped
    return out


def _status_bytes(field: str) -> int:
    """A /proc/self/status memory field: RssAnon is resident memory less memory-mapped files' pages, which
    the kernel can drop and read again."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    return 0


def evict(directory: Path) -> None:
    """Drop a memory's files from the page cache (clean pages not mapped by a process; no root needed)."""
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def per_placeholder_ms(resolver, cases) -> list[float]:
    """Each query's resolve time over its placeholders, sorted."""
    times = []
    for case in cases:
        began = time.perf_counter()
        resolver.resolve(case.query)
        times.append((time.perf_counter() - began) * 1000 / max(1, len(case.query.placeholders)))
    return sorted(times)


def exact_recall(
    memory, data: Path, catalog, queries: int, settings: list[tuple[int, int]], exact_from: Path | None = None
) -> tuple:
    """(recall@1, recall@10, the query texts, the sweep of `settings`) of the entity index against exact search
    over its own stored vectors, or over those of `exact_from`'s entity index."""
    from pgmr.evaluation.oracle import oracle_cases
    from pgmr.resolver.resolver import _search_texts

    entities = memory.entities
    # Recall on what the resolver searches with: LC-QuAD 2.0 validation entity placeholders (label, and label
    # with description), the split settings are chosen on.
    validation, _ = converted_split("validation", data, catalog)
    searched = [
        text
        for case in random.Random(0).sample(oracle_cases(validation), queries)
        for text in sum(_search_texts([p for p in case.query.placeholders if p.kind == "entity"]), [])
    ]
    texts = list(dict.fromkeys(searched))[:queries]
    vectors = memory.encoder.encode(texts, batch_size=128)
    found, found_ids = entities.index.search(vectors, 10)
    reference = entities.index
    if exact_from is not None:
        from pgmr.memory import read_manifest
        from pgmr.memory.index import load_index

        other = read_manifest(exact_from)
        reference = load_index(exact_from / other.dictionaries["entity"].index_file, other.index_backend)
        if len(reference) != len(entities.index):
            raise SystemExit(
                f"{exact_from} holds {len(reference)} entity rows, the memory {len(entities.index)}"
            )
    # Exact top 10 over the stored vectors, slice by slice.
    best_scores = np.full((len(texts), 10), -np.inf, dtype=np.float32)
    best_ids = np.zeros((len(texts), 10), dtype=np.int64)
    total = len(entities.index)
    for start in range(0, total, SLICE):
        ids = np.arange(start, min(total, start + SLICE))
        scores = vectors @ reference.reconstruct(ids).T
        merged_scores = np.concatenate([best_scores, scores], axis=1)
        merged_ids = np.concatenate([best_ids, np.broadcast_to(ids, scores.shape)], axis=1)
        # The 10 best of each row, then those 10 in order: a full sort of 200k columns a slice is minutes.
        top = np.argpartition(-merged_scores, 9, axis=1)[:, :10]
        inner = np.argsort(-np.take_along_axis(merged_scores, top, axis=1), axis=1)
        order = np.take_along_axis(top, inner, axis=1)
        best_scores = np.take_along_axis(merged_scores, order, axis=1)
        best_ids = np.take_along_axis(merged_ids, order, axis=1)
    rescore = reference if exact_from is not None else None
    if rescore is not None:
        found = true_scores(rescore, vectors, found_ids)
    recall1, recall10 = recall(found, best_scores)
    tried = sweep(entities.index, vectors, best_scores, settings, rescore) if settings else []
    return recall1, recall10, texts, tried


def measure(
    memory_dir: Path,
    queries: int,
    placeholders: int,
    data_dir: str | None,
    settings: list[tuple[int, int]],
    precision: str = "auto",
    with_recall: bool = True,
    exact_from: Path | None = None,
) -> dict:
    from pgmr.config import resolve_data_dir
    from pgmr.evaluation.oracle import oracle_cases
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory
    from pgmr.memory.page_cache import files_to_warm, warm_up
    from pgmr.resolver import Resolver

    started = time.perf_counter()
    memory = Memory.load(memory_dir, verify=False, warm=False, precision=precision)
    load_seconds = time.perf_counter() - started
    entities = memory.entities
    data = resolve_data_dir(data_dir)
    catalog = LabelCatalog.from_data_dir(data)
    converted, _ = converted_split("test", data, catalog)
    sample = random.Random(1).sample(oracle_cases(converted), 2 * placeholders + 1)
    resolver = Resolver(memory)
    resolver.resolve(sample[0].query)
    evict(memory_dir)
    cold = per_placeholder_ms(resolver, sample[1 : placeholders + 1])
    # What `Memory.load` starts by default: the rows and lexical tier read into the page cache.
    warming = warm_up(files_to_warm(memory_dir, memory.manifest))
    if warming is not None:
        warming.wait()
    warm = per_placeholder_ms(resolver, sample[placeholders + 1 :])
    # Serving memory, before the exact search below reads every stored vector through the memory map.
    serving_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    anonymous = _status_bytes("RssAnon")
    recall1 = recall10 = float("nan")
    texts: list[str] = []
    tried: list[dict] = []
    if with_recall:
        recall1, recall10, texts, tried = exact_recall(memory, data, catalog, queries, settings, exact_from)

    disk = sum(p.stat().st_size for p in memory_dir.rglob("*") if p.is_file())
    return {
        "memory": str(memory_dir),
        "encoder": repr(memory.encoder),
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
        "recall_against": str(exact_from or memory_dir),
        "index_options": entities.index.options(),
        "sweep": tried,
        "resolve_ms_per_placeholder_p50": statistics.median(cold),
        "resolve_ms_per_placeholder_p99": cold[int(0.99 * (len(cold) - 1))],
        "warm_resolve_ms_per_placeholder_p50": statistics.median(warm),
        "warm_resolve_ms_per_placeholder_p99": warm[int(0.99 * (len(warm) - 1))],
        "latency_queries": len(cold),
        "peak_rss_bytes": serving_rss,
        "anonymous_rss_bytes": anonymous,
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("memories", nargs="+", type=Path)
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--placeholders", type=int, default=300)
    parser.add_argument("--data-dir")
    parser.add_argument(
        "--sweep",
        default="",
        help="also measure recall at these NPROBE:RERANK settings of an ivfpq-rerank index, e.g. 32:100,64:200",
    )
    parser.add_argument(
        "--encoder-backends",
        default="auto",
        help="each memory once per query encoder backend (pgmr.memory.encoders: auto, onnx, torch), e.g. onnx,torch; "
        "BACKEND-PRECISION for another query precision than auto, e.g. onnx-int8",
    )
    parser.add_argument("--no-recall", action="store_true", help="latency and RSS only (no exact search)")
    parser.add_argument(
        "--exact-from",
        type=Path,
        help="recall against this memory's stored entity vectors (same rows, float16)",
    )
    parser.add_argument("--query-precision", default="auto", help=argparse.SUPPRESS)
    parser.add_argument("--out", default="memory_scale", help="result name: bench/results/OUT.json")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    settings = [tuple(int(v) for v in pair.split(":")) for pair in args.sweep.split(",") if pair]
    if args.one:
        print(
            json.dumps(
                measure(
                    args.memories[0],
                    args.queries,
                    args.placeholders,
                    args.data_dir,
                    settings,
                    args.query_precision,
                    not args.no_recall,
                    args.exact_from,
                )  # fmt: skip
            )
        )
        return
    results = []
    for memory in args.memories:
        for name in args.encoder_backends.split(","):
            backend, _, precision = name.partition("-")
            command = [sys.executable, __file__, str(memory), "--one", "--queries", str(args.queries),
                       "--placeholders", str(args.placeholders), "--sweep", args.sweep,
                       "--query-precision", precision or "auto"] + (["--data-dir", args.data_dir] if args.data_dir else []) + (["--no-recall"] if args.no_recall else []) + (["--exact-from", str(args.exact_from)] if args.exact_from else [])  # fmt: skip
            env = {**os.environ, "PGMR_ENCODER_BACKEND": backend}
            done = subprocess.run(command, check=True, capture_output=True, text=True, env=env)
            results.append({"encoder_backend": name, **json.loads(done.stdout.strip().splitlines()[-1])})
    rows = [
        [
            f"{r['entities']:,}",
            r["encoder_backend"],
            f"{r['disk_bytes'] / 1e9:.2f}",
            f"{r['peak_rss_bytes'] / 1e9:.2f}",
            f"{r['anonymous_rss_bytes'] / 1e9:.2f}",
            f"{r['load_seconds']:.1f}",
            f"{r['recall_at_1']:.3f}",
            f"{r['recall_at_10']:.3f}",
            f"{r['resolve_ms_per_placeholder_p50']:.1f}",
            f"{r['resolve_ms_per_placeholder_p99']:.1f}",
            f"{r['warm_resolve_ms_per_placeholder_p99']:.1f}",
        ]
        for r in results
    ]
    console.print(
        table(
            "Dump-built memories",
            [
                "entities",
                "encoder",
                "disk GB",
                "RSS GB",
                "anon GB",
                "load s",
                "R@1",
                "R@10",
                "p50 ms",
                "p99 ms",
                "warm p99",
            ],
            rows,
        )
    )
    tried = [[f"{r['entities']:,}", f"{t['nprobe']}:{t['rerank']}", f"{t['recall_at_1']:.3f}",
              f"{t['recall_at_10']:.3f}", f"{t['search_ms_per_query']:.1f}"]
             for r in results for t in r["sweep"]]  # fmt: skip
    if tried:
        console.print(
            table("Index settings", ["entities", "nprobe:rerank", "R@1", "R@10", "ms/query"], tried)
        )
    write_result(args.out, {"memories": results})


if __name__ == "__main__":
    main()
