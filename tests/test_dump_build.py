"""`pgmr memory build --from-dump` on synthetic dumps, on a real local Dask cluster with the real encoder: the
memory it writes, its sitelink prior, bad input, a build killed in each stage (SIGKILL) that resumes to the same
memory, and `pgmr ask` with the shipped default generator through a dump-built memory."""

from __future__ import annotations

import bz2
import contextlib
import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pgmr.config import resolve_data_dir
from pgmr.failpoints import FAILPOINT_DIR_ENV, FAILPOINTS_ENV
from pgmr.kg.dump.synthetic import SYNTHETIC_BASE, SyntheticDump, load_real, write_synthetic_dump
from pgmr.memory import Memory, PgmrMemoryError, read_manifest
from pgmr.memory.dump import ClusterSettings, DumpBuildSettings, build_from_dump, work_dir_for

DATA_DIR = resolve_data_dir(None)
SRC = Path(__file__).resolve().parents[1] / "src"
pytestmark = pytest.mark.slow
if not (DATA_DIR / "memory").is_dir():
    pytest.skip("no ../shared/data", allow_module_level=True)

# QALD-10 question 354 and the gold answer the small answer graph returns for it (tests/test_ask_default_model.py).
QUESTION_ID, ANSWER = "354", "Q298761"
SETTINGS = DumpBuildSettings(lines_per_chunk=120, cluster=ClusterSettings(workers=2))


def _question() -> tuple[str, set[str]]:
    from pgmr.datasets import load_named

    record = next(r for r in load_named("qald10-test", DATA_DIR).records if str(r.id) == QUESTION_ID)
    return record.question, set(re.findall(r"\b[QP]\d+\b", record.sparql))


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The gold IDs of one QALD-10 question, 250 other real entities and 150 real properties, and 300 synthetic
    items of which a third are homonyms of the real ones."""
    entities, properties = load_real(DATA_DIR)
    _, gold = _question()
    rng = random.Random(0)
    chosen = [e for e in entities if e.id in gold] + rng.sample(
        [e for e in entities if e.id not in gold], 250
    )
    chosen_props = [p for p in properties if p.id in gold] + rng.sample(
        [p for p in properties if p.id not in gold], 150
    )
    path = tmp_path_factory.mktemp("dump") / "latest-all.json.bz2"
    write_synthetic_dump(path, SyntheticDump(chosen, chosen_props, 300, seed=1, homonym_rate=0.34), workers=2)
    return path


@pytest.fixture(scope="module")
def built(dump: Path, tmp_path_factory: pytest.TempPathFactory, encoder) -> tuple[Path, object]:  # type: ignore[no-untyped-def]
    out = tmp_path_factory.mktemp("built") / "memory"
    _, report = build_from_dump(dump, out, SETTINGS)
    return out, report


def test_the_memory_holds_every_labelled_entity_with_the_dump_s_sitelinks_as_prior(built, encoder) -> None:  # type: ignore[no-untyped-def]
    out, report = built
    memory = Memory.load(out, encoder)
    entities = [x for x in bz2.decompress(_dump_path(report).read_bytes()).splitlines() if x.startswith(b"{")]
    assert report.parse.records == report.parse.lines == len(entities)
    assert len(memory.entities) + len(memory.relations) == len(entities)
    assert report.parse.counts == {"skipped_type": 0, "malformed": 0, "unlabelled": 0}
    assert any(int(i[1:]) > SYNTHETIC_BASE for i in memory.entities.ids())
    assert len(memory.relations) >= 150
    manifest = read_manifest(out)
    assert manifest.prior["source"] == "sitelinks" and memory.prior_source == "sitelinks"
    # Its queries encode in int8 unless the caller names a precision (`pgmr ask` below answers through it).
    assert manifest.query_precision == "int8"
    assert memory.prior_counts and all(
        wid.startswith("Q") and n > 0 for wid, n in memory.prior_counts.items()
    )
    # A homonym shares its real namesake's label: both are found by that label, and the prior tells them apart.
    _, gold = _question()
    real = next(i for i in sorted(gold) if i.startswith("Q") and i in memory.entities.ids())
    label = memory.entities.get(real).label  # type: ignore[union-attr]
    hits = memory.entities.search([label], k=10)[0]
    assert real in [h.id for h in hits]


def test_work_units_are_kept_and_a_second_build_reuses_them(built, tmp_path: Path, dump: Path) -> None:  # type: ignore[no-untyped-def]
    out, report = built
    assert report.parse.chunks == len(list((work_dir_for(out) / "catalog").glob("*.parquet")))
    assert len(list((work_dir_for(out) / "vectors").glob("*.npy"))) == report.parse.chunks
    again_out = tmp_path / "again"
    # A different target is a different work directory: copy the finished units to show they are reused.
    import shutil

    shutil.copytree(work_dir_for(out), work_dir_for(again_out))
    _, again = build_from_dump(dump, again_out, SETTINGS)
    assert (again.parse.parsed_now, again.encode.shards_now) == (0, 0)
    assert _checksums(again_out) == _checksums(out)


def _dump_path(report) -> Path:  # type: ignore[no-untyped-def]
    return Path(json.loads((report.work_dir / "build.json").read_text())["dump"])


def _checksums(path: Path) -> dict[str, str]:
    manifest = read_manifest(path)
    sums = {
        f"{k}.{f}": getattr(d, f)
        for k, d in manifest.dictionaries.items()
        for f in ("rows_sha256", "index_sha256")
    }
    return {**sums, "prior": str(manifest.prior.get("sha256"))}


def test_bad_input_is_counted_and_reported_never_a_crash(dump: Path, tmp_path: Path) -> None:
    raw = bz2.decompress(dump.read_bytes()).splitlines(keepends=True)
    damaged = raw[:40] + [b"{this is not json},\n", b'{"type": "item", "id": "Q77", "labels": {}},\n']
    damaged += [b'{"type": "lexeme", "id": "L3"},\n'] + raw[40:200]
    data = bz2.compress(b"".join(damaged))
    cut = tmp_path / "cut.json.bz2"
    cut.write_bytes(data[: len(data) * 3 // 4])  # a download that stopped early
    out = tmp_path / "memory"
    _, report = build_from_dump(cut, out, SETTINGS)
    assert report.parse.counts["malformed"] >= 1 and report.parse.counts["unlabelled"] == 1
    assert report.parse.counts["skipped_type"] == 1
    assert report.parse.truncated and report.parse.samples["malformed"]
    assert Memory.load(out).manifest.dictionaries["entity"].ids == report.entities > 100


def test_a_dump_with_nothing_usable_is_a_clear_error_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "junk.json"
    path.write_bytes(b"[\nnot an entity,\n" + b'{"type": "lexeme", "id": "L1"}\n]\n')
    with pytest.raises(PgmrMemoryError, match="no entity with a label in en, mul"):
        build_from_dump(path, tmp_path / "memory", SETTINGS)
    assert not (tmp_path / "memory").exists()


def test_a_work_directory_of_another_dump_is_refused_unless_restarted(dump: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.json"
    other.write_bytes(b"[\n" + bz2.decompress(dump.read_bytes()).splitlines(keepends=True)[1] + b"]\n")
    out = tmp_path / "memory"
    build_from_dump(other, out, SETTINGS)
    with pytest.raises(PgmrMemoryError, match="another dump or with other settings.*--restart"):
        build_from_dump(dump, out, DumpBuildSettings(lines_per_chunk=50, cluster=ClusterSettings(workers=1)))


# -- killed builds ---------------------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in (FAILPOINTS_ENV, FAILPOINT_DIR_ENV)}
    return {**env, "PYTHONPATH": str(SRC), "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", **extra}


def _build_args(dump: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "pgmr", "--data-dir", str(DATA_DIR), "memory", "build", "--from-dump", str(dump),
            "-o", str(out), "--workers", "2", "--chunk-lines", "120"]  # fmt: skip


def _kill_at(point: str, args: list[str], cwd: Path) -> None:
    name = point.partition("@")[0]
    markers = cwd / f"markers-{time.monotonic_ns()}"
    env = _env(**{FAILPOINTS_ENV: point, FAILPOINT_DIR_ENV: str(markers)})
    log = cwd / f"{markers.name}.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            args, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
        deadline = time.monotonic() + 240
        try:
            while not (markers / name).exists():
                if process.poll() is not None:
                    pytest.fail(f"exited ({process.returncode}) before {point}:\n{log.read_text()}")
                if time.monotonic() > deadline:
                    pytest.fail(f"did not reach {point}:\n{log.read_text()}")
                time.sleep(0.05)
            os.kill(process.pid, signal.SIGKILL)
            process.wait()
        finally:
            # The cluster's worker processes are the build's too: a killed machine takes them with it.
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
    assert process.returncode == -signal.SIGKILL


def test_a_build_killed_in_each_stage_resumes_to_the_memory_of_an_uninterrupted_one(  # type: ignore[no-untyped-def]
    built, dump: Path, tmp_path: Path
) -> None:
    out = tmp_path / "memory"
    _kill_at("dump.chunk@2", _build_args(dump, out), tmp_path)
    parsed_before = len(list((work_dir_for(out) / "catalog").glob("*.parquet")))
    assert parsed_before >= 2 and not out.exists()
    _kill_at("dump.vectors@2", _build_args(dump, out), tmp_path)
    assert len(list((work_dir_for(out) / "vectors").glob("*.npy"))) >= 2 and not out.exists()
    _kill_at("dump.index_part@2", _build_args(dump, out), tmp_path)
    assert len(list((work_dir_for(out) / "index" / "parts").glob("*.done"))) >= 2 and not out.exists()
    done = subprocess.run(_build_args(dump, out), env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "chunks (parsed now / all)" in done.stdout
    assert _checksums(out) == _checksums(built[0])


def test_a_build_killed_in_index_parts_encoded_on_the_cluster_resumes_to_the_same_memory(  # type: ignore[no-untyped-def]
    dump: Path, tmp_path: Path, encoder
) -> None:
    """ivfpq-rerank parts get their codes from the cluster's workers (pgmr.memory.dump.part_codes): a kill with
    tasks in flight loses only those parts. Built as docs/scale.md serves 10M items: 4-bit codes (encoded in the
    parts, then put in fast-scan lists), sq8 vectors, its own nprobe and rerank."""

    def args(out: Path) -> list[str]:
        options = ["--nbits", "4", "--rerank-vectors", "sq8", "--nprobe", "12", "--rerank", "300"]
        return [*_build_args(dump, out), "--index", "ivfpq-rerank", *options]

    whole = tmp_path / "whole"
    done = subprocess.run(args(whole), env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "memory"
    _kill_at("dump.index_part@2", args(out), tmp_path)
    parts = work_dir_for(out) / "index" / "parts"
    assert len(list(parts.glob("*.done"))) >= 2 and not out.exists()
    assert len(list(parts.glob("*.done"))) < len(list((work_dir_for(out) / "catalog").glob("*.parquet")))
    done = subprocess.run(args(out), env=_env(), capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert _checksums(out) == _checksums(whole)
    index = Memory.load(out, encoder, verify=True).entities.index
    assert {k: index.options()[k] for k in ("nbits", "vectors", "nprobe", "rerank")} == {
        "nbits": 4, "vectors": "sq8", "nprobe": 12, "rerank": 300,
    }  # fmt: skip
    assert type(index._index).__name__ == "IndexIVFPQFastScan"  # type: ignore[attr-defined]


# -- asking through a dump-built memory ------------------------------------------------------------------------


def test_pgmr_ask_answers_through_a_dump_built_memory(built) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from pgmr.cli.main import app

    question, _ = _question()
    result = CliRunner().invoke(
        app, ["--data-dir", str(DATA_DIR), "ask", question, "--memory", str(built[0]), "--json"]
    )
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["status"] == "answered", answer
    assert ANSWER in {a.get("id") for a in answer["answers"]}


def test_a_dump_built_memory_reads_its_rows_and_lexical_tier_ahead(built, encoder) -> None:  # type: ignore[no-untyped-def]
    from pgmr.memory.page_cache import files_to_warm

    memory = Memory.load(built[0], encoder)
    assert memory.warming is not None and memory.warming.wait(timeout=60)
    wanted = files_to_warm(built[0], memory.manifest)
    assert {p.name for p in wanted} >= {"entities.rows.arrow", "relations.rows.arrow"}
    assert any("lexical" in p.parts for p in wanted)
    status = memory.warming.status()
    assert status.done and status.files >= len(wanted) and status.bytes_read > 0
    assert Memory.load(built[0], encoder, warm=False).warming is None


def test_the_on_disk_lexical_tier_answers_as_the_in_memory_one(built, encoder) -> None:  # type: ignore[no-untyped-def]
    from pgmr.resolver.resolver import Resolver, _Lexicon

    memory = Memory.load(built[0], encoder)
    assert set(memory.lexical) == {"entity", "relation"}
    assert (
        Resolver(memory).lexicon("entity") is memory.lexical["entity"]
    )  # what the resolver looks labels up in
    rng = random.Random(5)
    for kind in ("entity", "relation"):
        disk, ram = memory.lexical[kind], _Lexicon(memory.dictionary(kind))  # type: ignore[index]
        keys = rng.sample(ram.choices, 40)
        typos = [k[:2] + ("x" if k[2] != "x" else "y") + k[3:] for k in keys if len(k) > 6]
        for key in [*keys, *typos, "zorblax prime"]:
            assert disk.knows(key) == ram.knows(key)
            assert disk.exact(key, 10) == ram.exact(key, 10)
            found, expected = disk.fuzzy(key, 5, 0.85), ram.fuzzy(key, 5, 0.85)
            assert found[:1] == expected[:1], key
            ids = expected[:3] or ram.exact(key, 3)
            assert disk.similarities(ids, key) == pytest.approx(ram.similarities(ids, key))
        wid = next(iter(ram.by_id))
        assert disk.surfaces_of(wid) == ram.surfaces_of(wid)
