"""A dump-built memory's prior chosen on LC-QuAD 2.0 validation, and its refusal figures there.

    python bench/grown_prior.py MEMORY [--predictions OUTPUTS.jsonl] [--shares 0,0.5,1] [--weights 0.01,0.02]
        [--synthetic-ages real-range|as-numbered] [--split validation|test] [--out NAME]

The shipped generator's outputs (generated once into WORK/generated.jsonl, or read from --predictions; an
ensemble's choice among its drafts is made once, with the shipped memory, as the distractor experiment does on
test) are resolved against MEMORY, refusal off, under each prior: the memory's own counts ranked as today's
prior ranks gold-query counts (counts first, ID age only without a count), and the blend of counts and ID age
(`Prior(age_share=a)`) for each share a, each at every prior weight. Query EM for each, beside today's memory
(built from the data directory, ranked with its gold-count prior) on the same outputs; the best on validation
is what a dump-built memory ships with (pgmr.resolver.ranking.SITELINK_AGE_SHARE). `--split test` with one
share and one weight reports test for that choice.

A synthetic dump numbers its items from Q900,000,001 up, which the age term would read as younger than any
real item; by default (`real-range`) each synthetic item is given the age of a number drawn over real
Wikidata's range instead (RealRangeAges), as a real dump's obscure items are spread over it.

Then, at the best, with the shipped refusal threshold: questions refused, Query EM of the answered ones,
refusal precision (refused questions that refusal off gets wrong / refused) and recall (of the questions
refusal off gets wrong, the share refused): what refusal buys on a memory where every question is answerable.
Encodings and index searches are cached across the priors (a prior only reorders candidates). Writes
bench/results/OUT.json.
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
from pgmr.kg.dump.synthetic import SYNTHETIC_BASE
from pgmr.kg.ids import id_number
from pgmr.memory import Memory, load_encoder
from pgmr.resolver import Prior, Resolver
from pgmr.resolver.support import shipped_threshold

# Wikidata's item numbers reach about Q130M (2026).
REAL_ID_RANGE = 130_000_000


class RealRangeAges(Prior):
    """A synthetic dump's items are numbered from Q900,000,001 up (pgmr.kg.dump.synthetic.SYNTHETIC_BASE),
    which the ID-age term would read as the youngest items of all: each gets instead the age of a number drawn
    uniformly (by a hash of its own) over real Wikidata's range, as the obscure items of a real dump are spread
    over it. Counts still come from its own ID."""

    def age(self, wikidata_id: str) -> float:
        number = id_number(wikidata_id)
        if number > SYNTHETIC_BASE:
            mixed = (number * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
            wikidata_id = f"Q{1 + (mixed ^ (mixed >> 31)) % REAL_ID_RANGE}"
        return super().age(wikidata_id)


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
    parser.add_argument(
        "--synthetic-ages",
        choices=("real-range", "as-numbered"),
        default="real-range",
        help="the ID age of synthetic items: drawn over real Wikidata's numbers (RealRangeAges), or their own",
    )
    parser.add_argument(
        "--thresholds",
        default="",
        help="refusal thresholds to report at the best prior (default: the shipped one)",
    )
    parser.add_argument("--split", choices=("validation", "test"), default="validation")
    parser.add_argument("--data-dir")
    parser.add_argument(
        "--work",
        type=Path,
        default=Path.home() / ".cache" / "pgmr" / "grown_prior",
        help="where the generated outputs are kept (generated.jsonl, reusable with --predictions)",
    )
    parser.add_argument(
        "--skip-counts-first", action="store_true", help="only the blends of --shares (e.g. to report test)"
    )
    parser.add_argument(
        "--query-precision",
        default="",
        help="encode MEMORY's queries in this precision (e.g. int8, pgmr.memory.load_encoder); default: as "
        "today's memory does",
    )
    parser.add_argument("--out", default="grown_prior", help="result name: bench/results/OUT.json")
    args = parser.parse_args()
    data_dir = resolve_data_dir(args.data_dir)
    out_dir = args.work
    # Refusal off for the choice among drafts, as the distractor experiment's test figures were made.
    ws = Workspace(ExperimentSettings(data_dir=data_dir, out_dir=out_dir, min_confidence=0.0))
    shipped = shipped_threshold()
    dataset = f"lcquad2-{args.split}"
    records = list(load_named(dataset, data_dir).records)
    kind = RealRangeAges if args.synthetic_ages == "real-range" else Prior
    outputs, source = pgmr_outputs(ws, records, args.predictions)
    questions = [r.question for r in records]
    encoder = (
        load_encoder(None, precision=args.query_precision) if args.query_precision else ws.memory.encoder
    )
    memory = cached(Memory.load(args.memory, encoder, verify=False))
    counts = memory.prior_counts
    priors: list[tuple[str, float | None]] = [] if args.skip_counts_first else [("counts first", None)]
    priors += [(f"blend, age share {a:g}", a) for a in (float(v) for v in args.shares.split(","))]
    weights = [float(v) for v in args.weights.split(",")]
    thresholds = [float(v) for v in args.thresholds.split(",") if v]

    def run(prior: Prior, weight: float, threshold: float) -> tuple[list[Any], float]:
        stages = ws.stages(prior_weight=weight, min_confidence=threshold)
        resolver = Resolver(memory, stages.resolver, prior=prior)
        began = time.monotonic()
        answered = answer_outputs(resolver, stages, questions, outputs, label="resolving")
        evaluation = score(prediction_rows(records, outputs, answered), records, catalog=None)
        return list(evaluation.records), time.monotonic() - began

    # The reference: today's memory (built from the data directory) with its gold-count prior.
    stages = ws.stages(min_confidence=0.0)
    reference = answer_outputs(
        Resolver(ws.memory, stages.resolver), stages, questions, outputs, label="today"
    )
    today = score(prediction_rows(records, outputs, reference), records, catalog=None).overall["query_em"]
    console.print(f"today's memory ({ws.memory.prior_source} prior): Query EM {100 * today:.2f}")
    results = []
    for name, share in priors:
        for weight in weights:
            rows, seconds = run(kind(counts, age_share=share), weight, 0.0)
            em = sum(r.query_em for r in rows) / len(rows)
            results.append(
                {"prior": name, "age_share": share, "weight": weight, "query_em": em, "seconds": seconds}
            )
            console.print(f"{name}, weight {weight:g}: Query EM {100 * em:.2f} ({seconds:.0f} s)")
    best = max(results, key=lambda r: r["query_em"])
    prior = kind(counts, age_share=best["age_share"])
    off, _ = run(prior, best["weight"], 0.0)
    wrong = {r.id for r in off if not r.query_em}
    refusal = []
    for threshold in thresholds or [shipped]:
        on, _ = run(prior, best["weight"], threshold)
        refused = {r.id for r in on if r.outcome == "refused"}
        answered = [r for r in on if r.outcome != "refused"]
        refusal.append(
            {
                "threshold": threshold,
                "shipped": threshold == shipped,
                "refused": len(refused) / len(on),
                "answered_query_em": sum(r.query_em for r in answered) / max(1, len(answered)),
                "query_em": sum(r.query_em for r in on) / len(on),
                "refusal_precision": len(refused & wrong) / max(1, len(refused)),
                "refusal_recall": len(refused & wrong) / max(1, len(wrong)),
            }
        )
    console.print(
        table(
            f"Prior of {args.memory.name} on {dataset} (Query EM, refusal off)",
            ["prior", "weight", "Query EM"],
            [[r["prior"], f"{r['weight']:g}", f"{100 * r['query_em']:.2f}"] for r in results],
        )
    )
    keys = ("refused", "answered_query_em", "query_em", "refusal_precision", "refusal_recall")
    console.print(
        table(
            "Refusal at the best prior (percent)",
            ["threshold", "refused", "EM answered", "EM all", "precision", "recall"],
            [
                [f"{r['threshold']:g}" + (" (shipped)" if r["shipped"] else "")]
                + [f"{100 * r[k]:.2f}" for k in keys]
                for r in refusal
            ],
        )  # fmt: skip
    )
    write_result(
        args.out,
        {
            "memory": str(args.memory),
            "entities": len(memory.entities),
            "prior_source": memory.prior_source,
            "query_encoder": repr(encoder),
            "dataset": dataset,
            "synthetic_ages": args.synthetic_ages,
            "questions": len(records),
            "outputs": source,
            "today_query_em": today,
            "today_prior": ws.memory.prior_source,
            "priors": results,
            "best": best,
            "refusal": refusal,
        },
    )


if __name__ == "__main__":
    main()
