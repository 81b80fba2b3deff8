"""The index stage's parts (each shard's rows encoded into index codes) in one process against on a local Dask
cluster, on the same shards of a dump build's work directory, in one run (their ratio holds on a noisy machine).

    python bench/index_parts.py WORK_DIR --catalog CATALOG [--shards 40] [--workers 2]

WORK_DIR is a build's `<memory>.build/` whose index stage has trained its entity index (`index/entity.trained`);
the parts are written into temporary directories, never into WORK_DIR. Both runs must give the same bytes (checked).
Writes bench/results/index_parts-wWORKERS.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path

from _common import console, table, write_result
from pgmr.memory.dump.cluster import ClusterSettings, dask_client
from pgmr.memory.dump.index_parts import Parts, first_occurrences
from pgmr.memory.dump.part_codes import TrainedIndex, write_parts
from pgmr.memory.dump.state import WorkDir
from pgmr.memory.index import create_index


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("work_dir", type=Path)
    parser.add_argument("--catalog", type=Path, help="the catalog the build read (when it started from one)")
    parser.add_argument("--shards", type=int, default=40)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--dimension", type=int, default=384)
    args = parser.parse_args()

    work = WorkDir(args.work_dir, catalog=args.catalog)
    index_dir = args.work_dir / "index"
    settings = json.loads((index_dir / "settings.json").read_text())
    state = (index_dir / "entity.trained").read_bytes()
    all_shards = work.catalog_shards()
    # Evenly over the catalog: synthetic items fill the later shards, the real ones the first.
    step = max(1, len(all_shards) // args.shards)
    shards = all_shards[::step][: args.shards]
    masks = dict(zip(all_shards, first_occurrences(all_shards), strict=True))
    todo = [(s, masks[s]) for s in shards]

    scratch = Path(tempfile.mkdtemp(prefix="index-parts-"))
    results, rows = [], []
    try:
        here = Parts(scratch / "here")
        here.dir.mkdir(parents=True)
        index = create_index(settings["kind"], args.dimension, settings["backend"], **settings["options"])
        index.restore_trained(state)  # type: ignore[attr-defined]
        started = time.perf_counter()
        count = sum(here.write(s, kept, work.vector_file(s), args.dimension, index) for s, kept in todo)  # type: ignore[arg-type]
        results.append(
            {"where": "one process", "rows": count, "seconds": round(time.perf_counter() - started, 2)}
        )

        there = Parts(scratch / "there")
        there.dir.mkdir(parents=True)
        spec = TrainedIndex.of(
            settings["kind"], args.dimension, settings["backend"], settings["options"], state
        )
        with dask_client(ClusterSettings(workers=args.workers)) as client:
            started = time.perf_counter()
            count = write_parts(client, there, todo, work.vector_file, spec, state)
            seconds = time.perf_counter() - started
        results.append(
            {"where": f"cluster, {args.workers} workers", "rows": count, "seconds": round(seconds, 2)}
        )
        for shard in shards:
            if there.path(shard, "codes.npy").read_bytes() != here.path(shard, "codes.npy").read_bytes():
                raise SystemExit(f"codes differ for {shard.name}")
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base = results[0]["seconds"]
    for result in results:
        result["rows_per_second"] = round(result["rows"] / result["seconds"])
        result["speedup"] = round(base / result["seconds"], 2)
        rows.append([result["where"], f"{result['rows']:,}", f"{result['seconds']:.1f}",
                     f"{result['rows_per_second']:,}", f"{result['speedup']:.2f}x"])  # fmt: skip
    console.print(table(
        f"index parts, {len(shards)} shards of {len(all_shards):,}",
        ["where", "rows", "seconds", "rows/s", "speed-up"], rows,
    ))  # fmt: skip
    write_result(f"index_parts-w{args.workers}", {"work_dir": str(args.work_dir), "shards": len(shards),
                 "catalog_shards": len(all_shards), "index": settings, "results": results})  # fmt: skip


if __name__ == "__main__":
    main()
