"""API fuzzing from the OpenAPI document: schemathesis against every operation of a REAL uvicorn server on
127.0.0.1 over the real pipeline of test_pipeline.py (tiny trained T5, MiniLM memory, oxigraph store).

Per operation: the document's examples, the coverage phase (boundary values and mutations of bodies, query
strings and headers; undeclared methods) and the fuzzing phase, with valid and invalid data, and every
built-in check on every response (tests/api_fuzzing.py). This is the short CI run; bench/api_fuzz.py is the
long one. What earlier runs found, now fixed and kept fixed here: 405 answers without the `Allow` header,
`"execute": 0` accepted as a boolean, and valid /resolve bodies (long non-ASCII queries) refused with 413.
"""

from __future__ import annotations

import json

import pytest

from api_fuzzing import FuzzReport, load_schema, run
from pgmr.service import create_app
from test_pipeline import Parts
from test_service import running_server

# Hypothesis cases per operation, valid and invalid together (the examples and coverage phases add theirs): enough to reach
# the validation edges, few enough for a CI run of about half a minute on 2 cores.
MAX_EXAMPLES = 20
OPERATIONS = {"POST /ask", "POST /resolve", "GET /memory/search", "GET /health", "GET /text2sparql"}
# What a valid request gets: 200, but from /text2sparql a 404, since this app holds no dataset (the answers of
# one that does are tests/test_text2sparql.py's).
ANSWERED = {**dict.fromkeys(OPERATIONS, 200), "GET /text2sparql": 404}


@pytest.fixture(scope="module")
def report(parts: Parts) -> FuzzReport:
    with running_server(create_app(parts.config())) as url:
        return run(load_schema(url, max_examples=MAX_EXAMPLES))


def _details(report: FuzzReport) -> str:
    return json.dumps({"failures": report.failure_examples[:5], "engine_errors": report.errors[:5]}, indent=1)


def test_every_operation_was_fuzzed_with_valid_and_invalid_data(report: FuzzReport) -> None:
    assert report.stop_reason == "completed" and not report.errors, _details(report)
    assert {op for op, _ in report.statuses} == OPERATIONS
    for operation in OPERATIONS:  # /health has one valid request; the others many
        assert report.cases[(operation, "positive")] >= (1 if operation == "GET /health" else 5), report.cases
    # /health takes no input: nothing invalid can be sent to it (its undeclared methods are still tried).
    for operation in OPERATIONS - {"GET /health"}:
        assert report.cases[(operation, "negative")] >= 10, dict(report.cases)
        statuses = {s for op, s in report.statuses if op == operation}
        assert ANSWERED[operation] in statuses and 422 in statuses and 405 in statuses, (operation, statuses)
    assert report.requests >= 150


def test_no_server_errors(report: FuzzReport) -> None:
    assert report.server_errors == 0, _details(report)
    assert report.checks_run["not_a_server_error"] >= report.requests // 2


def test_every_response_conforms_to_the_openapi_document(report: FuzzReport) -> None:
    assert report.schema_violations == 0, _details(report)
    assert report.checks_run["response_schema_conformance"] > 0


def test_every_check_passes(report: FuzzReport) -> None:
    """Also: invalid data is refused with 4xx, valid data is not, 405 answers carry Allow, ..."""
    assert not report.failures, _details(report)
