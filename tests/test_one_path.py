"""One way for a question, whatever the way in: `pgmr ask --json`, POST /ask of a real server (uvicorn on
127.0.0.1, configured as `pgmr serve` configures it) and an experiment's prediction rows (the code path of
`pgmr experiment`, run on the same questions) end with byte-identical final SPARQL and the same verdicts.

The real parts of test_pipeline.py: its tiny T5 (trained to write the intermediate queries of four
questions), its MiniLM memory on disk. No store: experiments leave execution to the scorer, so the KG choice
(which needs one) is not part of the comparison. The refusal threshold is 0.8 on every way in (as in
test_pipeline.py's `pgmr ask` tests): with this small memory it refuses the question about Atlantis, so a
refusal is compared too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.jsonl import read_jsonl
from test_pipeline import ATLANTIS, BERLIN, DIRECT_TARGET, HAMBURG, PARIS, Parts, _ask_args
from test_service import running_server

# The four questions the model learnt, and two it did not: one with a misspelt entity (grounded in the
# question before resolution), one worded otherwise.
QUESTIONS = [
    PARIS,
    BERLIN,
    HAMBURG,
    ATLANTIS,
    "How many people live in Hamburgh?",
    "Who is head of state of France?",
]

runner = CliRunner()
THRESHOLD = 0.8


def _verdict(status: str, sparql: str | None) -> tuple[str, str | None]:
    # Without a store, ask and serve give a resolved query the status "resolved", as prediction rows do.
    return (status, sparql)


@pytest.fixture(scope="module")
def by_cli(parts: Parts) -> dict[str, tuple[str, str | None]]:
    results = {}
    for question in QUESTIONS:
        result = runner.invoke(
            app, [*_ask_args(parts, question, "--store", "none", "--threshold", str(THRESHOLD), "--json")]
        )
        assert result.exit_code == 0, result.output
        payload = json.loads(result.stdout)
        results[question] = _verdict(payload["status"], payload["sparql"])
    return results


@pytest.fixture(scope="module")
def by_server(parts: Parts) -> dict[str, tuple[str, str | None]]:
    from pgmr.cli.ask import build_config
    from pgmr.cli.common import Settings
    from pgmr.pipeline import Pipeline
    from pgmr.service import create_app

    # What `pgmr serve --model M --memory D --store none --threshold 0.8` builds (its defaults for the rest).
    config = build_config(
        Settings(parts.data_dir),
        model=parts.model_dir,
        memory_dir=parts.memory_dir,
        store="none",
        k=5,
        threshold=THRESHOLD,
        kg_check=True,
        max_probes=8,
        timeout=10.0,
        verify_memory=True,
    )
    pipeline = Pipeline.load(config)
    results = {}
    try:
        with (
            running_server(create_app(pipeline=pipeline)) as url,
            httpx.Client(base_url=url, timeout=60) as client,
        ):
            for question in QUESTIONS:
                response = client.post("/ask", json={"question": question})
                assert response.status_code == 200, response.text
                body = response.json()
                results[question] = _verdict(body["status"], body["sparql"])
    finally:
        pipeline.close()
    return results


@pytest.fixture(scope="module")
def by_experiment(
    parts: Parts, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, tuple[str, str | None]]:
    from pgmr.datasets import QARecord
    from pgmr.experiments.common import ExperimentSettings, Workspace, run_system, system_spec

    out = tmp_path_factory.mktemp("one-path")
    ws = Workspace(
        ExperimentSettings(
            data_dir=parts.data_dir,
            out_dir=out,
            models={"pgmr": parts.model_dir},
            memory_dir=parts.memory_dir,
            min_confidence=THRESHOLD,
            progress=False,
        )
    )
    records = [QARecord(str(i), q, DIRECT_TARGET, "test") for i, q in enumerate(QUESTIONS)]
    entry = run_system(
        ws, system_spec("pgmr", parts.model_dir), records, experiment="one-path", dataset="test", catalog=None
    )
    assert entry["status"] == "ok", entry
    rows: list[dict[str, Any]] = list(read_jsonl(Path(out) / "pgmr" / "predictions.jsonl"))
    by_id = {row["id"]: row for row in rows}
    return {
        q: _verdict(by_id[str(i)]["status"], by_id[str(i)].get("sparql")) for i, q in enumerate(QUESTIONS)
    }


def test_ask_serve_and_experiments_write_the_same_final_sparql(
    by_cli: dict[str, tuple[str, str | None]],
    by_server: dict[str, tuple[str, str | None]],
    by_experiment: dict[str, tuple[str, str | None]],
) -> None:
    for question in QUESTIONS:
        assert by_cli[question] == by_server[question] == by_experiment[question], question
    statuses = [status for status, _ in by_cli.values()]
    # The comparison means something: queries were resolved, and the unknown land was refused.
    assert statuses.count("resolved") >= 2 and by_cli[ATLANTIS][0] == "refused", by_cli
    assert all(sparql is None or sparql.startswith("PREFIX") for _, sparql in by_cli.values())
