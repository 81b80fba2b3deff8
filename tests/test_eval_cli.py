"""`pgmr eval` end to end on the real LC-QuAD 2.0 and QALD-10 files (a handful of ids) and the real small KG."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.jsonl import write_jsonl

pytestmark = pytest.mark.slow
runner = CliRunner()

# Real LC-QuAD 2.0 test ids; predictions written by hand against their gold queries.
LCQUAD_ROWS = [
    # gold: SELECT ?obj WHERE { wd:Q1045 p:P1082 ?s . ?s ps:P1082 ?obj . ?s pq:P585 ?x filter(...'2009') }
    {
        "id": "7141",
        "prediction": "select ?value where { wd:Q1045 p:P1082 ?st . ?st ps:P1082 ?value . "
        "?st pq:P585 ?when filter(contains(year(?when),'2009')) }",
    },  # renamed variables, lower case: Query EM
    {
        "id": "12761",
        "prediction": "SELECT ?answer WHERE { ?answer wdt:P106 wd:Q177220 . wd:Q16538 wdt:P725 ?answer }",
    },  # triple order: SQM only
    {
        "id": "27315",
        "prediction": "select distinct ?answer where { ?answer wdt:P469 wd:Q999999999999 }",
    },  # made-up ID
    {
        "id": "2623",
        "prediction": "(pgmr output)",
        "status": "resolved",
        "sparql": "SELECT ?ent WHERE { ?ent <http://www.wikidata.org/prop/direct/P31> "
        "<http://www.wikidata.org/entity/Q11387> . ?ent wdt:P2120 ?obj . } ORDER BY DESC(?obj) LIMIT 5",
    },  # full IRIs, trailing dot: Query EM
    {"id": "8287", "prediction": "(pgmr output)", "status": "refused", "reason": "no close entity"},
    {"id": "7792", "prediction": "SELECT ?value WHERE { wd:Q193338 p:P1411 ?s . ?s ps:P1411 wd:Q488651 "},
]


@pytest.fixture(scope="module")
def data_dir() -> Path:
    try:
        return resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no ../shared/data")


def _eval(data_dir: Path, *args: str):
    return runner.invoke(app, ["--data-dir", str(data_dir), "eval", *args])


def test_eval_writes_three_files_against_lcquad2_test(data_dir: Path, tmp_path: Path) -> None:
    predictions = tmp_path / "predictions.jsonl"
    write_jsonl(predictions, LCQUAD_ROWS)
    out = tmp_path / "eval"
    result = _eval(data_dir, str(predictions), "--gold", "lcquad2-test", "-o", str(out))
    assert result.exit_code == 0, result.output
    assert "Query EM" in result.output

    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["primary_metric"] == "query_em"
    overall = metrics["overall"]
    assert overall["n"] == 6
    assert overall["query_em"] == pytest.approx(2 / 6)
    assert overall["sqm"] == pytest.approx(3 / 6)
    assert overall["refusal_rate"] == pytest.approx(1 / 6)
    assert overall["invalid_rate"] == pytest.approx(1 / 6)
    assert overall["unknown_ids"] == 1
    assert metrics["counts"]["outcome_refused"] == 1
    assert metrics["counts"]["gold_without_prediction"] > 5000
    assert metrics["command"].startswith("pgmr eval ")
    assert "statement_property_2" in metrics["by_template"]

    rows = [json.loads(line) for line in (out / "predictions.jsonl").read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in LCQUAD_ROWS]
    assert rows[0]["prediction"] == LCQUAD_ROWS[0]["prediction"]  # input fields kept
    assert [r["eval"]["query_em"] for r in rows] == [True, False, False, True, False, False]
    assert rows[2]["eval"]["unknown_ids"] == ["Q999999999999"]
    assert rows[5]["eval"]["outcome"] == "invalid"

    report = (out / "report.md").read_text()
    for heading in ("## Overall", "## By outcome", "## By template", "## Sample errors (4 of 4)"):
        assert heading in report
    assert "| Query EM (primary) | 33.3% |" in report
    assert "### 27315: valid" in report


def test_eval_executes_qald_queries_on_the_real_small_kg(data_dir: Path, tmp_path: Path) -> None:
    from pgmr.stores import default_kg_file

    rows = [
        {"id": "0", "prediction": "SELECT DISTINCT ?result WHERE { wd:Q761383 wdt:P138 ?result . }"},
        {"id": "5", "prediction": "SELECT DISTINCT ?x WHERE { wd:Q81230 wdt:P414 ?x }"},  # 4 answers
        {"id": "8", "prediction": "SELECT ?result WHERE { wd:Q283 wdt:P2102 ?result }"},  # "+100" = "100"
        {"id": "12", "prediction": "ASK { wd:Q3208174 wdt:P400 wd:Q5014725 }"},
        {
            "id": "26",
            "prediction": "SELECT DISTINCT ?result WHERE { wd:Q21102 wdt:P17 ?result }",
        },  # no answer
        {"id": "9", "prediction": "(pgmr output)", "status": "refused", "reason": "no close entity"},
    ]
    predictions = tmp_path / "qald.jsonl"
    write_jsonl(predictions, rows)
    out = tmp_path / "eval"
    store = str(default_kg_file(data_dir))
    result = _eval(data_dir, str(predictions), "--gold", "qald10-test", "-o", str(out), "--store", store)
    assert result.exit_code == 0, result.output
    overall = json.loads((out / "metrics.json").read_text())["overall"]
    # Per question (P, R): (1,1) four times, then two empty answers to non-empty gold: (1,0) each.
    assert overall["answer_precision"] == pytest.approx(1.0)
    assert overall["answer_recall"] == pytest.approx(4 / 6)
    assert overall["answer_f1"] == pytest.approx(4 / 6)
    assert overall["answer_scored"] == 6
    scored = [
        json.loads(line)["eval"]["answers"] for line in (out / "predictions.jsonl").read_text().splitlines()
    ]
    assert [a["f1"] for a in scored] == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]
    assert all(a["gold_source"] == "dataset" for a in scored)


def test_eval_without_gold_uses_the_rows_gold_field(data_dir: Path, tmp_path: Path) -> None:
    predictions = tmp_path / "p.jsonl"
    gold = "SELECT ?x WHERE { ?x wdt:P31 wd:Q5 }"
    write_jsonl(
        predictions,
        [
            {
                "id": "a",
                "question": "q",
                "prediction": "select ?h where { ?h wdt:P31 wd:Q5 . }",
                "gold": gold,
            },
            {"id": "b", "question": "q", "prediction": "SELECT ?x WHERE { ?x wdt:P31 wd:Q6 }", "gold": gold},
        ],
    )
    out = tmp_path / "eval"
    result = _eval(data_dir, str(predictions), "-o", str(out), "--no-catalog")
    assert result.exit_code == 0, result.output
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["overall"]["query_em"] == 0.5
    assert metrics["overall"]["hallucination_rate_catalog"] is None


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        ([{"id": "no-such-id", "prediction": "ASK {}"}], ["--gold", "lcquad2-test"], "not in the gold"),
        ([{"id": "7141", "prediction": "ASK {}"}], ["--gold", "no-such-dataset"], "neither|does not exist"),
        ([{"id": "x", "prediction": "ASK {}"}], [], "no 'gold' query"),
        (
            [{"id": "7141", "prediction": "ASK {}"}],
            ["--gold", "lcquad2-test", "--store", "/no/such/store"],
            "not found",
        ),
    ],
)
def test_eval_bad_input_exits_2_with_a_message(
    data_dir: Path, tmp_path: Path, rows: list, extra: list, message: str
) -> None:
    predictions = tmp_path / "p.jsonl"
    write_jsonl(predictions, rows)
    result = _eval(data_dir, str(predictions), "-o", str(tmp_path / "out"), "--no-catalog", *extra)
    assert result.exit_code == 2, result.output
    assert "error:" in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert re.search(message, " ".join(result.output.split())), result.output
    assert not (tmp_path / "out").exists()


def test_eval_missing_predictions_file(data_dir: Path, tmp_path: Path) -> None:
    result = _eval(
        data_dir, str(tmp_path / "nope.jsonl"), "--gold", "lcquad2-test", "-o", str(tmp_path / "o")
    )
    assert result.exit_code == 2
    assert "does not exist" in " ".join(result.output.split())
