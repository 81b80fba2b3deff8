"""An ensemble's reranker fitted with description agreement as shipped and judged per kind, then each set chosen
by it and resolved the same way.

    python bench/ensemble_per_kind.py ENSEMBLE --fit-drafts DRAFTS.jsonl [--also qald10-validation] \\
        SET=DRAFTS.jsonl [SET=DRAFTS.jsonl ...] [--out NAME]

For each resolution (`ResolverConfig(describing_per_kind=False)`, as shipped, and `True`) the reranker is fitted
on `--fit-drafts` as `pgmr ensemble fit-rerank --drafts ... --also ...` fits it (LC-QuAD 2.0 validation after
its first 600 questions, plus the `--also` sets), then each SET's drafts (`pgmr generate ENSEMBLE SET` rows) are
chosen by that reranker and resolved with the same resolution: Query EM with refusal off and at the shipped
threshold. A set that the fit saw (an `--also` set, and lcquad2-validation, whose first 600 only are out of
sample) is marked in-sample. ENSEMBLE's own reranker.json is never read or written: only its members are
used (and its verifier, for the fit's signals). Writes bench/results/OUT.json.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from _common import console, draft_sets, reranked_em, table, write_result
from pgmr.config import default_memory_dir, resolve_data_dir
from pgmr.experiments.ensemble_dir import member_dirs
from pgmr.experiments.ensemble_rerank import fit_reranker, validation_outcomes
from pgmr.memory import Memory
from pgmr.pipeline import shipped_resolver
from pgmr.resolver import ResolverConfig
from pgmr.resolver.support import shipped_threshold


def _fitted_on(name: str, also: list[str]) -> bool:
    """Whether the fit saw (some of) the set's questions: LC-QuAD 2.0 validation after its first 600 always."""
    return name in also or name == "lcquad2-validation"


def _percent(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("ensemble", type=Path)
    parser.add_argument("--fit-drafts", type=Path, required=True)
    parser.add_argument("--also", action="append", default=[])
    parser.add_argument("sets", nargs="*", help="SET=DRAFTS.jsonl")
    parser.add_argument("--data-dir")
    parser.add_argument("--out", default="ensemble_per_kind")
    # Intermixed: the sets may come after --also (a plain parse leaves them unrecognized there).
    args = parser.parse_intermixed_args()
    data_dir = resolve_data_dir(args.data_dir)
    memory = Memory.load(default_memory_dir())
    members = list(member_dirs(args.ensemble))
    sets = draft_sets(args.sets, data_dir)
    runs: list[dict[str, Any]] = []
    for per_kind in (False, True):
        started = time.perf_counter()
        outcomes = validation_outcomes(
            args.fit_drafts,
            data_dir,
            memory,
            args.ensemble,
            also=args.also,
            resolver=ResolverConfig(describing_per_kind=per_kind),
        )
        fit = fit_reranker(outcomes, members, provenance={"describing_per_kind": per_kind})
        run: dict[str, Any] = {
            "describing_per_kind": per_kind,
            "fit_seconds": round(time.perf_counter() - started, 1),
            "fit": fit.figures,
            "sets": {},
        }
        for name, records, drafts in sets:
            row: dict[str, Any] = {"questions": len(records), "in_sample": _fitted_on(name, args.also)}
            for threshold, key in ((0.0, "off"), (shipped_threshold(), "on")):
                config = shipped_resolver(min_confidence=threshold, describing_per_kind=per_kind)
                row[key], finals = reranked_em(memory, records, drafts, fit.reranker, config)
                if threshold == 0.0:
                    row["finals"] = finals
            run["sets"][name] = row
            console.print(f"per kind {per_kind}, {name}: {row['off']:.4f} / {row['on']:.4f}")
        runs.append(run)
    for name, _, _ in sets:
        a, b = (run["sets"][name]["finals"] for run in runs)
        for run in runs:
            run["sets"][name]["differ"] = sum(x != y for x, y in zip(a, b, strict=True))
    columns = ["resolution", "LC-QuAD val first 600", "rest, two-fold"]
    columns += [f"{n}{' (in fit)' if _fitted_on(n, args.also) else ''}" for n, _, _ in sets]
    console.print(
        table(
            f"{args.ensemble}, reranker refitted per resolution (Query EM, refusal off / at the shipped threshold)",
            columns,
            [
                [
                    "per kind" if run["describing_per_kind"] else "as shipped",
                    _percent(run["fit"]["first"]["reranked (fitted on the rest)"]),
                    _percent(run["fit"]["rest"]["reranked (two-fold)"]),
                    *(
                        f"{_percent(run['sets'][n]['off'])} / {_percent(run['sets'][n]['on'])}"
                        for n, _, _ in sets
                    ),
                ]
                for run in runs
            ],
        )
    )
    for run in runs:
        for row in run["sets"].values():
            del row["finals"]
    write_result(args.out, {"ensemble": str(args.ensemble), "fit_drafts": str(args.fit_drafts), "runs": runs})


if __name__ == "__main__":
    main()
