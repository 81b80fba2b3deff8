"""Refusal is on by default: `pgmr ask` and POST /ask refuse a question about an entity the memory lacks, and
say which placeholder, its best candidate and why; --no-refusal (or --threshold 0) answers it anyway.

Real parts as in test_pipeline.py: its tiny T5 trained to write the intermediate queries and its oxigraph store;
a MiniLM memory on disk with test_pipeline's entries plus two other lost lands with large (obscure) IDs, as most
entries of the real memory have, and no "Atlantis"; the service through starlette's TestClient (the real app,
lifespan and all)."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.pipeline import PipelineConfig
from pgmr.resolver.support import shipped_threshold
from test_pipeline import (
    ATLANTIS,
    BERLIN,
    ENTITIES,
    PRIOR_COUNTS,
    PROPERTIES,
    Parts,
    _ask_args,
    build_parts,
)

runner = CliRunner()
LOST_LANDS = [
    {"id": "Q98765432", "label": "Mu", "description": "hypothetical sunken continent in the Pacific"},
    {"id": "Q105432789", "label": "Lemuria", "description": "hypothetical lost land in the Indian Ocean"},
]


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory, encoder: object) -> Parts:
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory

    shared = build_parts(tmp_path_factory, encoder)
    rows = [*ENTITIES, *PROPERTIES, *LOST_LANDS]
    catalog = LabelCatalog(
        CatalogEntry(r["id"], r["label"], r["description"], tuple(r.get("aliases", ()))) for r in rows
    )
    memory_dir = tmp_path_factory.mktemp("refusal") / "memory"
    Memory.build(catalog, memory_dir, encoder, progress=False, prior_counts=PRIOR_COUNTS)  # type: ignore[arg-type]
    return replace(shared, memory_dir=memory_dir)


def test_defaults_carry_the_shipped_threshold() -> None:
    t = shipped_threshold()
    assert 0.0 < t < 1.0
    assert PipelineConfig().min_confidence == t
    assert PipelineConfig().resolver_config().min_confidence == t
    with pytest.raises(ValueError, match="min_confidence"):
        PipelineConfig(min_confidence=1.5)


def test_cli_ask_refuses_by_default_and_says_why(parts: Parts) -> None:
    result = runner.invoke(app, _ask_args(parts, ATLANTIS, "--json"))
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert payload["status"] == "refused" and payload["unsupported"] == ["entity0"]
    entity = next(p for p in payload["placeholders"] if p["name"] == "entity0")
    best = entity["candidates"][0]
    assert entity["confidence"] < entity["min_confidence"] == shipped_threshold()
    assert (
        f"entity0 'Atlantis': best {best['id']} ({best['label']}) rejected: confidence" in payload["reason"]
    )
    assert entity["rejected"] and "confidence" in entity["rejected"]
    # The rendered view says it too.
    shown = runner.invoke(app, _ask_args(parts, ATLANTIS), terminal_width=200)
    assert (
        shown.exit_code == 0 and "status: refused" in shown.stdout and "rejected: confidence" in shown.stdout
    )


def test_cli_ask_answers_when_refusal_is_off(parts: Parts) -> None:
    for off in (["--no-refusal"], ["--threshold", "0"]):
        payload = json.loads(runner.invoke(app, _ask_args(parts, ATLANTIS, *off, "--json")).stdout)
        assert payload["status"] in ("answered", "empty") and payload["mapping"]["entity0"]
    # A question the memory supports is answered with the default.
    payload = json.loads(runner.invoke(app, _ask_args(parts, BERLIN, "--json")).stdout)
    assert payload["status"] == "answered" and payload["boolean"] is True


def test_post_ask_refuses_by_default(parts: Parts) -> None:
    from starlette.testclient import TestClient

    from pgmr.service import create_app

    # Similarity gates off: what refuses is the default confidence threshold alone.
    config = PipelineConfig(
        model_dir=parts.model_dir,
        memory_dir=parts.memory_dir,
        store=str(parts.kg_file),
        data_dir=parts.data_dir,
        timeout=5.0,
    )
    with TestClient(create_app(config)) as client:
        body = client.post("/ask", json={"question": ATLANTIS}).json()
        assert body["status"] == "refused" and body["unsupported"] == ["entity0"]
        assert "entity0 'Atlantis': best" in body["reason"] and "confidence" in body["reason"]
        assert client.post("/ask", json={"question": BERLIN}).json()["status"] == "answered"
