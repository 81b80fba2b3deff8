"""A dump-built memory's prior chosen on LC-QuAD 2.0 validation, and its refusal figures there.

    python bench/grown_prior.py MEMORY [--predictions VAL.jsonl] [--shares 0,0.5,1] [--weights 0.01,0.02]

The shipped generator's outputs for LC-QuAD 2.0 validation (generated once into
WORK/generated.jsonl, or read from --predictions; an ensemble's choice among its drafts is
made once, with the shipped memory, as the distractor experiment does on test) are resolved against MEMORY,
refusal off, under each prior: the memory's own counts ranked as today's prior ranks gold-query counts
(counts first, ID age only without a count), and the blend of counts and ID age (`Prior(age_share=a)`) for
each share a, each at every prior weight. Query EM for each; the best is what a memory of this kind ships with
(pgmr.resolver.priors.SITELINK_AGE_SHARE). Then, at the best, with the shipped refusal threshold: questions
refused, Query EM of the answered ones, refusal precision (refused questions that refusal off gets wrong /
refused) and recall (of the questions refusal off gets wrong, the share refused): what refusal buys on a memory
where every question is answerable. Encodings and index searches are cached across the priors (a prior only
reorders candidates). Writes bench/results/grown_prior-NAME.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import console, table, write_result
from pgmr.config import resolve_data_dir
from pgmr.datasets import load_named
from pgmr.experiments.common import Workspace, prediction_rows, score
from pgmr.experiments.outputs import pgmr_outputs
from pgmr.experiments.predict import answer_outputs
from pgmr.experiments.settings import ExperimentSettings
from pgmr.memory import Memory
from pgmr.resolver import Prior, Resolver
from pgmr.resolver.support import shipped_threshold

DATASET = "lcquad2-validation"


class _Cached:
    """An encoder or index whose answers are kept per input: each prior asks the same questions."""

    def __init__(self, inner: Any, method: str) -> None:
        self._inner, self._method, self._seen = inner, method, {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def __len__(self) -> int:
        return len(self._inner)

    def call(self, first: Any, *args: Any, **kwargs: Any) -> Any:
        key = (
            np.asarray(first).tobytes() if isinstance(first, np.ndarray) else tuple(first),
            args,
            tuple(kwargs),
        )
        if key not in self._seen:
            self._seen[key] = getattr(self._inner, self._method)(first, *args, **kwargs)
        return self._seen[key]


def cached(memory: Memory) -> Memory:
    encoder = _Cached(memory.encoder, "encode")
    encoder.encode = encoder.call  # type: ignore[method-assign]
    for dictionary in (memory.entities, memory.relations):
        index = _Cached(dictionary.index, "search")
        index.search = index.call  # type: ignore[method-assign]
        dictionary.index = index
    return Memory(
        memory.entities, memory.relations, encoder, memory.manifest,  # type: ignore[arg-type]
        prior_counts=memory.prior_counts, prior_source=memory.prior_source, lexical=memory.lexical,
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("memory", type=Path)
    parser.add_argument(
        "--predictions", type=Path, help="the generator's validation outputs (generated.jsonl)"
    )
    parser.add_argument("--shares", default="0,0.25,0.5,0.75,1", help="age shares of the blended prior")
    parser.add_argument("--weights", default="0.01,0.02,0.04", help="prior weights")
    parser.add_argument("--data-dir")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path.home() / ".cache" / "pgmr" / "grown_prior",
        help="where the generated outputs are kept (generated.jsonl, reusable with --predictions)",
    )
    parser.add_argument("--out", default="grown_prior", help="result name: bench/results/OUT.json")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)
    out_dir = args.work
    # Refusal off for the choice among drafts, as the distractor experiment's test figures were made.
    ws = Workspace(ExperimentSettings(data_dir=data_dir, out_dir=out_dir, min_confidence=0.0))
    shipped = shipped_threshold()
    records = list(load_named(DATASET, data_dir).records)
    outputs, source = pgmr_outputs(ws, records, args.predictions)
    questions = [r.question for r in records]
    memory = cached(Memory.load(args.memory, ws.memory.encoder, verify=False))
    counts = memory.prior_counts
    priors: list[tuple[str, float | None]] = [("counts first", None)]
    priors += [(f"blend, age share {a:g}", a) for a in (float(v) for v in args.shares.split(","))]
    weights = [float(v) for v in args.weights.split(",")]

    def run(prior: Prior, weight: float, threshold: float) -> tuple[list[Any], float]:
        stages = ws.stages(prior_weight=weight, min_confidence=threshold)
        resolver = Resolver(memory, stages.resolver, prior=prior)
        began = time.monotonic()
        answered = answer_outputs(resolver, stages, questions, outputs, label="resolving")
        evaluation = score(prediction_rows(records, outputs, answered), records, catalog=None)
        return list(evaluation.records), time.monotonic() - began

    results = []
    for name, share in priors:
        for weight in weights:
            rows, seconds = run(Prior(counts, age_share=share), weight, 0.0)
            em = sum(r.query_em for r in rows) / len(rows)
            results.append(
                {"prior": name, "age_share": share, "weight": weight, "query_em": em, "seconds": seconds}
            )
            console.print(f"{name}, weight {weight:g}: Query EM {100 * em:.2f} ({seconds:.0f} s)")
    best = max(results, key=lambda r: r["query_em"])
    prior = Prior(counts, age_share=best["age_share"])
    off, _ = run(prior, best["weight"], 0.0)
    on, _ = run(prior, best["weight"], shipped)
    wrong = {r.id for r in off if not r.query_em}
    refused = {r.id for r in on if r.outcome == "refused"}
    answered = [r for r in on if r.outcome != "refused"]
    refusal = {
        "threshold": shipped,
        "refused": len(refused) / len(on),
        "answered_query_em": sum(r.query_em for r in answered) / max(1, len(answered)),
        "query_em": sum(r.query_em for r in on) / len(on),
        "refusal_precision": len(refused & wrong) / max(1, len(refused)),
        "refusal_recall": len(refused & wrong) / max(1, len(wrong)),
    }
    console.print(
        table(
            f"Prior of {args.memory.name} on {DATASET} (Query EM, refusal off)",
            ["prior", "weight", "Query EM"],
            [[r["prior"], f"{r['weight']:g}", f"{100 * r['query_em']:.2f}"] for r in results],
        )
    )
    console.print(
        table(
            f"Refusal at the best prior (threshold {refusal['threshold']:g})",
            ["refused", "EM answered", "EM all", "precision", "recall"],
            [
                [
                    f"{100 * refusal[k]:.2f}"
                    for k in (
                        "refused",
                        "answered_query_em",
                        "query_em",
                        "refusal_precision",
                        "refusal_recall",
                    )
                ]
            ],
        )  # fmt: skip
    )
    write_result(
        args.out,
        {
            "memory": str(args.memory),
            "entities": len(memory.entities),
            "prior_source": memory.prior_source,
            "dataset": DATASET,
            "questions": len(records),
            "outputs": source,
            "priors": results,
            "best": best,
            "refusal": refusal,
        },
    )


if __name__ == "__main__":
    main()
