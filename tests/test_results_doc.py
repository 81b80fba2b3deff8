"""docs/results.md without running anything: it is exactly what results-doc makes of the published runs under
docs/results/, and the CK25 experiment (beyond the paper) gets its overview row and section without moving a
number of the paper's. Its rows come from runs made at different times, gathered with `--keep-from`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pgmr.experiments import EXPERIMENTS
from pgmr.experiments.ck25_report import TEXT2SPARQL25_BEST_CK25, tables
from pgmr.experiments.ck25_systems import combined, kept_systems, run_entry, systems_of
from pgmr.experiments.results_doc import load_metrics, publish, results_document
from pgmr.experiments.settings import ExperimentError

ROOT = Path(__file__).resolve().parents[1]


def test_docs_results_md_is_what_results_doc_makes_of_the_published_runs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Regenerating changes nothing: every section, number and sentence comes from docs/results/*/metrics.json."""
    monkeypatch.chdir(ROOT)
    published = Path("docs") / "results"
    assert results_document(published) == (ROOT / "docs" / "results.md").read_text(encoding="utf-8")


def _metrics(**overrides: Any) -> dict[str, Any]:
    base = {
        "questions": 25,
        "statuses": {"resolved": 20, "refused": 3, "invalid": 2},
        "gold_iris": 96,
        "gold_iris_right": 44,
        "iri_accuracy": 0.4583,
        "invented_iris": 0,
        "queries_with_invented_iris": 0,
        "verbatim_iris": {"http://dbpedia.org/resource/Poland": 1},
        "query_em": 0.0,
        "answer_precision": 0.96,
        "answer_recall": 0.04,
        "answer_f1": 0.04,
        "answer_set_f1": 0.04,
        "answers_exact": 1,
        "execution_errors": 0,
        "gold_query_answer_f1": 0.92,
        "order_aware_questions": 1,
    }
    return {**base, **overrides}


def _chat_run(stem: str, started_at: str, **metrics: Any) -> dict[str, Any]:
    """A chat run's metrics.json as written before runs held `systems` (the one system at the top level)."""
    model = f"/root/.cache/pgmr/llm/{stem}.gguf"
    return {
        "experiment": "ck25",
        "title": "CK25",
        "condition": "chat",
        "questions_file": "../shared/data/ck25/questions-dev.jsonl",
        "graph_file": "../shared/data/ck25/prod-inst.ttl",
        "memory": "artifacts/ck25/memory",
        "model": model,
        "generator": {"model": model, "grammar": True, "two_step": True, "examples": 6, "system_chars": 5258},
        "min_confidence": 0.51,
        "command": f"pgmr experiment ck25 --server URL -o artifacts/experiments/ck25-chat-{stem}",
        "started_at": started_at,
        "metrics": _metrics(**metrics),
        "generation_seconds": 516.0,
        "seconds_per_question": 20.64,
        "wall_seconds": 517.5,
    }


def _oracle_run(kept: dict[str, dict[str, Any]]) -> dict[str, Any]:
    doc = {
        **_chat_run("unused", "2026-12-07T07:00:00+00:00"),
        "condition": "oracle",
        "model": None,
        "generator": {},
        "command": "pgmr experiment ck25 --oracle --keep-from A --keep-from B",
        "metrics": _metrics(
            statuses={"resolved": 25}, gold_iris_right=96, iri_accuracy=1.0, query_em=1.0, answer_f1=0.92
        ),
        "seconds_per_question": 0.3,
        "wall_seconds": 9.0,
        "settings": {"questions": 25, "limit": None},
    }
    key, entry = run_entry(doc)
    return {**doc, "system": key, "systems": combined(key, entry, kept)}


SAME = {"questions file": "questions-dev.jsonl", "graph file": "prod-inst.ttl", "questions": 25}


def _write(path: Path, doc: dict[str, Any]) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics.json").write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_keep_from_gathers_runs_made_at_different_times(tmp_path: Path) -> None:
    big = _write(tmp_path / "big", _chat_run("qwen2.5-coder-1.5b", "2026-12-07T06:16:00+00:00"))
    small = _write(tmp_path / "small", _chat_run("qwen2.5-coder-0.5b", "2026-12-07T06:09:55+00:00"))
    kept = kept_systems([big, small / "metrics.json"], SAME)
    assert list(kept) == ["chat-qwen2.5-coder-1.5b", "chat-qwen2.5-coder-0.5b"]
    assert kept["chat-qwen2.5-coder-1.5b"]["carried_from"] == {
        "started_at": "2026-12-07T06:16:00+00:00",
        "command": "pgmr experiment ck25 --server URL -o artifacts/experiments/ck25-chat-qwen2.5-coder-1.5b",
    }
    doc = _oracle_run(kept)
    assert list(doc["systems"]) == ["oracle", "chat-qwen2.5-coder-1.5b", "chat-qwen2.5-coder-0.5b"]
    assert "carried_from" not in doc["systems"]["oracle"]

    # Kept again from the published run, a row keeps the date of the run that evaluated it; of two runs of
    # the same system, the later one is kept.
    published = _write(tmp_path / "published", doc)
    newer = _write(tmp_path / "newer", _chat_run("qwen2.5-coder-0.5b", "2026-12-08T00:00:00+00:00"))
    again = kept_systems([published, newer], SAME)
    assert again["chat-qwen2.5-coder-1.5b"]["carried_from"]["started_at"] == "2026-12-07T06:16:00+00:00"
    assert again["oracle"]["carried_from"]["started_at"] == "2026-12-07T07:00:00+00:00"
    assert again["chat-qwen2.5-coder-0.5b"]["carried_from"]["started_at"] == "2026-12-08T00:00:00+00:00"
    # This run's own system replaces the kept one.
    assert "carried_from" not in combined("oracle", systems_of(doc)["oracle"], again)["oracle"]


def test_keep_from_refuses_a_run_on_other_questions_or_not_of_ck25(tmp_path: Path) -> None:
    fewer = _chat_run("qwen2.5-coder-1.5b", "2026-12-07T06:16:00+00:00", questions=10)
    with pytest.raises(ExperimentError, match="questions 10"):
        kept_systems([_write(tmp_path / "fewer", fewer)], SAME)
    other = {**_chat_run("x", "2026"), "questions_file": "questions-test.jsonl"}
    with pytest.raises(ExperimentError, match="would not be comparable"):
        kept_systems([_write(tmp_path / "other", other)], SAME)
    hashed = {**_chat_run("x", "2026"), "settings": {"graph_sha256": "a" * 64}}
    with pytest.raises(ExperimentError, match="graph sha256"):
        kept_systems([_write(tmp_path / "hashed", hashed)], {**SAME, "graph sha256": "b" * 64})
    # A run without the hashes (written before they were recorded) is compared by names and count.
    assert kept_systems([tmp_path / "hashed"], SAME) and kept_systems([tmp_path / "other"], {})
    with pytest.raises(ExperimentError, match="not the metrics.json of a ck25 run"):
        kept_systems([_write(tmp_path / "qald", {"experiment": "qald10"})], SAME)
    with pytest.raises(ExperimentError, match="cannot read"):
        kept_systems([tmp_path / "missing"], SAME)


def _ck25_doc(tmp_path: Path) -> dict[str, Any]:
    big = _write(tmp_path / "big", _chat_run("qwen2.5-coder-1.5b", "2026-12-07T06:16:00+00:00"))
    small = _write(
        tmp_path / "small",
        _chat_run("qwen2.5-coder-0.5b", "2026-12-07T06:09:55+00:00", gold_iris_right=28, iri_accuracy=0.2917),
    )
    return _oracle_run(kept_systems([big, small], SAME))


def test_the_ck25_table_has_every_row_and_the_challenges_best(tmp_path: Path) -> None:
    text = tables(_ck25_doc(tmp_path))
    rows = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| system")]
    assert [r.split(" | ")[0] for r in rows] == [
        "| oracle (a perfect generator)",
        "| pgmr + Qwen2.5-Coder-1.5B-Instruct (schema prompt, no training pairs)",
        "| pgmr + Qwen2.5-Coder-0.5B-Instruct (schema prompt, no training pairs)",
        "| TEXT2SPARQL'25 best published on CK25",
    ]
    assert rows[0].split(" | ")[1:7] == ["this run", "96 / 96 (100.00%)", "0", "0", "25 / 0 / 0", "100.00%"]
    assert rows[1].split(" | ")[1:3] == ["run 2026-12-07 06:16", "44 / 96 (45.83%)"]
    assert rows[2].split(" | ")[2] == "28 / 96 (29.17%)"
    assert rows[1].endswith("| 0.0400 | 20.64 |")
    assert rows[3].endswith(f"| {TEXT2SPARQL25_BEST_CK25:.3f} | - |")
    assert "kept from the run of 2026-12-07T06:09:55+00:00" in text
    assert (
        "its own full CK25 question set; the rows above answer the 25 questions of `questions-dev.jsonl`"
        in text
    )


def test_ck25_is_published_beyond_the_paper_without_moving_its_numbers(tmp_path: Path) -> None:
    published = tmp_path / "published"
    paper = {n: d for n, d in load_metrics(ROOT / "docs" / "results").items() if EXPERIMENTS[n].paper}
    without = results_document(published, docs={**paper, "ck25": None})
    assert "| ck25 | not run |" in without and "Not run: no `ck25/metrics.json` yet" in without

    run = tmp_path / "experiments" / "ck25"
    doc = _ck25_doc(tmp_path)
    _write(run, doc)
    (run / "report.md").write_text("# CK25\n", encoding="utf-8")
    (run / "predictions.jsonl").write_text("", encoding="utf-8")
    assert publish(run.parent, published) == ["ck25"]
    assert sorted(p.name for p in (published / "ck25").iterdir()) == ["metrics.json", "report.md"]
    docs = {**paper, "ck25": load_metrics(published)["ck25"]}
    text = results_document(published, docs=docs)
    # The paper's part is untouched: the text without ck25 is the text with ck25 less what ck25 added.
    overview, _, rest = text.partition("\nBeyond the paper: ")
    assert without.startswith(overview)
    assert "Total wall time of the published runs" in overview
    beyond, _, sections = rest.partition("\n## The paper's Table 1 (reference)")
    assert "| ck25 | full run; chat-qwen2.5-coder-1.5b kept from 2026-12-07T06:16:00+00:00; " in beyond
    assert "| 2026-12-07T07:00:00+00:00 | 9 s |" in beyond
    paper_sections, _, ck25 = sections.partition("\n## CK25: ")
    assert "## The paper's Table 1 (reference)" + paper_sections + "\n## CK25: " in without
    assert paper_sections.rstrip().endswith("not comparable to the paper's.")
    assert ck25.startswith("PGMR over a corporate knowledge graph (not Wikidata) (`ck25`)")
    assert "Command: `pgmr experiment ck25 --oracle --keep-from A --keep-from B`" in ck25
    assert (
        "`/root/.cache/pgmr/llm/qwen2.5-coder-1.5b.gguf` (pgmr; a served chat model, prompted with the graph's "
        "schema and 6 examples written from it, not trained here)" in ck25
    )
    assert tables(doc) in ck25

    # A run written before runs held `systems` is still published and rendered (one row).
    _write(run, _chat_run("qwen2.5-coder-1.5b", "2027-01-01T00:00:00+00:00"))
    assert publish(run.parent, published) == ["ck25"]
    text = results_document(published, docs={**paper, **load_metrics(published)})
    assert "| ck25 | full run | 2027-01-01T00:00:00+00:00 |" in text
    assert "| pgmr + Qwen2.5-Coder-1.5B-Instruct (schema prompt, no training pairs) | this run |" in text
