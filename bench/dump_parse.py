"""Parse-stage throughput of `pgmr memory build --from-dump` on a synthetic dump of realistic entity size.

    python bench/dump_parse.py --items 1000000 [--dir /work/runs/dump-bench] [--workers 2] [--formats json,bz2]

Writes (once; reused when present) a synthetic dump of the real catalog plus N synthetic items as plain JSON
and/or multi-stream bzip2, then runs the parse stage (decompress + parse + extract + Parquet shards) on a local
Dask cluster and reports items/s, decompressed MB/s, compressed MB/s, the mean entity size and peak RSS of the
whole process tree. Each format runs in the same call, so their ratio holds on this noisy machine. The full
110M-item dump at the measured rate is the last column. Writes bench/results/dump_parse-FORMATS.json.
"""

from __future__ import annotations

import argparse
import shutil
import threading
import time
from pathlib import Path

import psutil

from _common import console, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.kg.dump.synthetic import SyntheticDump, load_real, write_synthetic_dump
from pgmr.memory.dump.cluster import ClusterSettings, dask_client
from pgmr.memory.dump.parse_stage import run_parse_stage
from pgmr.memory.dump.state import BuildIdentity, WorkDir

FULL_DUMP_ITEMS = 110_000_000


class PeakRss:
    """Peak resident memory of this process and its children (the cluster's workers), sampled every 0.2 s."""

    def __init__(self) -> None:
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            total = 0
            for process in [me, *me.children(recursive=True)]:
                try:
                    total += process.memory_info().rss
                except psutil.Error:
                    continue
            self.peak = max(self.peak, total)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--dir", default="/work/runs/dump-bench")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--chunk-lines", type=int, default=5_000)
    parser.add_argument("--formats", default="json,bz2")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    directory = Path(args.dir)
    directory.mkdir(parents=True, exist_ok=True)
    entities, properties = load_real(resolve_data_dir(args.data_dir))
    dump = SyntheticDump(entities, properties, args.items, seed=args.seed)
    rows, results = [], []
    for fmt in args.formats.split(","):
        path = directory / f"synthetic-{args.items}.json{'' if fmt == 'json' else '.' + fmt}"
        if not path.is_file():
            console.print(f"writing {path} ({dump.total:,} entities)")
            started = time.perf_counter()
            write_synthetic_dump(path, dump, workers=args.workers)
            console.print(f"  {time.perf_counter() - started:.0f} s, {path.stat().st_size / 1e9:.2f} GB")
        work = WorkDir(directory / f"work-{fmt}")
        if work.path.exists():
            shutil.rmtree(work.path)
        work.open(BuildIdentity.of(path, ("en", "mul"), args.chunk_lines, "none"), restart=True)
        with dask_client(ClusterSettings(workers=args.workers)) as client, PeakRss() as rss:
            report = run_parse_stage(client, work, path, ("en", "mul"), args.chunk_lines)
        seconds = report.seconds
        result = {
            "format": fmt,
            "items": report.lines,
            "records": report.records,
            "seconds": round(seconds, 1),
            "items_per_second": round(report.lines / seconds),
            "decompressed_mb_per_second": round(report.decompressed_bytes / seconds / 1e6, 1),
            "compressed_mb_per_second": round(path.stat().st_size / seconds / 1e6, 1),
            "mean_entity_bytes": round(report.decompressed_bytes / max(report.lines, 1)),
            "dump_bytes": path.stat().st_size,
            "shard_bytes": sum(p.stat().st_size for p in work.catalog.glob("*.parquet")),
            "peak_rss_gb": round(rss.peak / 1e9, 2),
            "full_dump_hours": round(FULL_DUMP_ITEMS / (report.lines / seconds) / 3600, 1),
        }
        results.append(result)
        # Strings: the shared table helper prints floats as percentages.
        rows.append([fmt, f"{result['items']:,}", f"{result['items_per_second']:,}",
                     f"{result['decompressed_mb_per_second']:.1f}", f"{result['compressed_mb_per_second']:.1f}",
                     f"{result['mean_entity_bytes']:,}", f"{result['peak_rss_gb']:.2f}",
                     f"{result['full_dump_hours']:.1f}"])  # fmt: skip
        shutil.rmtree(work.path)
    console.print(table(
        f"parse stage, {args.workers} workers, synthetic dump of {dump.total:,} entities",
        ["format", "items", "items/s", "MB/s out", "MB/s in", "bytes/item", "peak RSS GB", "110M h"],
        rows,
    ))  # fmt: skip
    write_result(f"dump_parse-{args.formats.replace(',', '-')}", {"items": args.items, "workers": args.workers, "chunk_lines": args.chunk_lines,
                                "results": results})  # fmt: skip


if __name__ == "__main__":
    main()
