"""The ONNX Runtime encoder: PyTorch's float32 vectors, a cached export that is checked, remade when it no
longer loads, and never used for a model it cannot run."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from pgmr.memory.encoders import OnnxEncoder, SentenceTransformerEncoder, check_backend, load_encoder
from pgmr.memory.encoders.onnx_export import CHECK_TEXTS, model_layout
from pgmr.memory.encoders.sentence_transformers import resolve_model

TEXTS = [
    "Hamburg city and state in northern Germany",
    "place of birth",
    "",
    "Barack Obama 44th president of the United States",
    "word " * 600,  # longer than the model's 256 tokens: truncated as sentence-transformers truncates
]


@pytest.fixture(scope="module")
def onnx_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("onnx-cache")


@pytest.fixture(scope="module")
def onnx_encoder(onnx_cache: Path) -> OnnxEncoder:
    name, source = resolve_model(None)
    return OnnxEncoder.for_model(Path(source), name, cache=onnx_cache)


def test_the_same_vectors_as_pytorch_in_float32(onnx_encoder: OnnxEncoder, encoder) -> None:  # type: ignore[no-untyped-def]
    reference = encoder.encode(TEXTS, batch_size=2)
    vectors = onnx_encoder.encode(TEXTS, batch_size=2)
    assert onnx_encoder.name == encoder.name  # a memory built by either is queried by the other
    np.testing.assert_allclose(vectors, reference, atol=2e-5)


def test_the_export_is_cached_and_reused(onnx_encoder: OnnxEncoder, onnx_cache: Path) -> None:
    [model_file] = list(onnx_cache.glob("*/model.onnx"))
    before = model_file.stat().st_mtime_ns
    name, source = resolve_model(None)
    again = OnnxEncoder.for_model(Path(source), name, cache=onnx_cache)
    assert model_file.stat().st_mtime_ns == before
    assert not [p for p in onnx_cache.rglob(".*tmp*")], "no temporary file is left behind"
    np.testing.assert_array_equal(again.encode(TEXTS[:2]), onnx_encoder.encode(TEXTS[:2]))


def test_a_corrupt_cached_export_is_made_again(
    onnx_encoder: OnnxEncoder, onnx_cache: Path, tmp_path: Path
) -> None:
    name, source = resolve_model(None)
    cache = tmp_path / "cache"
    first = OnnxEncoder.for_model(Path(source), name, cache=cache)
    [model_file] = list(cache.glob("*/model.onnx"))
    model_file.write_bytes(model_file.read_bytes()[:4096])  # as a disk-full copy or a killed writer leaves it
    second = OnnxEncoder.for_model(Path(source), name, cache=cache)
    assert model_file.stat().st_size > 1_000_000
    np.testing.assert_allclose(second.encode(TEXTS[:2]), first.encode(TEXTS[:2]), atol=1e-6)


def test_int8_weights_move_vectors_by_little(onnx_encoder: OnnxEncoder, onnx_cache: Path) -> None:
    name, source = resolve_model(None)
    int8 = OnnxEncoder.for_model(Path(source), name, precision="int8", cache=onnx_cache)
    assert (
        int8.precision == "int8"
        and (onnx_cache / next(onnx_cache.iterdir()).name / "model.int8.onnx").is_file()
    )
    cosines = np.sum(int8.encode(list(CHECK_TEXTS)) * onnx_encoder.encode(list(CHECK_TEXTS)), axis=1)
    assert cosines.min() > 0.95 and cosines.mean() > 0.98


def test_load_encoder_picks_a_backend(monkeypatch: pytest.MonkeyPatch, onnx_cache: Path) -> None:
    monkeypatch.setenv("PGMR_ONNX_DIR", str(onnx_cache))
    assert isinstance(load_encoder(None, precision="auto"), OnnxEncoder)
    assert isinstance(load_encoder(None, precision="bf16"), SentenceTransformerEncoder)
    assert isinstance(load_encoder(None, backend="torch"), SentenceTransformerEncoder)
    monkeypatch.setenv("PGMR_ENCODER_BACKEND", "torch")
    assert isinstance(load_encoder(None), SentenceTransformerEncoder)
    with pytest.raises(ValueError, match="unknown encoder backend 'tensorflow'"):
        check_backend("tensorflow")
    with pytest.raises(ValueError, match="CPU only"):
        load_encoder(None, device="cuda", backend="onnx")


def _model_copy(tmp_path: Path, modules: list[dict[str, str]]) -> Path:
    """The bundled model's files linked into a directory with another module stack."""
    _, source = resolve_model(None)
    copy = tmp_path / "model"
    copy.mkdir()
    for item in Path(source).iterdir():
        os.symlink(item, copy / item.name)
    (copy / "modules.json").unlink()
    (copy / "modules.json").write_text(json.dumps(modules))
    return copy


def test_a_model_onnx_cannot_run_is_left_to_pytorch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGMR_ONNX_DIR", str(tmp_path / "cache"))
    dense = {"idx": 3, "name": "3", "path": "3_Dense", "type": "sentence_transformers.models.Dense"}
    modules = json.loads((Path(resolve_model(None)[1]) / "modules.json").read_text())
    model = _model_copy(tmp_path, [*modules, dense])
    assert model_layout(model) is None
    with pytest.raises(ValueError, match="cannot run it"):
        load_encoder(str(model), backend="onnx")
    # `auto` does not try: the PyTorch encoder then fails on the missing Dense module, not on ONNX.
    with pytest.raises(Exception) as caught:
        load_encoder(str(model))
    assert "onnx" not in str(caught.value).lower()
    assert not (tmp_path / "cache").exists()


def test_int8_needs_the_onnx_backend() -> None:
    with pytest.raises(ValueError, match="int8 encoding needs the ONNX backend"):
        load_encoder(None, precision="int8", backend="torch")


def test_a_memory_tuned_for_int8_queries_loads_that_encoder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, onnx_cache: Path, encoder
) -> None:  # type: ignore[no-untyped-def]
    from typer.testing import CliRunner

    from pgmr.cli.main import app
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory, read_manifest

    monkeypatch.setenv("PGMR_ONNX_DIR", str(onnx_cache))
    catalog = LabelCatalog(
        [
            CatalogEntry("Q1055", "Hamburg", "city and state in northern Germany"),
            CatalogEntry("Q64", "Berlin", "capital of Germany"),
            CatalogEntry("P19", "place of birth", "where a person was born"),
        ]
    )
    path = tmp_path / "m"
    Memory.build(catalog, path, encoder, progress=False, use_cache=False)
    runner = CliRunner()
    result = runner.invoke(app, ["memory", "tune", str(path), "--query-precision", "int8"])
    assert result.exit_code == 0, result.output
    assert "encodes queries in int8" in " ".join(result.output.split())
    assert read_manifest(path).query_precision == "int8"
    tuned = Memory.load(path)
    assert tuned.encoder.precision == "int8"  # type: ignore[attr-defined]
    assert tuned.entities.search(["Hamburg city in Germany"], k=1)[0][0].id == "Q1055"
    # A precision the caller names wins over the memory's; `auto` (the default) takes the memory's.
    assert Memory.load(path, precision="fp32").encoder.precision == "fp32"  # type: ignore[attr-defined]
    # Where int8 cannot run, the memory still loads, with the caller's precision.
    monkeypatch.setenv("PGMR_ENCODER_BACKEND", "torch")
    assert type(Memory.load(path).encoder).__name__ == "SentenceTransformerEncoder"
    monkeypatch.delenv("PGMR_ENCODER_BACKEND")
    result = runner.invoke(app, ["memory", "tune", str(path), "--query-precision", "fp16"])
    assert result.exit_code == 2 and "auto, fp32, bf16, int8" in " ".join(result.output.split())
    assert read_manifest(path).query_precision == "int8"
    result = runner.invoke(app, ["memory", "tune", str(path), "--query-precision", "auto"])
    assert result.exit_code == 0, result.output
    assert read_manifest(path).query_precision == ""
    assert "query_precision" not in json.loads((path / "manifest.json").read_text())
