"""Plain questions made from the graph's labels (pgmr.synthesis), training mixtures and the QALD-10 carve."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.conversion import ConversionSummary, convert_records, roundtrip_problem
from pgmr.datasets import DatasetError, load_named
from pgmr.datasets.mixing import parse_weighted
from pgmr.kg.catalog import CatalogEntry, LabelCatalog
from pgmr.query.normalize import normalize_query
from pgmr.synthesis import Fact, facts_from_queries, plain_questions
from pgmr.synthesis.phrasings import by_verb, question_word
from pgmr.synthesis.plain_questions import property_datatypes

DATA_DIR = resolve_data_dir(None)
needs_data = pytest.mark.skipif(not (DATA_DIR / "memory").is_dir(), reason="no ../shared/data")


def small_catalog() -> LabelCatalog:
    return LabelCatalog(
        [
            CatalogEntry("Q2283", "Microsoft", "American technology corporation", ("MSFT",)),
            CatalogEntry("Q76", "Barack Obama", "president of the United States", ("Obama",)),
            CatalogEntry("Q64", "Berlin", "capital of Germany"),
            CatalogEntry("P112", "founder", "founder of this organization", ("founded by", "established by")),
            CatalogEntry("P26", "spouse", "the subject has the object as their spouse", ("married to",)),
            CatalogEntry("P19", "place of birth", "birth location of a person", ("born in",)),
            CatalogEntry("P9999", "unlabelled thing", None),
        ]
    )


def test_facts_come_from_the_triples_of_gold_queries_without_types() -> None:
    facts = facts_from_queries(
        [
            "SELECT ?x WHERE { wd:Q2283 wdt:P112 ?x . ?x wdt:P31 wd:Q5 }",
            "SELECT ?x WHERE { ?x wdt:P19 wd:Q64 }",
            "SELECT ?x WHERE { wd:Q2283 wdt:P112 ?y }",  # the same fact again
        ]
    )
    assert facts == [Fact("Q2283", "P112"), Fact("Q64", "P19", reverse=True)]


def test_questions_name_their_entity_and_carry_the_one_hop_query() -> None:
    facts = [Fact("Q2283", "P112"), Fact("Q76", "P26"), Fact("Q64", "P19", reverse=True)]
    records = plain_questions(facts, small_catalog(), 60, seed=3)
    assert len(records) == 60
    shapes = {dict(r.meta)["shape"] for r in records}
    assert shapes == {"forward", "reverse"}
    for record in records:
        forward = dict(record.meta)["shape"] == "forward"
        entity = record.sparql.split("wd:")[1].split()[0]
        names = {"Q2283": ("Microsoft", "MSFT"), "Q76": ("Barack Obama", "Obama"), "Q64": ("Berlin",)}[entity]
        assert any(n.lower() in record.question.lower() for n in names), record
        if forward:
            assert normalize_query(record.sparql) == normalize_query(
                f"SELECT DISTINCT ?a WHERE {{ wd:{entity} wdt:{record.sparql.split('wdt:')[1].split()[0]} ?a }}"
            )
        else:
            assert "?answer wdt:P19 wd:Q64" in record.sparql
    # Ids are unique and the same inputs give the same questions.
    assert len({r.id for r in records}) == 60
    assert records == plain_questions(facts, small_catalog(), 60, seed=3)
    assert records != plain_questions(facts, small_catalog(), 60, seed=4)


def test_verb_aliases_ask_with_the_verb() -> None:
    assert by_verb("founded by") == "founded"
    assert by_verb("married to") is None and by_verb("made of wood by") is None
    questions = {r.question for r in plain_questions([Fact("Q2283", "P112")], small_catalog(), 200, seed=0)}
    assert any(q.lower().startswith("who founded microsoft") for q in questions)


def test_question_words_follow_datatype_and_meaning() -> None:
    assert question_word("date of birth", None, "time") == "When"
    assert question_word("population", None, "quantity") == "How much"
    assert question_word("place of birth", "birth location", "wikibase-item") == "Where"
    assert question_word("spouse", "the subject has the object as their spouse", "wikibase-item") == "Who"
    assert question_word("currency", "currency used by item", "wikibase-item") == "What"


def test_facts_without_labels_are_left_out_and_none_at_all_is_an_error() -> None:
    catalog = small_catalog()
    records = plain_questions([Fact("Q2283", "P112"), Fact("Q404", "P112")], catalog, 5)
    assert all("Q404" not in r.sparql for r in records)
    with pytest.raises(ValueError, match="no fact"):
        plain_questions([Fact("Q404", "P112")], catalog, 5)
    with pytest.raises(ValueError, match="count"):
        plain_questions([Fact("Q2283", "P112")], catalog, -1)


def test_weighted_specs() -> None:
    assert parse_weighted("qald10-train-part*4") == ("qald10-train-part", 4)
    assert parse_weighted("runs/plain.jsonl") == ("runs/plain.jsonl", 1)
    for bad in ("", "*3", "x*0"):
        with pytest.raises(DatasetError):
            parse_weighted(bad)


@needs_data
def test_real_questions_convert_losslessly_and_validation_stays_apart(tmp_path: Path) -> None:
    """The CLI writes the file; every question converts to SPARQL-PGMR and fills back to its gold query; no
    fact comes from outside the training queries; the QALD-10 carve is disjoint and whole."""
    out = tmp_path / "plain.jsonl"
    result = CliRunner().invoke(
        app, ["--data-dir", str(DATA_DIR), "synthesize", "-o", str(out), "--count", "300", "--seed", "1"]
    )
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) == 300
    from pgmr.datasets import load_any

    records = load_any(out).records
    catalog = LabelCatalog.from_data_dir(DATA_DIR)
    summary = ConversionSummary()
    converted = list(convert_records(records, catalog, summary))
    assert summary.converted == 300
    assert all(roundtrip_problem(c) is None for c in converted)
    train_facts = set(
        facts_from_queries(
            r.sparql for n in ("lcquad2-train-part", "qald10-train-part") for r in load_named(n, DATA_DIR).records
        )
    )
    used = set(facts_from_queries(r["sparql"] for r in rows))
    assert used <= train_facts
    part = {r.id for r in load_named("qald10-train-part", DATA_DIR).records}
    val = {r.id for r in load_named("qald10-validation", DATA_DIR).records}
    whole = {r.id for r in load_named("qald10-train", DATA_DIR).records}
    assert not part & val and part | val == whole and 80 <= len(val) <= 140
    assert property_datatypes(DATA_DIR)["P569"] == "time"


@needs_data
def test_plain_dev_names_real_ids_with_their_labels() -> None:
    """The shipped plain-question set: every ID it names is in the memory's catalog, and each query is the
    one-hop SELECT people's questions call for."""
    records = load_named("plain-dev", DATA_DIR).records
    assert len(records) >= 40
    catalog = LabelCatalog.from_data_dir(DATA_DIR)
    for record in records:
        ids = [t for t in record.sparql.replace("wd:", " ").replace("wdt:", " ").split() if t[0] in "QP" and t[1:].isdigit()]
        assert len(ids) == 2 and all(catalog.label(i) for i in ids), record
        assert normalize_query(record.sparql).startswith("SELECT DISTINCT ?v0 WHERE {")


@needs_data
def test_extra_training_data_is_recorded_and_never_validated_on(tmp_path: Path) -> None:
    plain = tmp_path / "plain.jsonl"
    runner = CliRunner()
    made = runner.invoke(app, ["--data-dir", str(DATA_DIR), "synthesize", "-o", str(plain), "--count", "50"])
    assert made.exit_code == 0, made.output
    out = tmp_path / "run"
    args = ["--data-dir", str(DATA_DIR), "train", "--mode", "pgmr", "--preset", "structured", "-o", str(out)]
    args += ["--limit", "120", "--max-steps", "2", "--eval-steps", "2", "--max-eval-examples", "5"]
    args += ["--encoder-layers", "1", "--no-progress", "--extra-train", str(plain)]
    args += ["--extra-train", "qald10-train-part*2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    card = json.loads((out / "model" / "model_card.json").read_text())
    extra = card["run"]["data"]["extra_train"]
    assert extra[str(plain)] == 50 and extra["qald10-train-part*2"] >= 2 * 280
    bad = runner.invoke(app, [*args[:-2], "--extra-train", "no-such-dataset*2"])
    assert bad.exit_code == 2 and "no-such-dataset" in bad.output
