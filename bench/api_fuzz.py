"""The long API fuzzing run: schemathesis against every operation of a real `pgmr serve` on loopback.

    python bench/api_fuzz.py [--max-examples 2000] [--seed N] [--model DIR] [--memory DIR] [--store SPEC]

Without --url it starts `pgmr serve` on a free 127.0.0.1 port (as bench/serve_load.py does, with the given
--model/--memory/--store/--data-dir), then runs what tests/test_api_fuzz.py runs in CI (tests/api_fuzzing.py:
the examples, coverage and fuzzing phases, valid and invalid data, every built-in check) with many more
hypothesis cases per operation and a random seed (printed, and stored, so a failure can be replayed with
--seed). Counts the requests sent, the 5xx answers, the responses that break the OpenAPI document and every
other check failure; writes bench/results/api_fuzz.json. Exit code 1 on any 5xx, schema violation, check
failure or engine error.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
from pathlib import Path

from rich.table import Table

from _common import console, write_result
from serve_load import add_server_arguments, running_service

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from api_fuzzing import load_schema, run  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--url", help="a running pgmr service on loopback (default: start one)")
    parser.add_argument(
        "--max-examples",
        type=int,
        default=2000,
        help="hypothesis cases per operation (valid and invalid together)",
    )
    parser.add_argument("--seed", type=int, help="replay a run (default: a random seed, printed)")
    parser.add_argument(
        "--workers", type=int, default=1, help="schemathesis workers (operations in parallel)"
    )
    add_server_arguments(parser)
    args = parser.parse_args()
    if not 1 <= args.max_examples <= 1_000_000:
        raise SystemExit("--max-examples must be between 1 and 1000000")
    seed = args.seed if args.seed is not None else random.getrandbits(32)

    with running_service(args, "api-fuzz") as service:
        console.print(f"service ready: {service.health}")
        console.print(
            f"fuzzing {service.url} with up to {args.max_examples} cases per operation, seed {seed}"
        )
        report = run(
            load_schema(service.url, max_examples=args.max_examples, seed=seed, workers=args.workers)
        )
    log, health = service.log, service.health
    if log is not None and "Traceback" in log.read_text(errors="replace"):
        report.errors.append(f"the server logged a traceback: see {log}")

    result = report.to_json()
    table = Table(title=f"schemathesis on pgmr serve: {report.requests} requests, seed {seed}")
    for column in ("operation", "requests", "valid / invalid cases", "2xx", "4xx", "5xx"):
        table.add_column(column, justify="left" if column == "operation" else "right")
    for operation, row in result["operations"].items():
        statuses = {int(s) if s != "None" else 0: n for s, n in row["statuses"].items()}
        cases = row["cases"]
        fives = sum(n for s, n in statuses.items() if s >= 500)
        table.add_row(
            operation,
            str(row["requests"]),
            f"{cases.get('positive', 0)} / {cases.get('negative', 0)}",
            str(sum(n for s, n in statuses.items() if 200 <= s < 300)),
            str(sum(n for s, n in statuses.items() if 400 <= s < 500)),
            f"[{'green' if not fives else 'red'}]{fives}[/]",
        )
    console.print(table)
    verdict = Table(title="verdict")
    verdict.add_column("measure")
    verdict.add_column("value", justify="right")
    for name, value in (
        ("requests", report.requests),
        ("server errors (5xx, expected 0)", report.server_errors),
        ("schema violations (expected 0)", report.schema_violations),
        ("check failures, all checks (expected 0)", sum(report.failures.values())),
        ("engine errors (expected 0)", len(report.errors)),
    ):
        bad = name != "requests" and value
        verdict.add_row(name, f"[{'red' if bad else 'green'}]{value}[/]")
    verdict.add_row("checks run", str(sum(report.checks_run.values())))
    verdict.add_row("time", f"{report.seconds:.0f} s")
    console.print(verdict)
    for example in report.failure_examples[:5]:
        console.print(
            f"[red]{example['operation']} {example['check']}[/]: {example['title']}\n{example['reproduce']}"
        )
    for error in report.errors[:5]:
        console.print(f"[red]engine error[/]: {error}")
    write_result(
        "api_fuzz",
        {
            "max_examples": args.max_examples,
            "seed": seed,
            "workers": args.workers,
            **result,
            "service": health,
            "server_log": str(log) if log else None,
            "cpus": os.cpu_count(),
        },
    )
    if report.server_errors or report.schema_violations or report.failures or report.errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
