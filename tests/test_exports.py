"""The standard exports (t2s-metrics.jsonl, qald.json) of `pgmr eval` and of an experiment's systems, on real
QALD-10 and CK25 questions and the real small QALD-10 answer graph; qald.json is checked against the shape of
the official qald_10.json."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.jsonl import read_jsonl, write_jsonl

pytestmark = pytest.mark.slow
runner = CliRunner()
T2S_KEYS = {"id", "golden", "generated", "order_matters"}
# QALD-10's per-question keys less `aggregation`, an annotation of the dataset that a system does not output.
DATASET_ONLY_KEYS = {"aggregation"}
TERM_KEYS = {"type", "value", "datatype", "xml:lang"}

# Real QALD-10 test ids, in an order of their own: 114 has an ORDER BY ... LIMIT 1 gold; 0 and 12 (ASK) are
# answered right by the small graph; 26 asks the graph for something it lacks; 9 is refused; 5 is cut off.
QALD_ROWS: list[dict[str, Any]] = [
    {
        "id": "114",
        "prediction": "SELECT DISTINCT ?result WHERE { ?result wdt:P4214 ?ls . "
        "FILTER(?result IN (wd:Q174199, wd:Q36341)) } ORDER BY DESC(?ls) LIMIT 1",
    },
    {"id": "0", "prediction": "SELECT DISTINCT ?result WHERE { wd:Q761383 wdt:P138 ?result . }"},
    {"id": "9", "prediction": "(pgmr output)", "status": "refused", "reason": "no close entity"},
    {"id": "12", "prediction": "ASK { wd:Q3208174 wdt:P400 wd:Q5014725 }"},
    {"id": "26", "prediction": "SELECT DISTINCT ?result WHERE { wd:Q21102 wdt:P17 ?result }"},
    {"id": "5", "prediction": "SELECT DISTINCT ?x WHERE { wd:Q81230 wdt:P414 "},
]


@pytest.fixture(scope="module")
def data_dir() -> Path:
    try:
        return resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no ../shared/data")


@pytest.fixture(scope="module")
def official(data_dir: Path) -> dict[str, Any]:
    return json.loads((data_dir / "qald10" / "qald_10.json").read_text(encoding="utf-8"))


def _eval(data_dir: Path, *args: str) -> Any:
    return runner.invoke(app, ["--data-dir", str(data_dir), "eval", *args])


def _check_results_form(answer: dict[str, Any]) -> None:
    """One answer in SPARQL 1.1 JSON results form, as qald_10.json writes them."""
    if "boolean" in answer:
        assert set(answer) == {"head", "boolean"} and answer["head"] == {}
        assert isinstance(answer["boolean"], bool)
        return
    assert set(answer) == {"head", "results"} and set(answer["head"]) == {"vars"}
    assert set(answer["results"]) == {"bindings"}
    for binding in answer["results"]["bindings"]:
        assert set(binding) <= set(answer["head"]["vars"])
        for term in binding.values():
            assert set(term) <= TERM_KEYS and {"type", "value"} <= set(term)


def _check_qald_shape(doc: dict[str, Any], official: dict[str, Any]) -> None:
    assert set(doc) == set(official)
    assert set(doc["dataset"]) == set(official["dataset"])
    official_keys = {key for q in official["questions"] for key in q}
    for question in doc["questions"]:
        assert set(question) == official_keys - DATASET_ONLY_KEYS
        assert set(question["query"]) == {"sparql"}
        assert isinstance(question["query"]["sparql"], str)
        assert question["question"] and all(set(q) == {"language", "string"} for q in question["question"])
        assert isinstance(question["answers"], list)
        for answer in question["answers"]:
            _check_results_form(answer)
    # The official answers pass the same check, so the two files agree on what an answer looks like.
    for question in official["questions"]:
        for answer in question["answers"]:
            _check_results_form(answer)


def test_eval_with_a_store_exports_t2s_metrics_and_qald_with_executed_answers(
    data_dir: Path, official: dict[str, Any], tmp_path: Path
) -> None:
    from pgmr.datasets import load_named
    from pgmr.stores import default_kg_file

    predictions = tmp_path / "qald-preds.jsonl"
    write_jsonl(predictions, QALD_ROWS)
    out = tmp_path / "eval"
    store = str(default_kg_file(data_dir))
    result = _eval(data_dir, str(predictions), "--gold", "qald10-test", "-o", str(out), "--store", store)
    assert result.exit_code == 0, result.output
    summary = " ".join(result.output.split())
    assert "t2s-metrics.jsonl and qald.json" in summary and "pass --store" not in summary

    gold = {r.id: r for r in load_named("qald10-test", data_dir).records}
    ids = [row["id"] for row in QALD_ROWS]

    t2s = list(read_jsonl(out / "t2s-metrics.jsonl"))
    assert all(set(row) == T2S_KEYS for row in t2s)
    assert [row["id"] for row in t2s] == ids
    assert [row["golden"] for row in t2s] == [gold[i].sparql for i in ids]
    assert [row["order_matters"] for row in t2s] == [True, False, False, False, False, False]
    assert t2s[0]["generated"] == QALD_ROWS[0]["prediction"]
    assert t2s[2]["generated"] == ""  # refused: no final query
    assert t2s[5]["generated"] == QALD_ROWS[5]["prediction"]  # invalid output is still what the system wrote

    doc = json.loads((out / "qald.json").read_text(encoding="utf-8"))
    _check_qald_shape(doc, official)
    assert doc["dataset"] == {"id": "qald10-test"}
    questions = doc["questions"]
    assert [q["id"] for q in questions] == ids
    english = {
        str(q["id"]): next(s["string"] for s in q["question"] if s["language"] == "en")
        for q in official["questions"]
    }
    assert [q["question"] for q in questions] == [[{"language": "en", "string": english[i]}] for i in ids]
    assert [q["query"]["sparql"] for q in questions] == [row["generated"] for row in t2s]

    answers = {q["id"]: q["answers"] for q in questions}
    by_id = {str(q["id"]): q["answers"] for q in official["questions"]}
    # Right queries: the store's answers are QALD-10's own gold answers, binding for binding.
    assert answers["0"] == by_id["0"]
    assert answers["12"] == by_id["12"] == [{"head": {}, "boolean": True}]
    # Executed, nothing found: an empty result, not a missing one.
    assert answers["26"] == [{"head": {"vars": ["result"]}, "results": {"bindings": []}}]
    assert answers["114"] == [{"head": {"vars": ["result"]}, "results": {"bindings": []}}]
    assert answers["9"] == [] and answers["5"] == []  # refused, unparsable: nothing ran
    # The answers are the ones scored: predictions.jsonl counts as many values as qald.json holds.
    scored = {row["id"]: row["eval"]["answers"] for row in read_jsonl(out / "predictions.jsonl")}
    assert scored["0"]["n_predicted"] == len(answers["0"][0]["results"]["bindings"]) == 1
    assert scored["0"]["f1"] == 1.0 and scored["26"]["f1"] == 0.0


def test_eval_without_a_store_exports_empty_answers_and_order_from_the_gold_or_the_dataset(
    data_dir: Path, official: dict[str, Any], tmp_path: Path
) -> None:
    # Gold from each row: the outer ORDER BY ... LIMIT counts, a sub-select's does not.
    top_k = "SELECT ?c WHERE { ?c wdt:P31 wd:Q6256 ; wdt:P1082 ?n } ORDER BY DESC(?n) LIMIT 3"
    inner = (
        "SELECT ?c WHERE { { SELECT ?c WHERE { ?c wdt:P31 wd:Q6256 ; wdt:P1082 ?n } "
        "ORDER BY DESC(?n) LIMIT 3 } ?c wdt:P36 ?capital }"
    )
    ordered_no_limit = "SELECT ?c WHERE { ?c wdt:P31 wd:Q6256 ; wdt:P1082 ?n } ORDER BY DESC(?n)"
    rows = [
        {
            "id": "top-k",
            "question": "Which three countries have most people?",
            "prediction": top_k,
            "gold": top_k,
        },
        {"id": "inner", "question": "Capitals of the three biggest?", "prediction": inner, "gold": inner},
        {
            "id": "no-limit",
            "question": "Countries by population?",
            "prediction": "",
            "gold": ordered_no_limit,
        },
    ]
    predictions = tmp_path / "rows-gold.jsonl"
    write_jsonl(predictions, rows)
    out = tmp_path / "eval"
    result = _eval(data_dir, str(predictions), "-o", str(out), "--no-catalog")
    assert result.exit_code == 0, result.output
    assert "pass --store" in " ".join(result.output.split())
    t2s = list(read_jsonl(out / "t2s-metrics.jsonl"))
    assert [(r["id"], r["order_matters"]) for r in t2s] == [
        ("top-k", True),
        ("inner", False),
        ("no-limit", False),
    ]
    assert [r["golden"] for r in t2s] == [top_k, inner, ordered_no_limit]
    assert t2s[2]["generated"] == ""  # an empty prediction has no query either
    doc = json.loads((out / "qald.json").read_text(encoding="utf-8"))
    _check_qald_shape(doc, official)
    assert doc["dataset"] == {"id": "rows-gold"}
    assert [q["answers"] for q in doc["questions"]] == [[], [], []]
    assert [q["question"][0]["string"] for q in doc["questions"]] == [r["question"] for r in rows]

    # CK25 says per question whether order matters, and that flag wins over the query: ck25:19 ends in ORDER BY
    # ... LIMIT 1 (one row has no order) and ck25:27 in ORDER BY without LIMIT (a ranked list).
    ck25 = data_dir / "ck25" / "questions-dev.jsonl"
    dev = {row["id"]: row for row in read_jsonl(ck25)}
    ck_rows = [{"id": i, "prediction": dev[i]["sparql"]} for i in ("ck25:19-en", "ck25:27-en", "ck25:1-en")]
    write_jsonl(predictions, ck_rows)
    out = tmp_path / "ck25"
    result = _eval(data_dir, str(predictions), "--gold", str(ck25), "-o", str(out), "--no-catalog")
    assert result.exit_code == 0, result.output
    t2s = list(read_jsonl(out / "t2s-metrics.jsonl"))
    assert [r["order_matters"] for r in t2s] == [dev[r["id"]]["result_order_matters"] for r in ck_rows]
    assert [r["order_matters"] for r in t2s] == [False, True, False]
    assert json.loads((out / "qald.json").read_text())["dataset"] == {"id": "questions-dev"}


def test_an_experiment_systems_directory_gets_both_exports(
    data_dir: Path, official: dict[str, Any], tmp_path: Path
) -> None:
    """What every experiment calls to score and write a system (`score_system`), on real QALD-10 rows and the
    real small graph; running a whole experiment needs a memory and trained models (tests/test_experiments.py)."""
    from pgmr.datasets import load_named
    from pgmr.experiments.scoring import score_system
    from pgmr.experiments.settings import ExperimentSettings
    from pgmr.experiments.workspace import Workspace
    from pgmr.stores import default_kg_file, open_store

    wanted = [row["id"] for row in QALD_ROWS]
    records = sorted(
        (r for r in load_named("qald10-test", data_dir).records if r.id in wanted),
        key=lambda r: wanted.index(r.id),
    )
    rows = [
        {**row, "question": r.question, "gold": r.sparql} for row, r in zip(QALD_ROWS, records, strict=True)
    ]
    ws = Workspace(
        ExperimentSettings(data_dir=data_dir, out_dir=tmp_path / "qald10", command="pgmr experiment")
    )
    store = open_store(default_kg_file(data_dir), timeout=10)
    try:
        entry = score_system(
            ws,
            "direct",
            rows,
            records,
            catalog=None,
            store=store,
            timeout=10,
            inputs={"experiment": "qald10", "system": "direct", "gold": "qald10-test"},
            title="qald10: direct on qald10-test",
        )
    finally:
        store.close()
    assert entry["status"] == "ok"
    system = tmp_path / "qald10" / "direct"
    for name in ("predictions.jsonl", "metrics.json", "report.md", "t2s-metrics.jsonl", "qald.json"):
        assert (system / name).is_file(), name
    t2s = list(read_jsonl(system / "t2s-metrics.jsonl"))
    assert [r["id"] for r in t2s] == wanted
    assert [r["golden"] for r in t2s] == [r.sparql for r in records]
    doc = json.loads((system / "qald.json").read_text(encoding="utf-8"))
    _check_qald_shape(doc, official)
    assert doc["dataset"] == {"id": "qald10-test"}
    answers = {q["id"]: q["answers"] for q in doc["questions"]}
    assert answers["0"] == next(q["answers"] for q in official["questions"] if q["id"] == 0)
    assert answers["9"] == []
    # No temporary files are left beside the exports.
    assert sorted(p.name for p in system.iterdir() if p.name.startswith(".")) == []
