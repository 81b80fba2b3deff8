from __future__ import annotations

import json
from pathlib import Path

import pytest

from pgmr.config import resolve_data_dir
from pgmr.datasets import (
    DatasetError,
    LoadResult,
    SkippedRecord,
    detect_format,
    load_dataset,
    load_jsonl,
    load_lcquad2,
    load_named,
    load_qald,
    meta_dict,
)


def _write_jsonl(path: Path, rows: list[object]) -> Path:
    lines = [row if isinstance(row, str) else json.dumps(row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


SIMPLE = "SELECT ?x WHERE { wd:Q1 wdt:P31 ?x }"


def _lcquad(uid: object, question: object, sparql: object = SIMPLE, **extra: object) -> dict[str, object]:
    return {
        "uid": uid,
        "question": question,
        "paraphrased_question": None,
        "sparql_wikidata": sparql,
        **extra,
    }


@pytest.fixture
def lcquad_jsonl(tmp_path: Path) -> Path:
    return _write_jsonl(
        tmp_path / "train.jsonl",
        [
            _lcquad(
                19,
                "  Was  Bruno Mars\ta model? ",
                " ASK WHERE { wd:Q1450 wdt:P106 wd:Q4610556 } ",
                tier="A_uid_original",
                template_id=16,
                subgraph="boolean",
            ),
            "{not json",
            _lcquad(
                None,
                None,
                "SELECT ?x WHERE { wd:??bruno_mars wdt:P31 ?x }",
                tier="D_sparql_partially_resolved",
                n_unresolved_ids=1,
            ),
            {**_lcquad(None, None, tier="B_original_sparql_no_uid"), "paraphrased_question": "Who is Q1?"},
            {**_lcquad(None, "", subgraph=[]), "other_question_strings": ["", "What is  Q1?"]},
            _lcquad(None, None),
            "",
            _lcquad(None, "Where?", None),
            _lcquad(None, 42),
            "[1, 2]",
        ],
    )


def test_lcquad2_jsonl_records(lcquad_jsonl: Path) -> None:
    result = load_lcquad2(lcquad_jsonl)
    first, paraphrased, from_others = result.records
    assert first.id == "19"
    assert first.question == "Was Bruno Mars a model?"
    assert first.sparql == "ASK WHERE { wd:Q1450 wdt:P106 wd:Q4610556 }"
    assert first.source == "lcquad2"
    assert meta_dict(first) == {"tier": "A_uid_original", "template_id": "16", "subgraph": "boolean"}
    assert (paraphrased.id, paraphrased.question) == ("lcquad2:4", "Who is Q1?")
    assert meta_dict(paraphrased)["question_field"] == "paraphrased_question"
    assert (from_others.id, from_others.question) == ("lcquad2:5", "What is Q1?")
    assert "subgraph" not in meta_dict(from_others)


def test_lcquad2_jsonl_skips(lcquad_jsonl: Path) -> None:
    result = load_lcquad2(lcquad_jsonl)
    assert [(s.index, s.reason) for s in result.skipped] == [
        (2, "not_json"),
        (3, "unresolved_ids"),
        (6, "no_question"),
        (8, "no_sparql"),
        (9, "bad_field"),
        (10, "not_object"),
    ]
    assert result.skipped_by_reason() == {
        "bad_field": 1,
        "no_question": 1,
        "no_sparql": 1,
        "not_json": 1,
        "not_object": 1,
        "unresolved_ids": 1,
    }


def test_lcquad2_without_other_strings_fallback(lcquad_jsonl: Path) -> None:
    result = load_lcquad2(lcquad_jsonl, other_strings_fallback=False)
    assert [r.id for r in result.records] == ["19", "lcquad2:4"]
    assert result.skipped_by_reason()["no_question"] == 2


def test_unresolved_ids_caught_from_sparql_alone(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "x.jsonl", [_lcquad(1, "Q?", "SELECT ?x WHERE { ?x wdt:P31 wd:??human }")])
    assert load_lcquad2(path).skipped[0].reason == "unresolved_ids"


def test_lcquad2_json_list(tmp_path: Path) -> None:
    rows = [
        {**_lcquad(7141, "What was the population of Somalia?"), "NNQT_question": "What is {population}"},
        {**_lcquad(7142, "n/a"), "paraphrased_question": "  How many people live in Somalia? "},
        _lcquad(7141, "Duplicate uid?"),
        "not an object",
    ]
    path = tmp_path / "train.json"
    path.write_text(json.dumps(rows, indent=2), encoding="utf-8")
    result = load_lcquad2(path)
    assert [r.id for r in result.records] == ["7141", "7142"]
    assert meta_dict(result.records[1])["paraphrase"] == "How many people live in Somalia?"
    # 0-based positions in the list
    assert [(s.index, s.reason) for s in result.skipped] == [(2, "duplicate_id"), (3, "not_object")]
    assert load_dataset(path).records == result.records


def test_lcquad2_list_uid_is_not_an_id(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "test.jsonl", [_lcquad([20737, 22373], "Which mission?")])
    (record,) = load_lcquad2(path).records
    assert record.id == "lcquad2:1"
    assert meta_dict(record)["uids"] == "20737,22373"


QALD = {
    "dataset": {"id": "qald-test"},
    "questions": [
        {
            "id": 0,
            "question": [
                {"language": "de", "string": "Nach wem ist die Riemannsche Geometrie benannt?"},
                {"language": "en", "string": "After whom is the  Riemannian geometry named?"},
            ],
            "query": {"sparql": "SELECT DISTINCT ?result WHERE { wd:Q761383 wdt:P138 ?result. }"},
            "answers": [
                {
                    "head": {"vars": ["result", "n"]},
                    "results": {
                        "bindings": [
                            {"result": {"type": "uri", "value": "http://www.wikidata.org/entity/Q42299"}},
                            {"result": {"type": "uri", "value": "http://www.wikidata.org/entity/Q42299"}},
                            {"n": {"type": "literal", "value": "3", "datatype": "xsd:integer"}},
                        ]
                    },
                }
            ],
        },
        {
            "id": 7,
            "question": [{"language": "en", "string": "Is Brooke Raboutou from Colorado?"}],
            "query": {"sparql": "ASK { wd:Q2926117 wdt:P19 ?b }"},
            "answers": [{"head": {}, "boolean": False}],
        },
        {"id": 8, "question": [{"language": "de", "string": "Nur Deutsch?"}], "query": {"sparql": "ASK {}"}},
        {"id": 9, "question": [{"language": "en", "string": "No query?"}], "query": {}},
        {
            "id": 10,
            "question": [{"language": "en", "string": "Bad?"}],
            "query": {"sparql": "ASK {}"},
            "answers": [{"head": {}}],
        },
        {"id": 11, "question": [{"language": "en", "string": "No answers?"}], "query": {"sparql": "ASK {}"}},
    ],
}


@pytest.fixture
def qald_json(tmp_path: Path) -> Path:
    path = tmp_path / "qald.json"
    path.write_text(json.dumps(QALD), encoding="utf-8")
    return path


def test_qald_select_and_ask(qald_json: Path) -> None:
    result = load_qald(qald_json)
    select, ask, unknown = result.records
    assert select.id == "0"
    assert select.question == "After whom is the Riemannian geometry named?"
    assert select.sparql.startswith("SELECT DISTINCT ?result")
    assert select.answers == ("http://www.wikidata.org/entity/Q42299", "3")
    assert select.boolean is None
    assert (ask.id, ask.answers, ask.boolean) == ("7", None, False)
    assert (unknown.id, unknown.answers, unknown.boolean) == ("11", None, None)
    assert [(s.index, s.reason) for s in result.skipped] == [
        (2, "no_question"),
        (3, "no_sparql"),
        (4, "bad_answers"),
    ]


def test_qald_other_language(qald_json: Path) -> None:
    result = load_qald(qald_json, language="de")
    assert [r.question for r in result.records] == [
        "Nach wem ist die Riemannsche Geometrie benannt?",
        "Nur Deutsch?",
    ]


def test_generic_jsonl(tmp_path: Path) -> None:
    path = _write_jsonl(
        tmp_path / "mine.jsonl",
        [
            {"question": "Who killed Caesar?", "sparql": "SELECT ?o WHERE { wd:Q1048 wdt:P157 ?o }"},
            {"id": "a1", "question": "What\n is Q5?", "sparql": "SELECT * WHERE { wd:Q5 ?p ?o }"},
            {"id": "a1", "question": "Again?", "sparql": "ASK {}"},
            {"id": True, "question": "Bool id?", "sparql": "ASK {}"},
            {"question": "No SPARQL", "sparql": "   "},
        ],
    )
    result = load_jsonl(path)
    assert [(r.id, r.question, r.source) for r in result.records] == [
        ("jsonl:1", "Who killed Caesar?", "jsonl"),
        ("a1", "What is Q5?", "jsonl"),
    ]
    assert [(s.index, s.reason) for s in result.skipped] == [
        (3, "duplicate_id"),
        (4, "bad_field"),
        (5, "no_sparql"),
    ]


def test_generic_jsonl_custom_keys(tmp_path: Path) -> None:
    path = _write_jsonl(tmp_path / "q.jsonl", [{"q": "Who?", "query": "SELECT ?x WHERE { ?x ?p ?o }"}])
    (record,) = load_jsonl(path, question_key="q", sparql_key="query").records
    assert (record.question, record.sparql) == ("Who?", "SELECT ?x WHERE { ?x ?p ?o }")


def test_detect_format(tmp_path: Path, qald_json: Path, lcquad_jsonl: Path) -> None:
    generic = _write_jsonl(tmp_path / "g.jsonl", ["", {"question": "Q?", "sparql": "ASK {}"}])
    listing = tmp_path / "l.json"
    listing.write_text("\ufeff\n [" + json.dumps(_lcquad(1, "Q?")) + "]", encoding="utf-8")
    assert detect_format(qald_json) == "qald"
    assert detect_format(lcquad_jsonl) == "lcquad2"
    assert detect_format(generic) == "jsonl"
    assert detect_format(listing) == "lcquad2"
    assert len(load_dataset(listing).records) == 1
    assert load_dataset(qald_json).records == load_qald(qald_json).records
    assert load_dataset(lcquad_jsonl, fmt="lcquad2") == load_lcquad2(lcquad_jsonl)


def test_errors(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        load_dataset(tmp_path / "missing.jsonl")
    with pytest.raises(DatasetError, match="unknown dataset format"):
        load_dataset(tmp_path / "missing.jsonl", fmt="csv")
    with pytest.raises(DatasetError, match="unknown dataset"):
        load_named("lcquad3", tmp_path)
    not_qald = tmp_path / "obj.json"
    not_qald.write_text('{"data": []}', encoding="utf-8")
    with pytest.raises(DatasetError, match="questions"):
        load_dataset(not_qald)
    broken = tmp_path / "broken.json"
    broken.write_text('{"questions": [', encoding="utf-8")
    with pytest.raises(DatasetError, match="not valid JSON"):
        load_qald(broken)
    csv = tmp_path / "data.csv"
    csv.write_text("question,sparql\nWho?,ASK {}\n", encoding="utf-8")
    with pytest.raises(DatasetError, match="extension"):
        load_dataset(csv)
    with pytest.raises(DatasetError, match="no record has a 'sparql' field"):
        load_jsonl(csv)
    wrong_keys = _write_jsonl(tmp_path / "w.jsonl", [{"question": "Q?", "sparql_wikidata": "ASK {}"}])
    with pytest.raises(DatasetError, match="'sparql'"):
        load_jsonl(wrong_keys)
    assert issubclass(DatasetError, ValueError)


def test_empty_file_is_an_empty_dataset(tmp_path: Path) -> None:
    path = tmp_path / "empty.jsonl"
    path.write_text("\n\n", encoding="utf-8")
    assert load_dataset(path) == LoadResult((), ())


def test_skipped_by_reason_counts() -> None:
    skips = (SkippedRecord(1, "b", ""), SkippedRecord(2, "a", ""), SkippedRecord(3, "b", ""))
    assert LoadResult((), skips).skipped_by_reason() == {"a": 1, "b": 2}


@pytest.mark.slow
def test_real_datasets() -> None:
    try:
        data_dir = resolve_data_dir(None)
    except FileNotFoundError:
        pytest.skip("no data directory")

    train = load_named("lcquad2-train", data_dir)
    assert len(train.records) + len(train.skipped) == 23417
    assert len(train.records) == 22956
    assert train.skipped_by_reason() == {"no_question": 5, "unresolved_ids": 456}
    assert len({r.id for r in train.records}) == len(train.records)
    # The validation carve and the training part split lcquad2-train between them, with nothing in both.
    part = {r.id for r in load_named("lcquad2-train-part", data_dir).records}
    validation = {r.id for r in load_named("lcquad2-validation", data_dir).records}
    assert (len(part), len(validation)) == (21130, 1826)
    assert part.isdisjoint(validation) and part | validation == {r.id for r in train.records}

    test = load_named("lcquad2-test", data_dir)
    assert (len(test.records), test.skipped) == (5715, ())

    qald = load_named("qald10-test", data_dir)
    assert (len(qald.records), qald.skipped) == (394, ())
    assert all(r.answers is not None or r.boolean is not None for r in qald.records)
    assert sum(r.boolean is not None for r in qald.records) == 61

    qald_train = load_named("qald10-train", data_dir)
    assert (len(qald_train.records), qald_train.skipped) == (412, ())
