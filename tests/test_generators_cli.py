"""`pgmr train` and `pgmr generate` end to end on a tiny data directory (rag-pgmr: retrieval, training,
generation, resolution)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.jsonl import write_jsonl

runner = CliRunner()

ENTITIES = [
    {"id": "Q1055", "label": "Hamburg", "description": "city and state in northern Germany", "aliases": []},
    {"id": "Q64", "label": "Berlin", "description": "capital and largest city of Germany", "aliases": []},
    {"id": "Q183", "label": "Germany", "description": "country in Central Europe", "aliases": ["FRG"]},
    {"id": "Q142", "label": "France", "description": "country in Western Europe", "aliases": []},
    {"id": "Q90", "label": "Paris", "description": "capital and largest city of France", "aliases": []},
    {"id": "Q5", "label": "human", "description": None, "aliases": ["person"]},
]
PROPERTIES = [
    {
        "id": "P1082",
        "label": "population",
        "description": "number of people inhabiting the place",
        "aliases": [],
    },
    {"id": "P36", "label": "capital", "description": "seat of government", "aliases": []},
    {"id": "P31", "label": "instance of", "description": "class of which this is an example", "aliases": []},
]


def train_rows(named: list[tuple[str, str]]) -> list[dict]:
    """LC-QuAD 2.0 style rows (population, capital, is-a-human) about each (QID, name)."""
    rows = []
    for qid, name in named:
        for pid, question in (
            ("P1082", "How many people live in {}?"),
            ("P36", "What is the capital of {}?"),
        ):
            sparql = f"SELECT ?x WHERE {{ wd:{qid} wdt:{pid} ?x }}"
            rows.append({"uid": len(rows) + 1, "question": question.format(name), "sparql_wikidata": sparql})
        ask = f"ASK {{ wd:{qid} wdt:P31 wd:Q5 }}"
        rows.append({"uid": len(rows) + 1, "question": f"Is {name} a human?", "sparql_wikidata": ask})
    return rows


def _train_rows() -> list[dict]:
    return train_rows([(e["id"], e["label"]) for e in ENTITIES[:5]])


def _jsonl(path: Path, rows: list[dict]) -> Path:
    write_jsonl(path, rows)
    return path


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("data")
    _jsonl(root / "memory" / "entities.jsonl", ENTITIES)
    _jsonl(root / "memory" / "properties.jsonl", PROPERTIES)
    _jsonl(root / "lcquad2" / "train.jsonl", _train_rows())
    _jsonl(root / "lcquad2" / "test.jsonl", _train_rows()[:3])
    return root


@pytest.fixture(scope="module")
def memory_dir(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("mem") / "memory"
    result = runner.invoke(app, ["--data-dir", str(data_dir), "memory", "build", "-o", str(out)])
    assert result.exit_code == 0, result.output
    return out


TINY = ["--preset", "tiny", "--vocab-size", "300", "--max-source-len", "96", "--max-target-len", "32"]
TINY += ["--batch-size", "8", "--eval-steps", "2", "--warmup-steps", "0", "--no-progress"]


def test_train_then_generate_and_resolve(data_dir: Path, memory_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["--data-dir", str(data_dir), "train", "--mode", "rag-pgmr", "--out", str(run), "--max-steps", "2"]
    args += ["--memory", str(memory_dir), "--validation-share", "0.3", "--max-description-words", "3", *TINY]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "exact_match" in result.output and "parse_rate" in result.output
    card = json.loads((run / "model" / "model_card.json").read_text())
    assert card["mode"] == "rag-pgmr" and card["data"]["datasets"] == ["lcquad2-train"]
    assert card["data"]["retriever"]["k_entities"] == 5 and card["data"]["max_description_words"] == 3
    assert card["data"]["train_examples"] + card["data"]["validation_examples"] == 15

    predictions = tmp_path / "pred.jsonl"
    args = ["--data-dir", str(data_dir), "generate", str(run), "lcquad2-test", "--out", str(predictions)]
    args += ["--resolve", "--memory", str(memory_dir), "--max-new-tokens", "8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert [r["id"] for r in rows] == ["1", "2", "3"]
    for row in rows:
        assert isinstance(row["prediction"], str) and row["question"] and row["gold"]
        # A two-step model writes no valid query: each line says why instead of failing the run.
        assert row["status"] in ("resolved", "refused", "invalid")
        if row["status"] == "invalid":
            assert set(row["error"]) == {"code", "message", "line", "column"}


def test_generate_refuses_resolve_for_direct_models_and_bad_dirs(data_dir: Path, tmp_path: Path) -> None:
    run = tmp_path / "run"
    args = ["--data-dir", str(data_dir), "train", "--mode", "direct", "--out", str(run), "--max-steps", "1"]
    result = runner.invoke(app, [*args, "--validation-share", "0.3", *TINY])
    assert result.exit_code == 0, result.output
    out = tmp_path / "p.jsonl"
    result = runner.invoke(
        app, ["--data-dir", str(data_dir), "generate", str(run), "lcquad2-test", "-o", str(out), "--resolve"]
    )
    assert result.exit_code == 2 and "--resolve needs" in result.output
    questions = _jsonl(tmp_path / "q.jsonl", [{"id": "a", "question": "Who is Paris?"}])
    result = runner.invoke(
        app, ["generate", str(run), str(questions), "-o", str(out), "--max-new-tokens", "4"]
    )
    assert result.exit_code == 0, result.output
    assert [json.loads(line)["id"] for line in out.read_text().splitlines()] == ["a"]
    result = runner.invoke(app, ["generate", str(tmp_path), str(questions), "-o", str(out)])
    assert result.exit_code == 2 and "model_card.json" in result.output


def test_decoder_only_lora_trains_and_generates_through_the_cli(
    data_dir: Path, memory_dir: Path, tmp_path: Path
) -> None:
    run = tmp_path / "run"
    args = ["--data-dir", str(data_dir), "train", "--mode", "pgmr", "--out", str(run), "--max-steps", "2"]
    args += ["--validation-share", "0.3", *TINY, "--preset", "llama-tiny", "--vocab-size", "400"]
    args += ["--lora-r", "2", "--gradient-accumulation-steps", "2"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    card = json.loads((run / "model" / "model_card.json").read_text())
    assert card["backend"] == "causal" and card["model"]["lora"]["r"] == 2
    assert card["training"]["config"]["gradient_accumulation_steps"] == 2
    predictions = tmp_path / "pred.jsonl"
    args = ["--data-dir", str(data_dir), "generate", str(run), "lcquad2-test", "--out", str(predictions)]
    args += ["--resolve", "--memory", str(memory_dir), "--max-new-tokens", "8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    assert len(rows) == 3 and all(r["status"] in ("resolved", "refused", "invalid") for r in rows)
    # A seq2seq-only option on a decoder-only model is refused with a clear message.
    args = ["--data-dir", str(data_dir), "train", "--mode", "pgmr", "--out", str(tmp_path / "r2")]
    args += ["--validation-share", "0.3", *TINY, "--preset", "llama-tiny", "--encoder-lr", "1e-4"]
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and "encoder" in result.output


def test_paraphrases_are_extra_training_questions(data_dir: Path, tmp_path: Path) -> None:
    rows = _train_rows()
    for row in rows[::2]:
        row["paraphrased_question"] = f"Tell me this: {row['question']}"
    train = _jsonl(tmp_path / "train.jsonl", rows)

    def trained(name: str, *extra: str) -> tuple[int, dict]:
        run = tmp_path / name
        args = ["--data-dir", str(data_dir), "train", "--mode", "pgmr", "--out", str(run), "--max-steps", "1"]
        args += ["--train", str(train), "--validation-share", "0.3", *TINY, *extra]
        result = runner.invoke(app, args)
        assert result.exit_code == 0, result.output
        count = int(re.search(r"(\d+) training and \d+ validation examples", result.output)[1])  # type: ignore[index]
        return count, json.loads((run / "model" / "model_card.json").read_text())["data"]

    plain, plain_data = trained("plain")
    more, data = trained("para", "--paraphrases")
    # Each training record with a paraphrase is asked a second time; validation records are not.
    assert "paraphrases" not in plain_data and 0 < data["paraphrases"] <= len(rows[::2])
    assert more == plain + data["paraphrases"]
