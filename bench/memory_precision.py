"""The memory built in float32 and in bfloat16 side by side: build time, and what each does to answers.

    python bench/memory_precision.py [--split validation|test] [--predictions OUTPUTS.jsonl]
        [--precisions fp32,bf16] [--work DIR] [--out NAME]

Each precision builds the default memory from the data directory with `build_encoder` (as `pgmr memory build`
and `pgmr demo` do), the embedding cache off, so the build time is the encoding's. Then the shipped
generator's LC-QuAD 2.0 outputs (chosen once, as bench/encoders.py does, and shared with it) are resolved
through each memory with the same query encoder, refusal off and at the shipped threshold: Query EM, refused,
and final queries that differ from the first precision's. Writes bench/results/OUT.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import chosen_outputs, console, em_off_and_shipped, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.datasets import load_named
from pgmr.experiments.common import Workspace
from pgmr.experiments.settings import ExperimentSettings
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import Memory, build_encoder, load_encoder
from pgmr.memory.encoder import encoder_precision
from pgmr.precision import native_bf16
from pgmr.resolver.priors import counts_from_dataset


def build(
    precision: str, catalog: LabelCatalog, counts: dict[str, int], target: Path
) -> tuple[Memory, dict[str, Any]]:
    encoder = build_encoder(None, precision)
    began = time.perf_counter()
    memory = Memory.build(catalog, target, encoder, prior_counts=counts, use_cache=False)
    seconds = time.perf_counter() - began
    stats = memory.build_stats
    assert stats is not None
    return memory, {
        "encoder": repr(encoder),
        "precision": encoder_precision(encoder),
        "build_seconds": seconds,
        "texts": stats.texts,
        "texts_per_s": stats.texts / max(stats.encode_seconds, 1e-9),
    }


def stored_gap(first: Path, second: Path) -> float:
    """The largest 1 - cosine between the two memories' stored entity vectors (rows in the same order)."""
    import faiss

    a = faiss.read_index(str(first / "entities.faiss"))
    b = faiss.read_index(str(second / "entities.faiss"))
    n = min(a.ntotal, b.ntotal)
    va, vb = a.reconstruct_n(0, n), b.reconstruct_n(0, n)
    return float(np.max(1.0 - np.sum(va * vb, axis=1)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=("validation", "test"), default="validation")
    parser.add_argument("--predictions", type=Path, help="the generator's outputs for the split")
    parser.add_argument("--precisions", default="fp32,bf16")
    parser.add_argument("--data-dir")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "pgmr" / "grown_prior")
    parser.add_argument("--out", default="memory_precision")
    args = parser.parse_args()
    names = [p for p in args.precisions.split(",") if p != "bf16" or native_bf16("cpu")]
    data_dir = resolve_data_dir(args.data_dir)
    args.work.mkdir(parents=True, exist_ok=True)
    records = list(load_named(f"lcquad2-{args.split}", data_dir).records)
    query_encoder = load_encoder(None, precision="fp32")
    catalog = LabelCatalog.from_data_dir(data_dir)
    counts = counts_from_dataset("lcquad2-train-part", data_dir)
    rows: dict[str, dict[str, Any]] = {}
    finals: dict[str, list[str]] = {}
    targets: dict[str, Path] = {}
    outputs: list[str] | None = None
    for name in names:
        targets[name] = args.work / f"memory-{name}"
        console.print(f"building the memory in {name} ...")
        _, row = build(name, catalog, counts, targets[name])
        console.print(f"{name}: {row}")
        memory = Memory.load(targets[name], query_encoder, verify=False)
        ws = Workspace(
            ExperimentSettings(
                data_dir=data_dir, out_dir=args.work, min_confidence=0.0, memory_dir=targets[name]
            )
        )
        if outputs is None:
            outputs = chosen_outputs(ws, records, args.split, args.work, args.predictions)
        figures, finals[name] = em_off_and_shipped(ws, memory, records, outputs, name)
        row.update(figures)
        row["differ"] = sum(a != b for a, b in zip(finals[name], finals[names[0]], strict=True))
        row["stored_gap_max"] = stored_gap(targets[names[0]], targets[name])
        rows[name] = row
        console.print(f"{name}: {row}")
    base = rows[names[0]]
    console.print(
        table(
            f"Memory build precision, LC-QuAD 2.0 {args.split} ({len(records)} questions)",
            ["built in", "build s", "texts/s", "x", "1-cos max", "Query EM off / on", "refused on", "differ"],
            [
                [
                    name,
                    f"{r['build_seconds']:.0f}",
                    f"{r['texts_per_s']:.0f}",
                    f"{r['texts_per_s'] / base['texts_per_s']:.2f}",
                    f"{r['stored_gap_max']:.1e}",
                    f"{100 * r['query_em_off']:.2f} / {100 * r['query_em_shipped']:.2f}",
                    f"{100 * r['refused_shipped']:.2f}",
                    str(r["differ"]),
                ]
                for name, r in rows.items()
            ],
        )
    )
    write_result(args.out, {"split": args.split, "questions": len(records), "memories": rows})


if __name__ == "__main__":
    main()
