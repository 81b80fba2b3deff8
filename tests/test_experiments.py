"""`pgmr experiment ...` end to end on real data: a small data directory cut from ../shared/data (real LC-QuAD
2.0 and QALD-10 records, their real labels plus real distractor entities), a real memory built from it with
the real encoder, and tiny models trained here."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.generators.seq2seq.generator import DEFAULT_COPY_BIAS, DEFAULT_RELATION_COPY_BIAS
from pgmr.jsonl import read_jsonl, write_jsonl

pytestmark = pytest.mark.slow

runner = CliRunner()
N_TRAIN, N_TEST, N_QALD, N_OTHER = 90, 30, 6, 240
PNG = b"\x89PNG\r\n\x1a\n"


def _ids(sparql: str) -> set[str]:
    from pgmr.conversion import ConversionError, to_skeleton

    try:
        return set(to_skeleton(sparql)[1].values())
    except ConversionError:
        return set()


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real records and labels: the first LC-QuAD 2.0 train (clean tiers) and test records, QALD-10 questions
    whose answers the small KG holds, the labels of every ID they use and some other real entities."""
    from pgmr.config import resolve_data_dir

    real = resolve_data_dir(None)
    root = tmp_path_factory.mktemp("data")
    train = [
        r
        for r in read_jsonl(real / "lcquad2" / "train.jsonl")
        if r.get("tier") in ("A_uid_original", "B_original_sparql_no_uid") and r.get("question")
    ][:N_TRAIN]
    test = list(read_jsonl(real / "lcquad2" / "test.jsonl"))[:N_TEST]
    write_jsonl(root / "lcquad2" / "train.jsonl", train)
    write_jsonl(root / "lcquad2" / "test.jsonl", test)
    qald = json.loads((real / "qald10" / "qald_10.json").read_text(encoding="utf-8"))
    answered = set(json.loads((real / "kg" / "qald10_answer_derived_question_ids.json").read_text()))
    qald["questions"] = [q for q in qald["questions"] if q["id"] in answered][:N_QALD]
    (root / "qald10").mkdir()
    (root / "qald10" / "qald_10.json").write_text(json.dumps(qald), encoding="utf-8")
    (root / "kg").mkdir()
    shutil.copy(real / "kg" / "qald10_answer_derived.nt", root / "kg")
    from pgmr.datasets import load_qald

    sparql = [r["sparql_wikidata"] for r in train + test]
    sparql += [r.sparql for r in load_qald(root / "qald10" / "qald_10.json").records]
    used = set().union(*(_ids(s) for s in sparql))
    rows = list(read_jsonl(real / "memory" / "entities.jsonl"))
    entities = [row for row in rows if row["id"] in used]
    # Real homonyms of the gold entities make distractors bite; every 97th entity fills up the rest.
    labels = {(row.get("label") or "").lower() for row in entities} - {""}
    homonyms = [r for r in rows if r["id"] not in used and (r.get("label") or "").lower() in labels]
    others = homonyms[: N_OTHER // 4]
    others += [r for r in rows[::97] if r["id"] not in used and r.get("label") and r not in others]
    others = others[:N_OTHER]
    write_jsonl(root / "memory" / "entities.jsonl", entities + others)
    write_jsonl(
        root / "memory" / "properties.jsonl",
        [row for row in read_jsonl(real / "memory" / "properties.jsonl") if row["id"] in used],
    )
    return root


@pytest.fixture(scope="module")
def memory_dir(data_dir: Path, encoder: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory
    from pgmr.resolver.priors import counts_from_dataset

    out = tmp_path_factory.mktemp("memory") / "memory"
    counts = counts_from_dataset("lcquad2-train", data_dir)
    Memory.build(LabelCatalog.from_data_dir(data_dir), out, encoder, progress=False, prior_counts=counts)
    return out


def _converted(data_dir: Path, name: str) -> list[Any]:
    from pgmr.conversion import ConversionSummary, convert_records
    from pgmr.datasets import load_named
    from pgmr.kg.catalog import LabelCatalog

    records = load_named(name, data_dir).records
    return list(convert_records(records, LabelCatalog.from_data_dir(data_dir), ConversionSummary()))


TINY = {
    "preset": "tiny",
    "vocab_size": 320,
    "max_source_len": 32,
    "max_target_len": 32,
    "batch_size": 8,
    "eval_steps": 1,
    "warmup_steps": 0,
    "max_steps": 1,
    "max_eval_examples": 2,
    "logging_steps": 100,
    "progress": False,
}


@pytest.fixture(scope="module")
def models(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A one-step pgmr model and a one-step direct model (their outputs are noise: what is tested is that
    every output, good or bad, is generated, resolved, scored and reported)."""
    from pgmr.generators import build_examples
    from pgmr.generators.seq2seq import TrainConfig, train_seq2seq

    records = _converted(data_dir, "lcquad2-train")
    root = tmp_path_factory.mktemp("models")
    dirs = {}
    for mode in ("pgmr", "direct"):
        examples = build_examples(records, mode, max_description_words=0)
        result = train_seq2seq(examples[:-4], examples[-4:], root / mode, TrainConfig(**TINY))  # type: ignore[arg-type]
        dirs[mode] = result.model_dir
    return dirs


def _invoke(data_dir: Path, *args: str) -> Any:
    return runner.invoke(app, ["--data-dir", str(data_dir), "experiment", *args])


def _metrics(out: Path) -> dict[str, Any]:
    return json.loads((out / "metrics.json").read_text(encoding="utf-8"))


def _oracle(data_dir: Path, path: Path, limit: int, *, description_words: int | None = None) -> Path:
    """The gold queries converted to SPARQL-PGMR: what a perfect pgmr model would write (with labels only,
    as the default model writes them, when `description_words` is 0)."""
    from pgmr.datasets import load_named
    from pgmr.generators import pgmr_target
    from pgmr.query import parse

    converted = {
        r.id: pgmr_target(parse(r.intermediate), description_words)
        for r in _converted(data_dir, "lcquad2-test")
    }
    rows = [
        {"id": r.id, "prediction": converted.get(r.id, "")}
        for r in load_named("lcquad2-test", data_dir).records[:limit]
    ]
    write_jsonl(path, rows)
    return path


@pytest.fixture(scope="module")
def original_run(data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path_factory) -> Path:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("experiments") / "lcquad2-original"
    with pytest.MonkeyPatch.context() as patch:
        # Default model paths are relative to the working directory: here, none exists (rag is missing).
        patch.chdir(tmp_path_factory.mktemp("cwd"))
        result = _invoke(
            data_dir,
            "lcquad2-original",
            "--out",
            str(out),
            "--limit",
            "10",
            "--models",
            f"pgmr={models['pgmr']},direct={models['direct']}",
            "--memory",
            str(memory_dir),
            "--max-new-tokens",
            "12",
        )
    assert result.exit_code == 0, result.output
    return out


def test_list_names_every_experiment(tmp_path: Path) -> None:
    result = runner.invoke(app, ["experiment", "list", "--experiments-dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    for name in ("lcquad2-original", "lcquad2-unknown-uri", "qald10", "distractors", "refusal", "ck25"):
        assert name in result.output
    assert "not run" in result.output


def test_lcquad2_original_compares_systems_with_the_paper(original_run: Path, data_dir: Path) -> None:
    from pgmr.datasets import load_named
    from pgmr.evaluation.metrics import evaluate

    doc = _metrics(original_run)
    systems = doc["systems"]
    assert list(systems) == ["direct", "rag", "pgmr"]  # rag-pgmr only when given
    assert systems["rag"]["status"] == "missing"
    assert systems["rag"]["train_command"].startswith("pgmr train --mode rag")
    gold = load_named("lcquad2-test", data_dir).records[:10]
    for name in ("direct", "pgmr"):
        entry = systems[name]
        assert entry["status"] == "ok" and entry["overall"]["n"] == 10 and entry["parameters"] > 0
        rows = list(read_jsonl(original_run / name / "predictions.jsonl"))
        assert [r["id"] for r in rows] == [r.id for r in gold]
        # The experiment's numbers are what `evaluate` gives for the rows it wrote.
        again = evaluate([{k: v for k, v in r.items() if k != "eval"} for r in rows], gold)
        for key in (
            "query_em",
            "sqm",
            "bleu",
            "uri_em",
            "invalid_rate",
            "refusal_rate",
            "hallucination_rate_gold",
        ):
            assert again.overall[key] == entry["overall"][key], key
        assert entry["overall"]["unknown_ids"] is not None  # the catalog was used (None without one)
        assert entry["num_beams"] == 1
    # The copy bias is recorded where it applies: pgmr decodes with the default, direct has none.
    assert systems["pgmr"]["copy_bias"] == DEFAULT_COPY_BIAS > 0 and systems["direct"]["copy_bias"] == 0.0
    assert systems["pgmr"]["relation_copy_bias"] == DEFAULT_RELATION_COPY_BIAS > 0
    assert all(
        r["status"] in ("resolved", "refused", "invalid")
        for r in read_jsonl(original_run / "pgmr" / "predictions.jsonl")
    )
    assert doc["command"].startswith(f"pgmr --data-dir {data_dir} experiment lcquad2-original")
    assert "--limit 10" in doc["command"] and doc["wall_seconds"] > 0
    report = (original_run / "report.md").read_text()
    assert "T5-small PGMR (paper)" in report and "74.23" in report and "35.08" in report
    assert "pgmr train --mode rag" in report
    assert (
        f"decoding: greedy, copy bias {DEFAULT_COPY_BIAS:g}" in report
        and "decoding: greedy, no copy bias" in report
    )
    assert (original_run / "lcquad2-original.png").read_bytes().startswith(PNG)


def test_keep_from_carries_an_earlier_runs_rows_for_systems_not_run_here(
    original_run: Path, data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    """Only pgmr is given: direct keeps the earlier run's result, marked with its date; rag, missing then
    too, stays missing; the earlier run must have scored the same questions."""
    earlier = _metrics(original_run)
    args = ["--limit", "10", "--memory", str(memory_dir), "--max-new-tokens", "12"]
    args += ["--models", f"pgmr={models['pgmr']}"]
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(cwd)  # no default direct or rag model here
        out = tmp_path / "again" / "lcquad2-original"
        result = _invoke(
            data_dir, "lcquad2-original", "--out", str(out), *args, "--keep-from", str(original_run)
        )
        assert result.exit_code == 0, result.output
        doc = _metrics(out)
        direct = doc["systems"]["direct"]
        assert direct["overall"] == earlier["systems"]["direct"]["overall"]
        assert direct["carried_from"] == {"started_at": earlier["started_at"], "command": earlier["command"]}
        assert doc["systems"]["rag"]["status"] == "missing"
        assert doc["systems"]["pgmr"]["status"] == "ok" and "carried_from" not in doc["systems"]["pgmr"]
        assert not (out / "direct").exists()  # nothing was generated for it
        report = (out / "report.md").read_text()
        when = earlier["started_at"][:16].replace("T", " ")
        assert f"| direct (run {when}) |" in report and "| pgmr (this run) |" in report
        assert f"direct: not re-run here; kept from the run of {earlier['started_at']}" in report
        result = runner.invoke(
            app,
            ["experiment", "results-doc", "--experiments-dir", str(out.parent), "--published"]
            + [str(tmp_path / "published"), "--out", str(tmp_path / "results.md")],
        )
        assert result.exit_code == 0, result.output
        text = (tmp_path / "results.md").read_text()
        assert f"quick run (--limit 10); direct kept from {earlier['started_at']}" in text
        assert "were timed in that run, not in this total" in text
        # Kept again from the second run: the row still names the run that computed it.
        third = tmp_path / "third"
        result = _invoke(data_dir, "lcquad2-original", "--out", str(third), *args, "--keep-from", str(out))
        assert result.exit_code == 0, result.output
        assert _metrics(third)["systems"]["direct"]["carried_from"]["started_at"] == earlier["started_at"]
        # Other questions, another experiment, or no metrics at all: a clear error before any generation.
        bad = tmp_path / "bad"
        other = [*args[2:], "--limit", "5"]
        result = _invoke(data_dir, "lcquad2-original", "--out", str(bad), *other, "--keep-from", str(out))
        assert (
            result.exit_code == 2 and "questions=10" in result.output and "not be comparable" in result.output
        )
        (tmp_path / "q.json").write_text(json.dumps({**earlier, "experiment": "qald10"}))
        result = _invoke(
            data_dir, "lcquad2-original", "--out", str(bad), *args, "--keep-from", str(tmp_path / "q.json")
        )
        assert result.exit_code == 2 and "a run of 'qald10'" in " ".join(result.output.split())
        result = _invoke(data_dir, "lcquad2-original", "--out", str(bad), *args, "--keep-from", str(cwd))
        assert result.exit_code == 2 and "cannot read" in " ".join(result.output.split())
        assert not bad.exists()


def test_bad_model_overrides_and_memory_are_clear_errors(
    data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    common = ["lcquad2-original", "--out", str(tmp_path / "x"), "--limit", "2"]
    result = _invoke(data_dir, *common, "--models", "nope=dir")
    assert result.exit_code == 2 and "unknown system 'nope'" in result.output
    result = _invoke(data_dir, *common, "--models", f"pgmr={models['direct']}")
    assert result.exit_code == 2 and "'direct' model" in result.output
    result = _invoke(data_dir, *common, "--models", f"pgmr={tmp_path / 'none'}")
    assert result.exit_code == 2 and "model_card.json" in result.output
    result = _invoke(
        data_dir, *common, "--models", f"pgmr={models['pgmr']}", "--memory", str(tmp_path / "nomem")
    )
    assert result.exit_code == 2 and "no pgmr memory" in result.output
    assert not (tmp_path / "x" / "metrics.json").exists()


def test_unknown_uri_trains_and_evaluates_on_held_out_entities(
    data_dir: Path, memory_dir: Path, tmp_path: Path, tiny_structured: Any
) -> None:
    from pgmr.conversion.unknown_uri import entity_ids

    out = tmp_path / "unknown"
    args = ["lcquad2-unknown-uri", "--out", str(out), "--memory", str(memory_dir), "--limit", "5"]
    args += ["--preset", "minilm-tiny", "--max-minutes", "1", "--max-steps", "1", "--eval-steps", "1"]
    args += ["--max-eval-examples", "2", "--vocab-size", "400", "--max-source-len", "32"]
    args += ["--max-target-len", "24", "--train-batch-size", "8", "--warmup-steps", "0"]
    args += ["--max-new-tokens", "8", "--test-share", "0.2"]
    result = _invoke(data_dir, *args)
    assert result.exit_code == 0, result.output
    doc = _metrics(out)
    split = json.loads((out / "split" / "split.json").read_text())
    test_ids = set(split["test_ids"])
    assert test_ids and split["test_records"] == len(test_ids) == doc["split"]["test_records"]
    # The split property, rechecked from the files: no entity of a test record in any training record.
    pool = {f"lcquad2-train:{r.id}": r for r in _converted(data_dir, "lcquad2-train")}
    pool |= {f"lcquad2-test:{r.id}": r for r in _converted(data_dir, "lcquad2-test")}
    assert test_ids <= set(pool)
    train_entities = {wid for rid, r in pool.items() if rid not in test_ids for wid in entity_ids(r)}
    test_entities = {wid for rid in test_ids for wid in entity_ids(pool[rid])}
    assert test_entities and not test_entities & train_entities
    # The resolver's role facts come from the split's training part: none is about a test entity.
    facts = json.loads((out / "split" / "facts.json").read_text())
    fact_ids = {
        i
        for table in ("entities", "classes")
        for r in facts[table].values()
        for ids in r.values()
        for i in ids
    }
    assert fact_ids and not fact_ids & test_entities
    for mode in ("pgmr", "direct"):
        card = json.loads((out / "runs" / mode / "model" / "model_card.json").read_text())
        assert card["mode"] == mode and card["model"]["preset"] == "minilm-tiny"
        assert doc["training"][mode]["global_step"] == 1
        entry = doc["systems"][mode]
        assert entry["status"] == "ok" and entry["overall"]["n"] == min(5, len(test_ids))
        rows = list(read_jsonl(out / mode / "predictions.jsonl"))
        assert {r["id"] for r in rows} <= test_ids
    assert (
        "no entity ID of a test question occurs in any training question" in (out / "report.md").read_text()
    )

    # Without training, a fresh directory has no models: reported missing, with how to make them; exit 1.
    fresh = tmp_path / "fresh"
    result = _invoke(
        data_dir,
        "lcquad2-unknown-uri",
        "--out",
        str(fresh),
        "--memory",
        str(memory_dir),
        "--no-train",
        "--modes",
        "pgmr",
        "--limit",
        "2",
    )
    assert result.exit_code == 1, result.output
    entry = _metrics(fresh)["systems"]["pgmr"]
    assert entry["status"] == "missing" and "lcquad2-unknown-uri" in entry["train_command"]

    # Run for one mode only, keeping the rest from the first run: both rows and their training records come
    # along, marked; the same split is required.
    kept = tmp_path / "kept"
    again = ["lcquad2-unknown-uri", "--out", str(kept), "--memory", str(memory_dir), "--no-train"]
    again += ["--modes", "direct", "--limit", "5", "--keep-from", str(out)]
    result = _invoke(data_dir, *again, "--test-share", "0.2")
    assert result.exit_code == 0, result.output
    kept_doc = _metrics(kept)
    assert list(kept_doc["systems"]) == ["pgmr", "direct"]
    for mode in ("pgmr", "direct"):
        assert kept_doc["systems"][mode]["overall"] == doc["systems"][mode]["overall"]
        assert kept_doc["systems"][mode]["carried_from"]["started_at"] == doc["started_at"]
        assert kept_doc["training"][mode] == doc["training"][mode]
    result = _invoke(data_dir, *again, "--test-share", "0.3")
    assert result.exit_code == 2 and "another split" in " ".join(result.output.split())

    # The default's recipe on the split: the pgmr run's model and a structured model make the row
    # pgmr-ensemble, its reranker fitted on the split's validation part. This structured model was trained on
    # other records, which the experiment says.
    ensemble_args = ["lcquad2-unknown-uri", "--out", str(out), "--memory", str(memory_dir), "--no-train"]
    ensemble_args += ["--modes", "pgmr", "--limit", "5", "--test-share", "0.2", "--max-new-tokens", "8"]
    result = _invoke(data_dir, *ensemble_args, "--structured", str(tiny_structured[0]))
    assert result.exit_code == 0, result.output
    assert "not trained on this split" in " ".join(result.output.split())
    doc = _metrics(out)
    entry = doc["systems"]["pgmr-ensemble"]
    assert entry["status"] == "ok" and entry["overall"]["n"] == min(5, len(test_ids))
    assert [m["name"] for m in entry["members"]] == ["seq2seq", "structured"]
    ensemble = out / "runs" / "pgmr-ensemble"
    reranker = json.loads((ensemble / "reranker.json").read_text())
    assert set(reranker["weights"]) == {"seq2seq", "structured"}
    validation = doc["training_data"]["validation_examples"]
    assert doc["rerank"]["validation_questions"] == validation > 0
    # The prior leaves out the validation part, where the reranker is fitted (as the shipped memory's does).
    assert doc["training_data"]["prior_queries"] == doc["training_data"]["train_examples"]
    assert reranker["provenance"]["fit"] == doc["rerank"]
    if doc["rerank"].get("fitted") is False:  # tiny models: no question where one draft is right, one wrong
        assert not any(v for weights in reranker["weights"].values() for v in weights.values())
    rows = list(read_jsonl(out / "pgmr-ensemble" / "predictions.jsonl"))
    assert rows and all([d["source"] for d in r["drafts"]] == ["seq2seq", "structured"] for r in rows)
    assert all(sum(d["chosen"] for d in r["drafts"]) == 1 for r in rows)
    assert "pgmr-ensemble reranker" in (out / "report.md").read_text()
    # Called again with the same members, the reranker is kept rather than fitted again.
    written = (ensemble / "reranker.json").read_bytes()
    result = _invoke(data_dir, *ensemble_args, "--structured", str(tiny_structured[0]))
    assert result.exit_code == 0, result.output
    assert "kept" in result.output and (ensemble / "reranker.json").read_bytes() == written
    assert _metrics(out)["rerank"] == doc["rerank"]
    # A further member (here the pgmr run's model again, under another name) makes three drafts per question
    # and a reranker fitted again, with weights for each.
    three = [*ensemble_args, "--structured", str(tiny_structured[0])]
    result = _invoke(data_dir, *three, "--member", f"again={out / 'runs' / 'pgmr'}")
    assert result.exit_code == 0, result.output
    assert "kept" not in result.output
    # The recorded command repeats a repeatable option as typed, so it can be run again.
    assert f"--member again={out / 'runs' / 'pgmr'} " in _metrics(out)["command"] + " "
    assert [m["name"] for m in _metrics(out)["systems"]["pgmr-ensemble"]["members"]] == [
        "seq2seq",
        "structured",
        "again",
    ]
    assert set(json.loads((ensemble / "reranker.json").read_text())["weights"]) == {
        "seq2seq",
        "structured",
        "again",
    }
    rows = list(read_jsonl(out / "pgmr-ensemble" / "predictions.jsonl"))
    assert rows and all(
        [d["source"] for d in r["drafts"]] == ["seq2seq", "structured", "again"] for r in rows
    )
    # A draft verifier joins the ensemble (copied into it, its score a signal of a reranker fitted again);
    # called again without it, it is taken out and the reranker is fitted without it.
    from pgmr.generators.verifier import (
        VERIFIER_DIR,
        Verifier,
        VerifierConfig,
        VerifierExample,
        train_verifier,
    )

    question = rows[0]["question"]
    examples = [VerifierExample(question, f"select ?v0 where {{ [{w}] ?v0 }}", w == "a") for w in "ab"]
    config = VerifierConfig(max_steps=1, batch_size=2, bf16=False, checkpoint_every=1)
    train_verifier(examples, tmp_path / "verifier", config, layers=1)
    result = _invoke(data_dir, *three, "--verifier", str(tmp_path / "verifier"))
    assert result.exit_code == 0, result.output
    assert "kept" not in result.output
    placed = Verifier.load(ensemble / VERIFIER_DIR)
    assert placed.card["training"]["steps"] == 1
    assert _metrics(out)["settings"]["options"]["verifier"] == str(tmp_path / "verifier")
    assert _metrics(out)["systems"]["pgmr-ensemble"]["verifier"]["train_steps"] == 1
    with_verifier = json.loads((ensemble / "reranker.json").read_text())
    result = _invoke(data_dir, *three, "--verifier", str(tmp_path / "verifier" / "model"))
    assert result.exit_code == 0 and "kept" in result.output, result.output
    assert json.loads((ensemble / "reranker.json").read_text()) == with_verifier
    result = _invoke(data_dir, *three)
    assert result.exit_code == 0 and "kept" not in result.output, result.output
    assert not (ensemble / VERIFIER_DIR).exists()
    assert "verifier" not in _metrics(out)["systems"]["pgmr-ensemble"]
    result = _invoke(data_dir, *three, "--verifier", str(tmp_path / "nothing"))
    said = " ".join(result.output.split())
    assert result.exit_code == 2 and "--verifier" in said and "not a verifier" in said, said
    result = _invoke(data_dir, *ensemble_args, "--verifier", str(tmp_path / "verifier"))
    assert result.exit_code == 2 and "needs its structured member" in " ".join(result.output.split())
    # Members that cannot be: a name taken, no NAME=DIR, a direct-mode model.
    for bad, says in (
        (f"structured={out / 'runs' / 'pgmr'}", "member names must differ"),
        (str(out / "runs" / "pgmr"), "write NAME=DIR"),
        (f"direct={out / 'runs' / 'direct'}", "members are pgmr-mode models"),
    ):
        result = _invoke(data_dir, *three, "--member", bad)
        assert result.exit_code == 2 and says in " ".join(result.output.split()), (bad, result.output)
    # A model of another backend is refused with the reason.
    result = _invoke(data_dir, *ensemble_args, "--structured", str(out / "runs" / "pgmr"))
    assert result.exit_code == 2 and "pass a structured model" in " ".join(result.output.split())


def test_qald10_scores_answers_on_the_store(
    data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no default rag model here
    out = tmp_path / "qald"
    common = ["qald10", "--out", str(out), "--memory", str(memory_dir), "--limit", "4"]
    common += ["--models", f"pgmr={models['pgmr']},direct={models['direct']}", "--max-new-tokens", "12"]
    result = _invoke(data_dir, *common)
    assert result.exit_code == 0, result.output
    doc = _metrics(out)
    assert doc["settings"]["store"].endswith("qald10_answer_derived.nt")
    for name in ("direct", "pgmr"):
        overall = doc["systems"][name]["overall"]
        assert overall["n"] == 4 and overall["answer_scored"] == 4
        assert overall["answer_f1"] is not None and 0.0 <= overall["answer_f1"] <= 1.0
    assert doc["systems"]["chat-pgmr"]["status"] == "not run"
    assert doc["systems"]["pgmr-qald10-train"]["status"] == "not run"
    assert "--server" in (out / "report.md").read_text() and "--finetuned" in (out / "report.md").read_text()
    # A model fine-tuned on qald10-train gets its own row (the pgmr model stands in for it here).
    result = _invoke(data_dir, *common, "--finetuned", str(models["pgmr"]))
    assert result.exit_code == 0, result.output
    again = _metrics(out)["systems"]
    assert again["pgmr-qald10-train"]["status"] == "ok"
    assert again["pgmr-qald10-train"]["overall"] == again["pgmr"]["overall"]
    assert len(list(read_jsonl(out / "pgmr-qald10-train" / "predictions.jsonl"))) == 4
    result = _invoke(data_dir, *common, "--server", "http://127.0.0.1:9")
    assert result.exit_code == 2 and "--server-model" in result.output


def test_qald10_chat_row_resolves_and_executes_what_the_server_writes(
    data_dir: Path, memory_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 that answers each question with its gold query in
    SPARQL-PGMR: the chat row must resolve those to the gold queries and execute them to the gold answers;
    a server that fails costs only its own row."""
    from llm_server import scripted_server
    from pgmr.datasets import load_named

    monkeypatch.chdir(tmp_path)  # no default models here: the chat row is the only one evaluated
    questions = {r.question: r.intermediate for r in _converted(data_dir, "qald10-test")}
    assert len(questions) >= 3

    def oracle(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "oracle", "owned_by": "test"}]}
        asked = body["messages"][-1]["content"]  # type: ignore[index]
        answer = next((q for text, q in questions.items() if text in asked), "no idea")
        return 200, {"choices": [{"message": {"role": "assistant", "content": answer}}]}

    out = tmp_path / "qald-chat"
    args = ["qald10", "--out", str(out), "--memory", str(memory_dir), "--limit", "4", "--k-shots", "0"]
    with scripted_server(oracle) as (url, received):
        result = _invoke(data_dir, *args, "--server", url, "--server-model", "oracle")
    assert result.exit_code == 0, result.output
    assert len(received) == 4
    chat = _metrics(out)["systems"]["chat-pgmr"]
    converted = sum(1 for r in load_named("qald10-test", data_dir).records[:4] if r.question in questions)
    assert chat["status"] == "ok" and chat["overall"]["n"] == 4
    # Gold queries in, so (nearly) gold queries out, and the small KG holds these questions' answers.
    assert chat["overall"]["query_em"] >= 0.75 * converted / 4
    assert chat["overall"]["answer_f1"] >= 0.75 * converted / 4
    rows = list(read_jsonl(out / "chat-pgmr" / "predictions.jsonl"))
    assert all(r["status"] in ("resolved", "refused", "invalid") for r in rows)

    def broken(path: str, body: dict[str, Any] | None) -> tuple[int, Any]:
        if path == "/v1/models":
            return 200, {"object": "list", "data": [{"id": "oracle", "owned_by": "test"}]}
        return 500, {"error": {"message": "overloaded"}}

    with scripted_server(broken) as (url, _):
        result = _invoke(data_dir, *args, "--server", url, "--server-model", "oracle")
    # Every seq2seq model is missing and the chat row failed: nothing was evaluated.
    assert result.exit_code == 1, result.output
    chat = _metrics(out)["systems"]["chat-pgmr"]
    assert chat["status"] == "error" and "500" in chat["note"]


def test_distractors_resolve_one_set_of_outputs_against_growing_memories(
    data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    oracle = _oracle(data_dir, tmp_path / "oracle.jsonl", 12, description_words=0)
    out = tmp_path / "distractors"
    args = ["distractors", "--out", str(out), "--memory", str(memory_dir), "--limit", "12"]
    result = _invoke(data_dir, *args, "--predictions", str(oracle), "--sizes", "0,1,3,full")
    assert result.exit_code == 0, result.output
    doc = _metrics(out)
    results = {r["label"]: r for r in doc["results"]}
    assert list(results) == ["0x", "1x", "3x", "full"]
    gold = doc["gold_entities"]
    assert gold > 0 and results["0x"]["entities_in_memory"] == gold
    assert results["1x"]["entities_in_memory"] == 2 * gold
    assert results["3x"]["entities_in_memory"] == 4 * gold <= results["full"]["entities_in_memory"]
    # A perfect generator's queries resolve back to the gold with only the gold entities around...
    assert results["0x"]["overall"]["query_em"] >= 0.6
    # ...and the memories are nested, so a question right in a larger memory is right in every smaller one.
    em = {
        label: {r["id"]: r["eval"]["query_em"] for r in read_jsonl(out / label / "predictions.jsonl")}
        for label in results
    }
    for small, large in (("0x", "1x"), ("1x", "3x"), ("3x", "full")):
        assert all(em[small][i] for i, right in em[large].items() if right), (small, large)
    assert (out / "distractors.png").read_bytes().startswith(PNG)
    assert len(list(read_jsonl(out / "generated.jsonl"))) == 12

    # --grown: the same outputs against a memory built elsewhere (here the full one again), labelled by size.
    grown_out = tmp_path / "grown"
    result = _invoke(data_dir, *args[:1], "--out", str(grown_out), *args[3:], "--predictions", str(oracle),
                     "--sizes", "", "--grown", str(memory_dir))  # fmt: skip
    assert result.exit_code == 0, result.output
    (grown,) = _metrics(grown_out)["results"]
    assert grown["label"].startswith("grown-") and grown["vectors"] == "encoded"
    assert grown["overall"]["query_em"] == results["full"]["overall"]["query_em"]
    # --grown-prior shipped: the grown memory ranks with the experiment memory's prior (here the same one).
    result = _invoke(data_dir, *args[:1], "--out", str(tmp_path / "shipped"), *args[3:], "--predictions",
                     str(oracle), "--sizes", "", "--grown", str(memory_dir), "--grown-prior", "shipped")  # fmt: skip
    assert result.exit_code == 0, result.output
    (shipped,) = _metrics(tmp_path / "shipped")["results"]
    assert shipped["label"].endswith("-shipped-prior") and shipped["prior"] == results["full"]["prior"]
    assert shipped["overall"]["query_em"] == results["full"]["overall"]["query_em"]
    result = _invoke(data_dir, *args[:1], "--out", str(grown_out), *args[3:], "--sizes", "")
    assert result.exit_code == 2 and "no size" in result.output

    # With the model: its outputs are generated once, then resolved per size.
    out2 = tmp_path / "with-model"
    result = _invoke(
        data_dir,
        "distractors",
        "--out",
        str(out2),
        "--memory",
        str(memory_dir),
        "--limit",
        "3",
        "--sizes",
        "1",
        "--models",
        f"pgmr={models['pgmr']}",
        "--max-new-tokens",
        "12",
    )
    assert result.exit_code == 0, result.output
    doc = _metrics(out2)
    assert doc["source"]["model"] == str(models["pgmr"]) and doc["results"][0]["overall"]["n"] == 3
    result = _invoke(data_dir, "distractors", "--out", str(out2), "--sizes", "1,x")
    assert result.exit_code == 2 and "'x'" in result.output


def test_refusal_sweep_refuses_questions_whose_entities_or_relations_left_the_memory(
    data_dir: Path, memory_dir: Path, tmp_path: Path
) -> None:
    oracle = _oracle(data_dir, tmp_path / "oracle.jsonl", 30)
    out = tmp_path / "refusal"
    args = ["refusal", "--out", str(out), "--memory", str(memory_dir), "--limit", "30"]
    result = _invoke(data_dir, *args, "--predictions", str(oracle), "--threshold", "0.5")
    assert result.exit_code == 0, result.output
    doc = _metrics(out)
    assert doc["threshold"] == 0.5 and set(doc["variants"]) == {"entity-removed", "relation-removed"}
    for name, variant in doc["variants"].items():
        sample = variant["sample"]
        assert sample["answerable"] + sample["unanswerable"] == sample["questions"] > 10, name
        assert sample["unanswerable"] > 0 and sample["removed_ids"] > 0, name
        curve = variant["curve"]
        coverage = [p["coverage"] for p in curve]
        recall = [p["refusal_recall"] for p in curve]
        assert coverage == sorted(coverage, reverse=True) and recall == sorted(recall), name
        rc = variant["risk_coverage"]
        assert rc and [p["coverage"] for p in rc] == sorted(p["coverage"] for p in rc), name
        assert 0.0 <= variant["area"] <= 1.0, name
    chosen = doc["variants"]["entity-removed"]["chosen"]
    assert chosen["threshold"] == 0.5 and chosen["sweep_agrees"] is True
    rows = list(read_jsonl(out / "threshold-0.5" / "predictions.jsonl"))
    assert sum(r["status"] == "refused" for r in rows) == chosen["refused_by_resolver"]
    # An unanswerable question's gold entity is gone from the memory, so no answer to it can be the gold.
    unanswered = [r for r in rows if not r["answerable"] and r["status"] == "resolved"]
    assert all(not r["eval"]["query_em"] for r in unanswered)
    # A perfect generator on answerable questions is mostly right and mostly not refused.
    answerable = [r for r in rows if r["answerable"] and r["prediction"]]
    assert answerable and sum(r["eval"]["query_em"] for r in answerable) >= len(answerable) / 2
    full = doc["answerable"]
    assert full["questions"] == 30 and full["query_em_on"] <= full["query_em_off"]
    assert full["cost"] == pytest.approx(full["query_em_off"] - full["query_em_on"])
    report = (out / "report.md").read_text()
    assert "risk-coverage area" in report and "relation-removed" in report
    assert (out / "refusal.png").read_bytes().startswith(PNG)


def test_refusal_with_drafts_refuses_a_question_only_when_no_draft_is_supported(
    data_dir: Path, memory_dir: Path, models: dict[str, Path], tmp_path: Path
) -> None:
    """Each question has two drafts: the gold query (well supported) and one with a made-up entity label, which
    the reranker prefers. Without refusal the made-up draft is returned; at a threshold it is refused and the
    gold draft answers, so the question is not refused: as `pgmr ask` does with an ensemble. The sweep predicts
    every refusal and every final query of the real resolution at the threshold."""
    import re

    from pgmr.generators.ensemble import RERANKER_FILE
    from pgmr.pipeline.rerank import FEATURES, Reranker

    oracle = list(read_jsonl(_oracle(data_dir, tmp_path / "oracle.jsonl", 30)))
    rows = []
    for row in oracle:
        garbled = re.sub(r"\[ENT\] .*? \[/ENT\]", "[ENT] Qwyrtz Blorfnax [/ENT]", row["prediction"], count=1)
        drafts = [{"source": "gold", "text": row["prediction"]}, {"source": "made-up", "text": garbled}]
        rows.append({**row, "drafts": drafts})
    predictions = tmp_path / "drafts.jsonl"
    write_jsonl(predictions, rows)
    ensemble = tmp_path / "ensemble"
    ensemble.mkdir()
    members = [{"name": n, "path": str(models["pgmr"])} for n in ("gold", "made-up")]
    card = {"backend": "ensemble", "mode": "pgmr", "members": members}
    (ensemble / "model_card.json").write_text(json.dumps(card), encoding="utf-8")
    zero = {"bias": 0.0, **dict.fromkeys(FEATURES, 0.0)}
    reranker = Reranker({"gold": zero, "made-up": {**zero, "bias": 10.0}})
    (ensemble / RERANKER_FILE).write_text(json.dumps(reranker.to_json()), encoding="utf-8")

    out = tmp_path / "refusal"
    args = ["refusal", "--out", str(out), "--memory", str(memory_dir), "--limit", "30", "--threshold", "0.5"]
    result = _invoke(data_dir, *args, "--predictions", str(predictions), "--models", f"pgmr={ensemble}")
    assert result.exit_code == 0, result.output
    doc = _metrics(out)
    full = doc["answerable"]
    assert full["drafts_per_question"] == 2
    # Without refusal the preferred made-up draft is returned: mostly wrong (grounding snaps some made-up
    # labels back to a span of the question). At 0.5 the gold draft is returned and hardly any question is
    # refused.
    assert full["query_em_off"] < 0.5 and full["query_em_on"] >= 0.8 and full["refused"] < 0.1
    chosen = doc["variants"]["entity-removed"]["chosen"]
    assert chosen["sweep_agrees"] is True
    answered = [
        r for r in read_jsonl(out / "threshold-0.5" / "predictions.jsonl") if r["status"] == "resolved"
    ]
    by_source = [{d["source"]: d for d in r["drafts"]} for r in answered]
    # The preferred draft loses only where it did not resolve at the threshold; then the gold draft answers.
    assert all(d["made-up"]["chosen"] or d["made-up"]["status"] != "resolved" for d in by_source)
    assert sum(d["gold"]["chosen"] for d in by_source) >= len(by_source) / 2
    written = [[(d["source"], d["text"]) for d in r["drafts"]] for r in read_jsonl(out / "generated.jsonl")]
    assert written == [[(d["source"], d["text"]) for d in r["drafts"]] for r in rows]

    # Drafts of several members cannot be chosen among without the ensemble's reranker.
    result = _invoke(data_dir, *args, "--predictions", str(predictions), "--models", f"pgmr={models['pgmr']}")
    assert result.exit_code != 0 and RERANKER_FILE in result.output


def test_results_doc_publishes_runs_and_gathers_tables(original_run: Path, tmp_path: Path) -> None:
    target = tmp_path / "docs" / "results.md"
    published = tmp_path / "docs" / "results"

    def results_doc(experiments_dir: Path) -> Any:
        return runner.invoke(
            app,
            [
                "experiment",
                "results-doc",
                "--experiments-dir",
                str(experiments_dir),
                "--published",
                str(published),
                "--out",
                str(target),
            ],
        )

    result = results_doc(original_run.parent)
    assert result.exit_code == 0, result.output
    doc = _metrics(original_run)
    copied = published / "lcquad2-original"
    assert json.loads((copied / "metrics.json").read_text()) == doc
    assert (copied / "report.md").read_text() == (original_run / "report.md").read_text()
    for plot in doc["plots"]:
        assert (copied / plot).read_bytes() == (original_run / plot).read_bytes()
    text = target.read_text()
    assert text.startswith("# Results")
    assert "| system | n | Query EM | SQM | BLEU | URI EM |" in text
    assert "T5-small PGMR (paper)" in text and "GPT-4o PGMR" in text and "69.48" in text
    assert f"{100 * doc['systems']['pgmr']['overall']['query_em']:.2f}" in text
    assert "quick run (--limit 10)" in text
    assert "Total wall time of the published runs" in text and "Training the 2 models they evaluate" in text
    assert f"Models: `{doc['systems']['direct']['model']}` (direct, " in text
    assert "decoding: greedy, no copy bias" in text
    # Plots are linked relative to the document, into the published copies.
    assert f"](results/lcquad2-original/{doc['plots'][0]})" in text
    for name in ("lcquad2-unknown-uri", "qald10", "distractors", "refusal", "ck25"):
        assert f"Not run: no `{name}/metrics.json` yet" in text
    # CK25 (not the paper's) has its row in an overview of its own, after the paper's totals.
    assert text.index("| ck25 | not run |") > text.index("Total wall time of the published runs")
    # The margin table holds the split that has both systems, with the points and the ratio computed.
    p, d = (100 * doc["systems"][m]["overall"]["query_em"] for m in ("pgmr", "direct"))
    margin_rows = [line for line in text.splitlines() if line.startswith("| original |")]
    assert len(margin_rows) == 1 and f"{p - d:+.2f}" in margin_rows[0]
    assert "Model size and training" in text and "Hallucination" in text

    # A machine that ran nothing (empty scratch directory) keeps the published results.
    result = results_doc(tmp_path / "nothing-ran")
    assert result.exit_code == 0, result.output
    assert target.read_text() == text
    # An older run left in a scratch directory does not replace the published one.
    stale = tmp_path / "stale" / "lcquad2-original"
    shutil.copytree(original_run, stale)
    (stale / "metrics.json").write_text(json.dumps({**doc, "started_at": "2000-01-01T00:00:00+00:00"}))
    result = results_doc(stale.parent)
    assert result.exit_code == 0, result.output
    assert target.read_text() == text

    bad = tmp_path / "bad" / "refusal"
    bad.mkdir(parents=True)
    (bad / "metrics.json").write_text("{not json")
    result = results_doc(bad.parent)
    assert result.exit_code == 2 and "cannot read" in result.output
    assert target.read_text() == text and not (published / "refusal").exists()


def test_models_line_names_trained_and_served_models() -> None:
    from pgmr.experiments.results_doc import models_line

    doc = {
        "systems": {
            "pgmr": {
                "status": "ok",
                "model": "models/m",
                "mode": "pgmr",
                "train_steps": 6000,
                "train_wall_seconds": 60.0,
            },
            "chat-pgmr": {"status": "ok", "model": "smol at http://127.0.0.1:8765", "mode": "pgmr"},
            "rag": {"status": "missing", "model": "runs/rag"},
        }
    }
    line = models_line(doc)
    assert line is not None and line.startswith("Models: `models/m` (pgmr, 6000 training steps, ")
    assert (
        "`smol at http://127.0.0.1:8765` (pgmr; a served chat model, prompted few-shot, not trained here)"
        in line
    )
    assert "runs/rag" not in line  # only systems that ran are listed


def test_an_ensembles_draft_verifier_is_listed_and_its_training_counted(tmp_path: Path) -> None:
    from pgmr.experiments.results_doc import models_line, total_wall_time
    from pgmr.experiments.systems import card_summary

    member = tmp_path / "member"
    member.mkdir()
    card = {"mode": "pgmr", "model": {"preset": "tiny", "parameters": 10}, "training": {"global_step": 4}}
    (member / "model_card.json").write_text(
        json.dumps({**card, "training": {"global_step": 4, "wall_seconds": 60}})
    )
    ensemble = tmp_path / "ensemble"
    (ensemble / "verifier").mkdir(parents=True)
    ens_card = {"backend": "ensemble", "mode": "pgmr", "members": [{"name": "a", "path": "../member"}]}
    summary = card_summary(ensemble, ens_card)
    assert "verifier" not in summary and summary["train_wall_seconds"] == 60
    verifier_card = {"backend": "verifier", "command": "v", "training": {"steps": 25, "seconds": 120.0}}
    (ensemble / "verifier" / "model_card.json").write_text(json.dumps(verifier_card))
    summary = card_summary(ensemble, ens_card)
    assert summary["verifier"] == {
        "model": str(ensemble / "verifier"),
        "trained_by": "v",
        "train_steps": 25,
        "train_wall_seconds": 120.0,
    }
    assert summary["train_wall_seconds"] == 180.0 and summary["train_steps"] == "4"
    doc = {"systems": {"pgmr": {"status": "ok", "model": str(ensemble), "mode": "pgmr", **summary}}}
    line = models_line(doc)
    assert (
        line is not None and f"draft verifier `{ensemble / 'verifier'}` (25 training steps, 2.0 min)" in line
    )
    (total,) = total_wall_time({"lcquad2-original": {"wall_seconds": 1.0, **doc}})[:1]
    assert "Training the 2 models they evaluate took 3.0 min" in total  # the member and the verifier
    # Another ensemble of the same member with a copy of the verifier adds no training.
    copy = tmp_path / "copy"
    shutil.copytree(ensemble, copy)
    doc["systems"]["other"] = {
        "status": "ok",
        "model": str(copy),
        "mode": "pgmr",
        **card_summary(copy, ens_card),
    }
    (total,) = total_wall_time({"lcquad2-original": {"wall_seconds": 1.0, **doc}})[:1]
    assert "Training the 2 models they evaluate took 3.0 min" in total


def test_the_margin_table_takes_the_unknown_uri_splits_ensemble_row_where_there_is_one() -> None:
    from pgmr.experiments.results_doc import margins_table

    def system(query_em: float, status: str = "ok") -> dict[str, Any]:
        return {"status": status, "overall": {"query_em": query_em, "n": 10}, "train_steps": 1}

    systems = {"pgmr": system(0.3), "pgmr-ensemble": system(0.4), "direct": system(0.0)}
    table = margins_table({"lcquad2-unknown-uri": {"systems": systems}})
    assert table is not None and "| unknown-URI | 10 | 40.00 | 0.00 | +40.00 |" in table
    systems["pgmr-ensemble"] = system(0.4, "missing")
    table = margins_table({"lcquad2-unknown-uri": {"systems": systems}})
    assert table is not None and "| unknown-URI | 10 | 30.00 | 0.00 | +30.00 |" in table
