"""`pgmr train-default`: the shipped default's recipe (pgmr.experiments.recipe, recipe_run).

The plan and the stage runner are checked without training anything; the slow test runs the tiny
configuration end to end on the real data (every stage, as subprocesses of `pgmr`) against a small memory
built from the real catalog, then checks what it made, that a second run skips every stage, and that a
failing stage stops the run with exit 2 naming it.
"""

from __future__ import annotations

import json
import re
import shlex
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.config import resolve_data_dir
from pgmr.experiments.recipe import FULL, TINY, Stage, Step, plan
from pgmr.experiments.recipe_run import (
    RecipeError,
    StageFailed,
    command_line,
    log_file,
    read_record,
    run_stage,
    select,
    stage_file,
)

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]
STAGES = ["seq2seq", "structured", "structured-s7", "ensemble", "verifier", "refusal", "eval"]


def _flat(text: str) -> str:
    return " ".join(text.split())


def test_help_names_the_options() -> None:
    result = runner.invoke(app, ["train-default", "--help"])
    assert result.exit_code == 0, result.output
    text = _flat(result.output)
    for option in ("--out", "--config", "--only", "--memory", "--dry-run"):
        assert option in text


def test_the_full_recipe_runs_the_commands_the_shipped_cards_record(tmp_path: Path) -> None:
    stages = plan(FULL, tmp_path)
    assert [s.name for s in stages] == STAGES

    def train_options(stage: Stage) -> list[str]:
        args = list(stage.steps[0].args)
        out = args.index("-o")
        return [a for a in args[:out] + args[out + 2 :] if a != "--no-progress"]

    def card_options(model: str) -> list[str]:
        card = json.loads((ROOT / "models" / model / "model_card.json").read_text(encoding="utf-8"))
        words = shlex.split(card.get("command") or card["run"]["command"])
        words = words[words.index("train") :]
        out = words.index("-o")
        return words[:out] + words[out + 2 :]

    by_name = {s.name: s for s in stages}
    for stage, model in (
        ("seq2seq", "pgmr-default"),
        ("structured", "pgmr-structured"),
        ("structured-s7", "pgmr-structured-s7"),
    ):
        assert sorted(train_options(by_name[stage])) == sorted(card_options(model)), stage
    # Every member is packed where the shipped ensemble's card expects it, beside the ensemble.
    shipped = json.loads((ROOT / "models/pgmr-ensemble/model_card.json").read_text(encoding="utf-8"))
    ensemble = tmp_path / "models" / "pgmr-ensemble"
    for member in shipped["members"]:
        packed = (ensemble / member["path"]).resolve()
        assert by_name[member["name"]].steps[-1].makes == packed / "model_card.json"
    # No file of scripts/ takes part, and the full run evaluates every test question.
    commands = [a for s in stages for step in s.steps for a in step.args]
    assert not any("scripts/" in a for a in commands) and "--limit" not in commands
    assert "--no-refusal" in by_name["eval"].steps[0].args


def test_tiny_differs_only_in_sizes(tmp_path: Path) -> None:
    full, tiny = plan(FULL, tmp_path), plan(TINY, tmp_path, memory_dir=tmp_path / "m")
    assert [s.name for s in full] == [s.name for s in tiny]
    for a, b in zip(full, tiny, strict=True):
        assert [step.args[:2] for step in a.steps] == [step.args[:2] for step in b.steps]
        assert [step.makes for step in a.steps] == [step.makes for step in b.steps]
    resolving = [
        step for s in tiny for step in s.steps if "--resolve" in step.args or "fit-rerank" in step.args
    ]
    assert resolving and all("--memory" in step.args for step in resolving)


def _card_stage(tmp_path: Path, name: str = "cards") -> Stage:
    """A stage of one cheap real command (no model is loaded): an ensemble card over two fake members."""
    for member in ("a", "b"):
        (tmp_path / member).mkdir(exist_ok=True)
        (tmp_path / member / "model_card.json").write_text('{"mode": "pgmr"}', encoding="utf-8")
    ensemble = tmp_path / "ens"
    args = (
        "ensemble",
        "create",
        str(ensemble),
        "--member",
        f"a={tmp_path / 'a'}",
        "--member",
        f"b={tmp_path / 'b'}",
    )
    return Stage(name, "an ensemble card", (Step(args, ensemble / "model_card.json"),))


def test_a_stage_runs_once_writes_its_record_and_log(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stage = _card_stage(tmp_path)
    record = run_stage(stage, out, data_dir=tmp_path, config="tiny")
    assert stage.steps[0].makes.is_file() and record.steps[0].seconds is not None
    saved = json.loads(stage_file(out, "cards").read_text(encoding="utf-8"))
    assert saved["stage"] == "cards" and saved["seconds"] >= 0 and saved["finished_at"]
    (command,) = saved["commands"]
    assert command == command_line(stage.steps[0], tmp_path)
    assert command.startswith(f"pgmr --data-dir {tmp_path} ensemble create {tmp_path / 'ens'} --member a=")
    assert "wrote" in log_file(out, "cards").read_text(encoding="utf-8")
    assert read_record(out, "cards") == record
    # A step whose output is there is not run again (an interrupted stage resumes after it).
    again = run_stage(stage, out, data_dir=tmp_path, config="tiny")
    assert again.steps[0].seconds is None


def test_a_failing_command_names_its_stage_command_and_log(tmp_path: Path) -> None:
    stage = Stage(
        "broken",
        "nothing",
        (Step(("ensemble", "create", str(tmp_path / "e"), "--member", "a=nowhere"), tmp_path / "x"),),
    )
    with pytest.raises(StageFailed) as caught:
        run_stage(stage, tmp_path / "out", data_dir=tmp_path, config="tiny")
    assert caught.value.stage == "broken" and "ensemble create" in caught.value.command
    assert "exited with 2" in str(caught.value) and caught.value.log == log_file(tmp_path / "out", "broken")
    assert "nowhere" in caught.value.log.read_text(encoding="utf-8")
    assert not stage_file(tmp_path / "out", "broken").exists()


def test_only_checks_names_and_what_earlier_stages_made(tmp_path: Path) -> None:
    stages = plan(TINY, tmp_path)
    with pytest.raises(RecipeError, match="unknown stage 'nope'"):
        select(stages, ["nope"], tmp_path)
    with pytest.raises(RecipeError, match="needs what stage 'verifier' makes"):
        select(stages, ["eval"], tmp_path)
    with pytest.raises(RecipeError, match="stage 'seq2seq'"):
        select(stages, ["ensemble"], tmp_path)
    assert [s.name for s in select(stages, [], tmp_path)] == STAGES


def test_unknown_config_and_stage_exit_2(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train-default", "-o", str(tmp_path), "--config", "huge"])
    assert result.exit_code == 2 and "unknown --config 'huge'" in _flat(result.output)
    result = runner.invoke(app, ["train-default", "-o", str(tmp_path), "--only", "nope"])
    assert result.exit_code == 2 and "unknown stage 'nope'" in _flat(result.output)


def test_dry_run_prints_every_command(tmp_path: Path) -> None:
    result = runner.invoke(app, ["train-default", "-o", str(tmp_path), "--config", "tiny", "--dry-run"])
    assert result.exit_code == 0, result.output
    text = _flat(result.output)
    assert all(f"{name}:" in text for name in STAGES)
    assert "pgmr ensemble fit-rerank" not in text  # as run: with --data-dir before the subcommand
    assert re.search(r"pgmr --data-dir \S+ ensemble fit-rerank", text)
    assert not (tmp_path / "stages").exists()


# -- the tiny recipe end to end, on the real data -------------------------------------------------------------


def _data_dir() -> Path | None:
    try:
        found = resolve_data_dir(None)
    except FileNotFoundError:
        return None
    return found if (found / "lcquad2").is_dir() else None


DATA_DIR = _data_dir()


def _small_memory(encoder: object, directory: Path, data_dir: Path) -> Path:
    """The real catalog's entries for every gold ID of the questions the tiny recipe asks (24 of validation,
    train part and test), with 300 other entities and 200 other properties for the resolver to choose among."""
    import random

    from pgmr.datasets import load_named
    from pgmr.kg.catalog import LabelCatalog
    from pgmr.memory import Memory

    catalog = LabelCatalog.from_data_dir(data_dir)
    gold: set[str] = set()
    for name in ("lcquad2-validation", "lcquad2-train-part", "lcquad2-test"):
        for record in load_named(name, data_dir).records[: TINY.limit]:
            gold.update(re.findall(r"\b[QP]\d+\b", record.sparql))
    ids = catalog.ids()
    rng = random.Random(0)
    keep = gold | set(rng.sample(sorted(i for i in ids if i.startswith("Q")), 300))
    keep |= set(rng.sample(sorted(i for i in ids if i.startswith("P")), 200))
    memory_ids = keep & ids
    Memory.build(catalog, directory, encoder, ids=memory_ids, progress=False, use_cache=False)  # type: ignore[arg-type]
    return directory


@pytest.fixture(scope="module")
def tiny_run(encoder, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    if DATA_DIR is None:
        pytest.skip("no ../shared/data")
    root = tmp_path_factory.mktemp("train-default")
    memory = _small_memory(encoder, root / "memory", DATA_DIR)
    out = root / "out"
    args = [
        "--data-dir",
        str(DATA_DIR),
        "train-default",
        "-o",
        str(out),
        "--config",
        "tiny",
        "--memory",
        str(memory),
    ]
    started = time.monotonic()
    result = runner.invoke(app, args)
    seconds = time.monotonic() - started
    assert result.exit_code == 0, result.output
    return out, memory, args, result.output, seconds


@pytest.mark.slow
def test_the_tiny_recipe_builds_an_ensemble_that_answers(tiny_run) -> None:  # type: ignore[no-untyped-def]
    from pgmr.generators.ensemble import EnsembleGenerator
    from pgmr.generators.trained import load_trained
    from pgmr.pipeline import Pipeline, PipelineConfig

    out, memory, _, output, seconds = tiny_run
    print(f"tiny train-default: {seconds:.0f} s")
    for name in STAGES:
        record = json.loads(stage_file(out, name).read_text(encoding="utf-8"))
        assert record["stage"] == name and record["seconds"] > 0 and record["commands"], name
        assert log_file(out, name).is_file()
    ensemble = out / "models" / "pgmr-ensemble"
    card = json.loads((ensemble / "model_card.json").read_text(encoding="utf-8"))
    assert [(m["name"], m["path"]) for m in card["members"]] == [
        ("seq2seq", "../pgmr-default"),
        ("structured", "../pgmr-structured"),
        ("structured-s7", "../pgmr-structured-s7"),
    ]
    assert (ensemble / "verifier" / "model_card.json").is_file() and (ensemble / "reranker.json").is_file()
    generator = load_trained(ensemble)
    assert isinstance(generator, EnsembleGenerator) and generator.verifier is not None
    pipeline = Pipeline.load(
        PipelineConfig(
            model_dir=ensemble, memory_dir=memory, data_dir=DATA_DIR, store=None, verify_memory=False
        )
    )
    try:
        result = pipeline.ask("What is the capital of Germany?")
    finally:
        pipeline.close()
    # No store: a resolved query (or a refusal, or a draft that does not parse), never an error.
    assert result.status in ("resolved", "refused", "invalid"), result
    assert [d.source for d in result.drafts] == ["seq2seq", "structured", "structured-s7"]
    # The refusal stage's choice is in OUT, reported; the package's calibration is untouched.
    calibration = json.loads((out / "calibration.json").read_text(encoding="utf-8"))
    assert 0.0 <= calibration["threshold"] <= 1.0 and (out / "names.json").is_file()
    assert calibration["provenance"]["threshold_chosen_on"]["dataset"] == "lcquad2-validation"
    text = _flat(output)
    assert f"refusal threshold chosen on validation: {calibration['threshold']}" in text
    # It ends with the stage times and the evaluation table of docs/results.md.
    assert "stage times" in text and "total" in text
    assert "| system | n | Query EM |" in text and "| pgmr (this run) | 24 |" in text


@pytest.mark.slow
def test_a_second_run_skips_every_stage(tiny_run) -> None:  # type: ignore[no-untyped-def]
    out, _, args, _, _ = tiny_run
    before = {name: stage_file(out, name).read_text(encoding="utf-8") for name in STAGES}
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = _flat(result.output)
    assert text.count("skipped, done") == len(STAGES) and "running" not in text
    assert {name: stage_file(out, name).read_text(encoding="utf-8") for name in STAGES} == before


@pytest.mark.slow
def test_a_failing_stage_exits_2_naming_it(tiny_run) -> None:  # type: ignore[no-untyped-def]
    """The eval stage run again on an ensemble whose reranker file was broken."""
    out, _, args, _, _ = tiny_run
    stage_file(out, "eval").unlink()
    (out / "eval" / "metrics.json").unlink()
    (out / "models" / "pgmr-ensemble" / "reranker.json").write_text("{", encoding="utf-8")
    result = runner.invoke(app, [*args, "--only", "eval"])
    text = _flat(result.output)
    assert result.exit_code == 2, result.output
    assert "stage 'eval' failed" in text and "experiment lcquad2-original" in text
    assert str(log_file(out, "eval")) in text and not stage_file(out, "eval").exists()
