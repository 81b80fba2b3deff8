"""Schemathesis against a running pgmr service, counted: shared by tests/test_api_fuzz.py (the short CI run)
and bench/api_fuzz.py (the long run).

It runs schemathesis's own engine (what `st run` runs) over real HTTP: per operation of the service's
/openapi.json, the schema's examples, the coverage phase (boundary values and mutations of bodies, query
strings and headers, and undeclared methods) and the fuzzing phase (hypothesis), each with valid (positive)
and invalid (negative) data, and every built-in check on every response. The pytest plugin's
`schemathesis.pytest.from_fixture` is not used: with pytest 9 it fails before the first case
("'Function' object has no attribute '_nodeid'"), and the engine also gives the counts the bench reports.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import schemathesis
from schemathesis import GenerationMode
from schemathesis.engine import events, from_schema

# Rejections of invalid data that schemathesis does not expect by default but the service documents:
# 413 is how a body over the size limit is refused, before anything parses it.
NEGATIVE_EXTRA = ["413"]
# Valid data may still be refused on purpose: 400 `read_only` for a SPARQL UPDATE (a valid string that the
# service will not run). 503/504 (limits) are 5xx, which the check already allows; `not_a_server_error`
# judges those.
POSITIVE_EXTRA = ["400"]


@dataclass
class FuzzReport:
    requests: int = 0
    seconds: float = 0.0
    stop_reason: str = ""
    statuses: Counter[tuple[str, int | None]] = field(default_factory=Counter)  # (operation, HTTP status)
    cases: Counter[tuple[str, str]] = field(default_factory=Counter)  # (operation, positive|negative)
    checks_run: Counter[str] = field(default_factory=Counter)
    failures: Counter[tuple[str, str]] = field(default_factory=Counter)  # (operation, check)
    failure_examples: list[dict[str, str]] = field(default_factory=list)
    errors: list[str] = field(
        default_factory=list
    )  # the engine's own errors (e.g. a hypothesis health check)

    @property
    def server_errors(self) -> int:
        return sum(n for (_, status), n in self.statuses.items() if status is not None and status >= 500)

    @property
    def schema_violations(self) -> int:
        """Responses that break the OpenAPI document: body, status code, content type or headers."""
        kinds = {
            "response_schema_conformance",
            "status_code_conformance",
            "content_type_conformance",
            "response_headers_conformance",
        }
        return sum(n for (_, check), n in self.failures.items() if check in kinds)

    def to_json(self) -> dict[str, Any]:
        operations = sorted({op for op, _ in self.statuses} | {op for op, _ in self.cases})
        return {
            "requests": self.requests,
            "seconds": self.seconds,
            "stop_reason": self.stop_reason,
            "server_errors": self.server_errors,
            "schema_violations": self.schema_violations,
            "failures": sum(self.failures.values()),
            "operations": {
                op: {
                    "requests": sum(n for (o, _), n in self.statuses.items() if o == op),
                    "statuses": {
                        str(s): n for (o, s), n in sorted(self.statuses.items(), key=str) if o == op
                    },
                    "cases": {m: n for (o, m), n in self.cases.items() if o == op},
                }
                for op in operations
            },
            "checks_run": dict(self.checks_run),
            "failures_by_check": {f"{op} {check}": n for (op, check), n in self.failures.items()},
            "failure_examples": self.failure_examples,
            "engine_errors": self.errors,
        }


def load_schema(
    url: str, *, max_examples: int, seed: int | None = None, workers: int = 1
) -> schemathesis.BaseSchema:
    """The service's OpenAPI document, set up for the run: every check, both modes, three phases."""
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", wait_for_schema=30.0)
    schema.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE],
        max_examples=max_examples,
        # No seed: derandomized, the same cases on every run (a CI failure reproduces); a seed: varied.
        deterministic=seed is None,
        database="none",
    )
    schema.config.phases.update(phases=["examples", "coverage", "fuzzing"])
    schema.config.checks.update(included_check_names=["all"])
    negative = schema.config.checks.negative_data_rejection
    negative.expected_statuses = [*negative.expected_statuses, *NEGATIVE_EXTRA]
    positive = schema.config.checks.positive_data_acceptance
    positive.expected_statuses = [*positive.expected_statuses, *POSITIVE_EXTRA]
    # Collect every failure rather than stopping an operation at its first one.
    schema.config.update(continue_on_failure=True, workers=workers, request_timeout=120)
    if seed is not None:
        schema.config.seed = seed
    return schema


def run(schema: schemathesis.BaseSchema, *, examples_kept: int = 20) -> FuzzReport:
    """Run the engine to the end and count what it sent, what came back, and what failed."""
    report = FuzzReport()
    started = time.perf_counter()
    for event in from_schema(schema).execute():
        if isinstance(event, events.ScenarioFinished | events.FuzzScenarioFinished):
            _tally(report, event.recorder, examples_kept)
        elif isinstance(event, events.NonFatalError):
            report.errors.append(f"{event.label}: {event.info.title}: {event.info.message}")
        elif isinstance(event, events.FatalError):
            report.errors.append(f"fatal: {event.exception!r}")
        elif isinstance(event, events.EngineFinished):
            report.stop_reason = str(event.stop_reason.value)
    report.seconds = time.perf_counter() - started
    return report


def _tally(report: FuzzReport, recorder: Any, examples_kept: int) -> None:
    operation = recorder.label
    for case_id, node in recorder.cases.items():
        meta = node.value.meta
        report.cases[(operation, meta.generation.mode.value if meta is not None else "explicit")] += 1
        del case_id
    for interaction in recorder.interactions.values():
        report.requests += 1
        status = interaction.response.status_code if interaction.response is not None else None
        report.statuses[(operation, status)] += 1
    for checks in recorder.checks.values():
        for check in checks:
            report.checks_run[check.name] += 1
            if check.failure_info is None:
                continue
            report.failures[(operation, check.name)] += 1
            if len(report.failure_examples) < examples_kept:
                failure = check.failure_info.failure
                report.failure_examples.append(
                    {
                        "operation": operation,
                        "check": check.name,
                        "title": str(failure.title),
                        "message": str(failure.message)[:2000],
                        "reproduce": check.failure_info.code_sample[:2000],
                    }
                )


__all__ = ["FuzzReport", "load_schema", "run"]
