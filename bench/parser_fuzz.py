"""The intermediate-query parser under >= 100,000 generated inputs: only the language's own errors may escape.

    python bench/parser_fuzz.py [--examples 100000] [--seed 0]

The inputs come from the strategies the CI test uses (tests/query_strategies.py): valid queries (which must
also print back to the same text), mutations of valid queries (inserted tokens, deletions, truncation,
swapped or repeated lines) and arbitrary text, in the shares 2 : 6 : 2.5 of tests/test_query_fuzz.py. Any
exception other than IntermediateQueryError is counted with its input, not raised, so one bug does not hide
the others; the run fails (exit 1) if there is any, or if a parsed query does not parse back from its own text. Writes
bench/results/parser_fuzz.json.
"""

from __future__ import annotations

import argparse
import sys
import time
import traceback
from collections import Counter
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from rich.table import Table

from _common import console, write_result

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from pgmr.query import IntermediateQueryError, parse  # noqa: E402
from query_strategies import mutated, valid_queries  # noqa: E402

SHARES = {"valid": 2.0, "mutated": 6.0, "arbitrary": 2.5}


class Tally:
    def __init__(self) -> None:
        self.inputs = 0
        self.parsed = 0
        self.query_errors = 0
        self.round_trip_failures = 0
        self.crashes: Counter[str] = Counter()
        self.examples: list[dict[str, str]] = []

    def crash(self, text: str, exc: BaseException) -> None:
        name = type(exc).__name__
        self.crashes[name] += 1
        if len(self.examples) < 20:
            self.examples.append(
                {"input": text, "error": f"{name}: {exc}", "where": traceback.format_exc(limit=-3)}
            )


def run(kind: str, strategy: st.SearchStrategy[str], examples: int, seed: int, tally: Tally) -> float:
    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        derandomize=False,
        phases=[Phase.generate],  # counting, not shrinking: a crash is recorded with its input as drawn
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy)
    def check(text: str) -> None:
        tally.inputs += 1
        try:
            query = parse(text)
        except IntermediateQueryError as exc:
            if not str(exc):
                tally.crash(text, ValueError("IntermediateQueryError without a message"))
            tally.query_errors += 1
            return
        except Exception as exc:  # the finding this bench exists for
            tally.crash(text, exc)
            return
        tally.parsed += 1
        try:
            again = parse(query.to_text())
        except Exception as exc:
            tally.crash(text, exc)
            return
        if again != query or (kind == "valid" and query.to_text() != text):
            tally.round_trip_failures += 1

    started = time.perf_counter()
    check._hypothesis_internal_use_seed = seed  # type: ignore[attr-defined]
    check()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=100_000, help="inputs in all (default 100,000)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    strategies = {"valid": valid_queries(), "mutated": mutated(), "arbitrary": st.text(max_size=200)}
    total_share = sum(SHARES.values())
    rows: list[dict[str, Any]] = []
    totals = Tally()
    for kind, strategy in strategies.items():
        tally = Tally()
        count = round(args.examples * SHARES[kind] / total_share)
        seconds = run(kind, strategy, count, args.seed, tally)
        rows.append(
            {
                "kind": kind,
                "inputs": tally.inputs,
                "parsed": tally.parsed,
                "query_errors": tally.query_errors,
                "other_exceptions": sum(tally.crashes.values()),
                "round_trip_failures": tally.round_trip_failures,
                "seconds": round(seconds, 1),
            }
        )
        totals.inputs += tally.inputs
        totals.crashes.update(tally.crashes)
        totals.round_trip_failures += tally.round_trip_failures
        totals.examples.extend(tally.examples)

    table = Table(title=f"parser fuzz: {totals.inputs:,} inputs (seed {args.seed})")
    for column in rows[0]:
        table.add_column(column, justify="left" if column == "kind" else "right")
    for row in rows:
        table.add_row(*(f"{v:,}" if isinstance(v, int) else str(v) for v in row.values()))
    console.print(table)
    other = sum(totals.crashes.values())
    console.print(
        f"exceptions other than IntermediateQueryError: {other}"
        + (f" ({dict(totals.crashes)})" if other else "")
        + f"; round-trip failures: {totals.round_trip_failures}"
    )
    write_result(
        "parser_fuzz",
        {
            "examples_asked": args.examples,
            "inputs": totals.inputs,
            "seed": args.seed,
            "other_exceptions": other,
            "exception_types": dict(totals.crashes),
            "round_trip_failures": totals.round_trip_failures,
            "by_kind": rows,
            "failing_examples": totals.examples,
        },
    )
    if other or totals.round_trip_failures:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
