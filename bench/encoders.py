"""The query and memory encoder's backends side by side in one process: speed, and what each does to answers.

    python bench/encoders.py [--split validation|test] [--predictions OUTPUTS.jsonl] [--texts 4000]
        [--backends torch-fp32,torch-bf16,onnx-fp32,onnx-int8] [--out NAME]

Speed: memory texts a second (labels and descriptions of `memory/entities.jsonl`, batches of 64, as
`pgmr memory build` encodes) and milliseconds per question for the texts one question's placeholders search
(batch 1, as `pgmr ask` encodes), p50 and p99. Agreement: the largest and mean 1 - cosine to PyTorch float32.
Answers: the shipped generator's LC-QuAD 2.0 outputs (generated once, as bench/grown_prior.py does) resolved
against today's memory with each backend's query vectors, refusal off and at the shipped threshold: Query EM,
refused, and final queries that differ from PyTorch float32's. Writes bench/results/OUT.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import chosen_outputs, console, em_off_and_shipped, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.datasets import load_named
from pgmr.experiments.common import Workspace
from pgmr.experiments.settings import ExperimentSettings
from pgmr.memory import Memory, load_encoder
from pgmr.precision import native_bf16
from pgmr.query import parse
from pgmr.resolver.resolver import _search_texts as search_texts

BACKENDS = {
    "torch-fp32": ("torch", "fp32"),
    "torch-bf16": ("torch", "bf16"),
    "onnx-fp32": ("onnx", "fp32"),
    "onnx-int8": ("onnx", "int8"),
}


def memory_texts(data_dir: Path, n: int) -> list[str]:
    with (data_dir / "memory" / "entities.jsonl").open() as handle:
        rows = [json.loads(line) for line in itertools.islice(handle, n)]
    return [f"{r['label']} {r.get('description') or ''}".strip() for r in rows]


def question_texts(outputs: list[str]) -> list[list[str]]:
    """Per output that parses: the texts its placeholders search (labels, and labels with descriptions), as
    the resolver encodes them for one question."""
    groups = []
    for text in outputs:
        try:
            query = parse(text)
        except Exception:
            continue
        labels, described = search_texts(query.placeholders)
        if labels:
            groups.append(list(dict.fromkeys([*labels, *described])))
    return groups


def speed(encoder: Any, bulk: list[str], groups: list[list[str]]) -> dict[str, float]:
    encoder.encode(bulk[:64])  # first call pays for lazy initialization
    began = time.perf_counter()
    encoder.encode(bulk, batch_size=64)
    rate = len(bulk) / (time.perf_counter() - began)
    times = []
    for texts in groups:
        began = time.perf_counter()
        encoder.encode(texts)
        times.append(1000 * (time.perf_counter() - began))
    return {
        "texts_per_s": rate,
        "question_p50_ms": float(np.median(times)),
        "question_p99_ms": float(np.percentile(times, 99)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=("validation", "test"), default="validation")
    parser.add_argument("--predictions", type=Path, help="the generator's outputs for the split")
    parser.add_argument("--texts", type=int, default=4000, help="memory texts for the throughput figure")
    parser.add_argument("--questions", type=int, default=400, help="questions for the latency figure")
    parser.add_argument("--backends", default=",".join(BACKENDS))
    parser.add_argument("--data-dir")
    parser.add_argument("--memory", type=Path, default=None, help="default: today's memory")
    parser.add_argument("--work", type=Path, default=Path.home() / ".cache" / "pgmr" / "grown_prior")
    parser.add_argument("--speed-only", action="store_true", help="speed and agreement, no resolution")
    parser.add_argument("--out", default="encoders")
    args = parser.parse_args()
    names = [b for b in args.backends.split(",") if b != "torch-bf16" or native_bf16("cpu")]
    data_dir = resolve_data_dir(args.data_dir)
    memory_dir = args.memory or default_memory_dir()
    ws = Workspace(
        ExperimentSettings(data_dir=data_dir, out_dir=args.work, min_confidence=0.0, memory_dir=memory_dir)
    )
    records = list(load_named(f"lcquad2-{args.split}", data_dir).records)
    # The ensemble's choice among its drafts is made once and kept (it takes minutes); each backend then
    # resolves the same outputs.
    outputs = chosen_outputs(ws, records, args.split, args.work, args.predictions)
    bulk = memory_texts(data_dir, args.texts)
    groups = question_texts(outputs)[: args.questions]
    encoders = {
        name: load_encoder(None, precision=BACKENDS[name][1], backend=BACKENDS[name][0]) for name in names
    }
    reference = encoders[names[0]].encode(bulk[:1000])
    rows: dict[str, dict[str, Any]] = {}
    finals: dict[str, list[str]] = {}
    for name, encoder in encoders.items():
        row = speed(encoder, bulk, groups)
        gap = 1.0 - np.sum(encoder.encode(bulk[:1000]) * reference, axis=1)
        row.update(max_gap=float(gap.max()), mean_gap=float(gap.mean()))
        if args.speed_only:
            rows[name] = row
            console.print(f"{name}: {row}")
            continue
        memory = Memory.load(memory_dir, encoder, verify=False)
        figures, finals[name] = em_off_and_shipped(ws, memory, records, outputs, name)
        row.update(figures)
        row["differ"] = sum(a != b for a, b in zip(finals[name], finals[names[0]], strict=True))
        rows[name] = row
        console.print(f"{name}: {row}")
    base = rows[names[0]]
    console.print(
        table(
            f"Encoder backends, LC-QuAD 2.0 {args.split} ({len(records)} questions)",
            ["backend", "texts/s", "x", "question p50/p99 ms", "1-cos max", "Query EM off / on", "differ"],
            [
                [
                    name,
                    f"{r['texts_per_s']:.0f}",
                    f"{r['texts_per_s'] / base['texts_per_s']:.2f}",
                    f"{r['question_p50_ms']:.1f} / {r['question_p99_ms']:.1f}",
                    f"{r['max_gap']:.1e}",
                    f"{100 * r['query_em_off']:.2f} / {100 * r['query_em_shipped']:.2f}"
                    if "differ" in r
                    else "",
                    str(r.get("differ", "")),
                ]
                for name, r in rows.items()
            ],
        )
    )
    write_result(args.out, {"split": args.split, "questions": len(records), "backends": rows})


if __name__ == "__main__":
    main()
