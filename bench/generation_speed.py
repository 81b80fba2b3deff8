"""Generation throughput on this machine, side by side: questions/s one at a time and batched, for the model
alone (every draft written) and for what a user waits for (drafts written, resolved against the full memory
and, for an ensemble, reranked: `Pipeline.ask_many` without a store).

    python bench/generation_speed.py [--models models/pgmr-default@fp32,models/pgmr-ensemble] [--questions 256]
                                     [--single 40] [--batch-sizes 8,32,64] [--threads N]

Questions are the first N of LC-QuAD 2.0 test. The models take turns on every row (same questions, same
process), so the ratios between them are what to read: the machine is noisy. A model may name its inference
precision (pgmr.precision) after `@`: `models/pgmr-default@fp32` is the earlier default, float32
model and query encoder; without one it runs as shipped (`auto`). A trailing `+generate` decodes
seq2seq models with transformers' `generate` instead of pgmr's greedy loop (pgmr.generators.seq2seq.greedy):
`models/pgmr-default@fp32+generate` is the default as it ran before that loop, the base that
issue #18's speed bar compares with. The first model is the base of the ratios. Writes
bench/results/generation_speed.json.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from _common import console, table, use_generate, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.datasets import load_named
from pgmr.generators.ensemble import generate_drafts
from pgmr.generators.trained import load_trained
from pgmr.memory import Memory
from pgmr.pipeline import Pipeline
from pgmr.precision import DEFAULT_PRECISION, check_precision, native_bf16


def _single(run: Callable[[list[str]], Any], questions: Sequence[str]) -> dict[str, float]:
    latencies = []
    for question in questions:
        started = time.perf_counter()
        run([question])
        latencies.append(time.perf_counter() - started)
    return {
        "questions": len(latencies),
        "questions_per_s": round(len(latencies) / sum(latencies), 2),
        "p50_ms": round(1000 * statistics.median(latencies), 1),
        "p95_ms": round(1000 * sorted(latencies)[int(0.95 * (len(latencies) - 1))], 1),
    }


def _batched(run: Callable[[list[str]], Any], questions: Sequence[str]) -> dict[str, float]:
    started = time.perf_counter()
    run(list(questions))
    elapsed = time.perf_counter() - started
    return {
        "questions": len(questions),
        "seconds": round(elapsed, 2),
        "questions_per_s": round(len(questions) / elapsed, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--models", default="models/pgmr-default@fp32+generate,models/pgmr-ensemble@fp32,models/pgmr-ensemble"
    )
    parser.add_argument("--data-dir")
    parser.add_argument("--memory")
    parser.add_argument("--questions", type=int, default=256)
    parser.add_argument("--single", type=int, default=40, help="questions asked one at a time")
    parser.add_argument("--batch-sizes", default="8,32,64")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    records = load_named("lcquad2-test", resolve_data_dir(args.data_dir)).records[: args.questions]
    questions = [r.question for r in records]
    models = [m for m in args.models.split(",") if m]
    memories: dict[str, Memory] = {}  # one per precision: the query encoder runs in it too
    pipelines = {}
    for model in models:
        spec, plus, loop = model.partition("+")
        if plus and loop != "generate":
            parser.error(f"{model}: the only decoding after '+' is 'generate'")
        path, _, precision = spec.partition("@")
        precision = check_precision(precision or DEFAULT_PRECISION)
        if precision not in memories:
            memories[precision] = Memory.load(args.memory or default_memory_dir(), precision=precision)
        generator = load_trained(path, precision=precision)
        if plus:
            use_generate(generator)
        pipeline = Pipeline(generator, memories[precision])
        pipeline.ask_many(questions[:4])  # warm-up: first calls pay for allocation and the lexicons
        pipelines[model] = pipeline

    def generation(model: str, size: int) -> Callable[[list[str]], Any]:
        generator = pipelines[model].generator
        return lambda qs: generate_drafts(generator, qs, batch_size=size)  # type: ignore[arg-type]

    def answering(model: str, size: int) -> Callable[[list[str]], Any]:
        return lambda qs: pipelines[model].ask_many(qs, batch_size=size)

    sizes = [int(s) for s in args.batch_sizes.split(",")]
    results: dict[str, Any] = {
        "threads": torch.get_num_threads(),
        "questions": len(questions),
        "native_bf16": native_bf16("cpu"),
        "models": {},
    }
    for model in models:
        results["models"][model] = {"generation": {}, "question_to_sparql": {}}
    for what, make in (("generation", generation), ("question_to_sparql", answering)):
        for model in models:
            results["models"][model][what]["1"] = _single(make(model, 1), questions[: args.single])
        for size in sizes:
            for model in models:
                results["models"][model][what][str(size)] = _batched(make(model, size), questions)

    rows = []
    base = models[0]
    for what in ("generation", "question_to_sparql"):
        for size in ["1", *map(str, sizes)]:
            row: list[object] = [what.replace("_", " "), size]
            for model in models:
                qps = results["models"][model][what][size]["questions_per_s"]
                ratio = qps / results["models"][base][what][size]["questions_per_s"]
                row.append(f"{qps:.1f}" + ("" if model == base else f" ({ratio:.2f}x)"))
            rows.append(row)
    console.print(
        table(
            f"questions/s, {torch.get_num_threads()} threads, first {len(questions)} LC-QuAD 2.0 test questions "
            f"({args.single} one at a time)",
            ["what", "batch size", *(Path(m).name for m in models)],
            rows,
        )
    )
    write_result("generation_speed", results)


if __name__ == "__main__":
    main()
