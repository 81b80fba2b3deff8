"""Crash safety under a real SIGKILL (issue #21): `pgmr memory build` and `pgmr train` run as subprocesses,
stop at a named failpoint (`pgmr.failpoints`), and are killed there. Afterwards the previous memory or
checkpoint must load and verify, and a rerun of the same command must complete from it.

Real parts throughout: the bundled encoder, FAISS, the CLI, tiny but real training runs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pgmr.failpoints import FAILPOINT_DIR_ENV, FAILPOINTS_ENV
from pgmr.jsonl import write_jsonl
from pgmr.kg.catalog import LabelCatalog
from pgmr.memory import Memory, MemoryNotFoundError, memory_text
from test_generators_cli import train_rows

SRC = Path(__file__).resolve().parent.parent / "src"
START_TIMEOUT = 240.0  # seconds until a run reaches its failpoint (imports and model loads on a busy CPU)

COUNTRIES = [
    ("Q183", "Germany", "country in Central Europe", "Berlin", "Q64"),
    ("Q142", "France", "country in Western Europe", "Paris", "Q90"),
    ("Q38", "Italy", "country in Southern Europe", "Rome", "Q220"),
    ("Q29", "Spain", "country in southwestern Europe", "Madrid", "Q2807"),
    ("Q36", "Poland", "country in Central Europe", "Warsaw", "Q270"),
    ("Q55", "Netherlands", "country in Northwestern Europe", "Amsterdam", "Q727"),
]
PROPERTIES = [
    {"id": "P1082", "label": "population", "description": "number of people inhabiting the place"},
    {"id": "P36", "label": "capital", "description": "seat of government", "aliases": ["capital city"]},
    {"id": "P31", "label": "instance of", "description": "class of which this is an example"},
]
BASE_ENTITIES = [
    {"id": "Q5", "label": "human", "description": None, "aliases": ["person"]},
    *(
        record
        for qid, name, about, capital, cid in COUNTRIES[:4]
        for record in (
            {"id": qid, "label": name, "description": about, "aliases": []},
            {"id": cid, "label": capital, "description": f"capital of {name}", "aliases": []},
        )
    ),
]
# What the rebuild adds: a memory that answers these is the new one, never the previous one.
NEW_ENTITIES = [
    {"id": qid, "label": name, "description": about, "aliases": []}
    for qid, name, about, _, _ in COUNTRIES[4:]
] + [
    {"id": f"Q{9000 + i}", "label": f"Village {i}", "description": f"village number {i} in Poland"}
    for i in range(12)
]
QUERIES = [memory_text("Germany", "country"), memory_text("Rome", "capital of Italy"), "person"]


def _data_dir(root: Path, entities: list[dict]) -> Path:
    write_jsonl(root / "memory" / "entities.jsonl", entities)
    write_jsonl(root / "memory" / "properties.jsonl", PROPERTIES)
    rows = train_rows([(qid, name) for qid, name, *_ in COUNTRIES])
    write_jsonl(root / "lcquad2" / "train.jsonl", rows)
    return root


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _data_dir(tmp_path_factory.mktemp("data"), [*BASE_ENTITIES, *NEW_ENTITIES])


def _pgmr(*args: str | Path) -> list[str]:
    return [sys.executable, "-m", "pgmr", *map(str, args)]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (FAILPOINTS_ENV, FAILPOINT_DIR_ENV)}
    return {**env, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def _run(args: list[str], cwd: Path) -> str:
    done = subprocess.run(args, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def _kill_at(point: str, args: list[str], cwd: Path) -> None:
    """Run `args` with failpoint `point` armed and SIGKILL it once it pauses there."""
    name = point.partition("@")[0]
    markers = cwd / f"failpoints-{name}-{time.monotonic_ns()}"
    log = cwd / f"{markers.name}.log"
    env = _env(**{FAILPOINTS_ENV: point, FAILPOINT_DIR_ENV: str(markers)})
    with log.open("w") as output:
        process = subprocess.Popen(args, cwd=cwd, env=env, stdout=output, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT
        try:
            while not (markers / name).exists():
                if process.poll() is not None:
                    pytest.fail(f"exited ({process.returncode}) before {point}:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"did not reach {point} in {START_TIMEOUT:.0f} s:\n{log.read_text()}")
                time.sleep(0.02)
            os.kill(process.pid, signal.SIGKILL)
        finally:
            if process.poll() is None:
                process.kill()
            process.wait()
    assert process.returncode == -signal.SIGKILL


# -- pgmr memory build ------------------------------------------------------------------------------------------


def _results(memory: Memory) -> list[list[tuple[str, float]]]:
    return [[(h.id, round(h.score, 5)) for h in hits] for hits in memory.entities.search(QUERIES, k=4)]


def _siblings(target: Path) -> list[str]:
    return sorted(p.name for p in target.parent.iterdir() if p.name.startswith(f".{target.name}."))


def test_memory_build_killed_while_encoding_writing_and_swapping(
    data_dir: Path, tmp_path: Path, encoder
) -> None:  # type: ignore[no-untyped-def]
    target = tmp_path / "mem" / "memory"
    previous = LabelCatalog.from_data_dir(_data_dir(tmp_path / "previous", BASE_ENTITIES))
    Memory.build(previous, target, encoder, use_cache=False)
    before = _results(Memory.load(target, encoder))
    build = _pgmr("--data-dir", data_dir, "memory", "build", "-o", target, "--prior-from", "none")
    build += ["--batch-size", "4"]  # several encoder batches, so that the kill lands between two of them

    def assert_previous(path: Path = target) -> None:
        memory = Memory.load(path, encoder, verify=True)  # every file against its manifest checksum
        assert _results(memory) == before
        assert "Q36" not in memory and "Q9000" not in memory

    _kill_at("memory.encode", build, tmp_path)
    assert_previous()
    assert _siblings(target) == []  # killed before anything of the new memory was written

    _kill_at("memory.write", build, tmp_path)
    assert_previous()
    [partial] = [target.parent / name for name in _siblings(target)]
    assert ".tmp-" in partial.name and (partial / "entities.faiss").is_file()
    with pytest.raises(MemoryNotFoundError):  # no manifest: never taken for a memory
        Memory.load(partial, encoder)

    _kill_at("fsutil.replace_dir", build, tmp_path)
    # The dangerous window: the previous memory was renamed aside and the new one is not in place yet.
    assert not target.exists()
    leftovers = _siblings(target)
    assert any(".old-" in name for name in leftovers)
    assert partial.name not in leftovers  # the killed run removed the dead run's partial copy first
    # A reader puts the previous memory back (on a copy: the rerun below must recover the original itself).
    shutil.copytree(target.parent, tmp_path / "reader" / "mem", symlinks=True)
    assert_previous(tmp_path / "reader" / "mem" / "memory")

    output = _run(build, tmp_path)
    assert "memory written to" in output
    memory = Memory.load(target, encoder, verify=True)
    assert "Q36" in memory and "Q9011" in memory and "Q64" in memory
    assert _siblings(target) == []  # nothing of the killed runs is left beside the memory


# -- pgmr train ---------------------------------------------------------------------------------------------------

TRAIN = ["--mode", "pgmr", "--validation-share", "0.3", "--max-steps", "4", "--eval-steps", "2"]
TRAIN += ["--batch-size", "4", "--warmup-steps", "0", "--max-eval-examples", "4", "--no-progress"]


def test_structured_training_killed_while_writing_a_checkpoint(data_dir: Path, tmp_path: Path) -> None:
    from pgmr.generators.structured.store import load_model
    from pgmr.generators.structured.train import CHECKPOINT

    run = tmp_path / "run"
    train = _pgmr("--data-dir", data_dir, "train", "-o", run, *TRAIN, "--preset", "structured")
    train += ["--encoder-layers", "1", "--max-source-len", "32"]
    # The second checkpoint (step 4), once a part of it is on disk; the one of step 2 is complete.
    _kill_at("train.checkpoint@2", train, tmp_path)
    partial = run / f"{CHECKPOINT}.tmp"
    assert 0 < partial.stat().st_size < (run / CHECKPOINT).stat().st_size
    saved = torch.load(run / CHECKPOINT, map_location="cpu", weights_only=False)
    assert saved["state"]["step"] == 2

    output = _run(train, tmp_path)
    assert "resumed from step" in output
    card = json.loads((run / "model" / "model_card.json").read_text())
    assert card["resumed_from_step"] == 2 and card["steps"] == 4
    assert [h["step"] for h in card["history"]] == [2, 4]
    load_model(run / "model")
    shutil.rmtree(run)  # a quarter of a gigabyte of checkpoints


def test_seq2seq_training_killed_while_writing_a_checkpoint(data_dir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForSeq2SeqLM

    from pgmr.generators.seq2seq.checkpoints import is_complete

    run = tmp_path / "run"
    train = _pgmr("--data-dir", data_dir, "train", "-o", run, *TRAIN, "--preset", "tiny")
    train += ["--vocab-size", "300", "--max-source-len", "48", "--max-target-len", "32"]
    # Inside the Trainer's save of checkpoint-4: its weights are written, its optimizer and state are not.
    _kill_at("train.checkpoint@2", train, tmp_path)
    checkpoints = run / "checkpoints"
    complete, partial = checkpoints / "checkpoint-2", checkpoints / "checkpoint-4"
    assert is_complete(complete) and partial.is_dir() and not is_complete(partial)
    state = json.loads((complete / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    AutoModelForSeq2SeqLM.from_pretrained(complete)

    output = _run(train, tmp_path)
    assert "checkpoint-2" in output  # the table's "resumed from" row
    card = json.loads((run / "model" / "model_card.json").read_text())
    assert card["training"]["resumed_from"] == "checkpoint-2" and card["training"]["global_step"] == 4
    assert all(is_complete(c) for c in checkpoints.glob("checkpoint-*"))
