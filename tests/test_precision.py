"""Inference precision (pgmr.precision): the choice of number format, the shipped models and the real encoder
in bfloat16 against float32, and the setting checked at every edge that takes it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from pgmr.cli.main import app
from pgmr.precision import PRECISIONS, check_precision, inference_dtype, native_bf16, precision_name

QUESTIONS = [
    "What is the capital of Germany?",
    "Who is the author of The Hellbound Heart?",
    "When was Albert Einstein born?",
    "What is the population of Hamburg?",
    "Which river flows through Paris?",
    "Who directed the film Alien?",
    "What is the ISNI of Douglas Adams?",
    "How many children did Johann Sebastian Bach have?",
]


def test_precision_names_are_checked() -> None:
    for name in PRECISIONS:
        assert check_precision(name) == name
    with pytest.raises(ValueError, match="expected one of auto, fp32, bf16"):
        check_precision("fp16")


def test_auto_is_bfloat16_exactly_where_the_cpu_has_it() -> None:
    assert inference_dtype("fp32") == torch.float32
    assert inference_dtype("bf16") == torch.bfloat16
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.is_file():  # what the kernel reports, independently of torch
        flags = cpuinfo.read_text(encoding="utf-8", errors="replace")
        assert native_bf16("cpu") == ("avx512_bf16" in flags or "amx_bf16" in flags)
    assert inference_dtype("auto") == (torch.bfloat16 if native_bf16("cpu") else torch.float32)
    assert precision_name(inference_dtype("bf16")) == "bf16"
    assert precision_name(inference_dtype("fp32")) == "fp32"
    assert not native_bf16("meta")


@pytest.mark.slow
def test_the_shipped_ensemble_writes_the_same_drafts_in_bfloat16() -> None:
    """bfloat16 weights change a draft rarely (LC-QuAD 2.0 validation: 1,195 of 1,226 final queries the same,
    Query EM equal); a model that came out garbled would fail here."""
    from pgmr.generators import default_model_dir
    from pgmr.generators.ensemble import generate_drafts
    from pgmr.generators.trained import load_trained
    from pgmr.query import parse

    model_dir = default_model_dir()
    drafts = {}
    for precision in ("fp32", "bf16"):
        generator = load_trained(model_dir, precision=precision)
        for _, member in generator.members:  # type: ignore[attr-defined]
            dtypes = {p.dtype for p in member.model.parameters()}
            assert dtypes == {torch.float32 if precision == "fp32" else torch.bfloat16}
        drafts[precision] = generate_drafts(generator, QUESTIONS, batch_size=4)
    same = 0
    for fp32, bf16 in zip(drafts["fp32"], drafts["bf16"], strict=True):
        for a, b in zip(fp32, bf16, strict=True):
            parse(b.text)
            same += a.text == b.text
            for key in a.confidence:  # the structured member's probabilities: float32 softmax in both
                assert abs(a.confidence[key] - b.confidence[key]) < 0.1
    assert same >= 0.75 * 2 * len(QUESTIONS)


def test_the_encoder_in_bfloat16_moves_vectors_by_little(encoder) -> None:  # type: ignore[no-untyped-def]
    from pgmr.memory.encoders import load_encoder

    assert encoder.precision == "fp32"  # what memories are built with, on any machine
    bf16 = load_encoder(None, precision="bf16")
    assert bf16.precision == "bf16" and "bf16" in repr(bf16)
    texts = ["Hamburg", "city and state in northern Germany", "place of birth", "Kilimanjaro"]
    a, b = encoder.encode(texts), bf16.encode(texts)
    assert b.dtype == np.float32 and b.shape == a.shape
    np.testing.assert_allclose(np.linalg.norm(b, axis=1), 1.0, atol=1e-5)
    assert np.min(np.sum(a * b, axis=1)) > 0.999


def test_memory_load_encodes_queries_in_the_precision_asked(tmp_path, encoder) -> None:  # type: ignore[no-untyped-def]
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory

    catalog = LabelCatalog(
        [
            CatalogEntry("Q1055", "Hamburg", "city and state in northern Germany"),
            CatalogEntry("Q64", "Berlin", "capital of Germany"),
            CatalogEntry("P19", "place of birth", "where a person was born"),
        ]
    )
    Memory.build(catalog, tmp_path / "m", encoder, progress=False, use_cache=False)
    # On a CPU, ONNX Runtime encodes in float32 as fast as PyTorch in bfloat16: `auto` and `fp32` take it;
    # bfloat16 asked for by name is PyTorch's.
    for precision, expected, backend in (
        ("fp32", "fp32", "OnnxEncoder"),
        ("bf16", "bf16", "SentenceTransformerEncoder"),
        ("auto", "fp32", "OnnxEncoder"),
    ):
        memory = Memory.load(tmp_path / "m", precision=precision)
        assert memory.encoder.precision == expected  # type: ignore[attr-defined]
        assert type(memory.encoder).__name__ == backend
        hits = memory.entities.search(["Hamburg city in Germany"], k=1)[0]
        assert hits[0].id == "Q1055"


def test_building_takes_each_precision_and_the_manifest_says_which(tmp_path: Path) -> None:
    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory, build_encoder, read_manifest

    catalog = LabelCatalog(
        [
            CatalogEntry("Q1055", "Hamburg", "city and state in northern Germany"),
            CatalogEntry("Q64", "Berlin", "capital of Germany"),
            CatalogEntry("P19", "place of birth", "where a person was born"),
        ]
    )
    auto = build_encoder(None)
    # Without native bfloat16 the ONNX int8 encoder (the tests install ONNX Runtime).
    assert auto.precision == ("bf16" if native_bf16("cpu") else "int8")  # type: ignore[attr-defined]
    cache = tmp_path / "cache"
    built = {}
    for precision in ("fp32", "bf16", "int8"):
        out = tmp_path / precision
        memory = Memory.build(catalog, out, build_encoder(None, precision), progress=False, cache_dir=cache)
        stats = memory.build_stats
        assert stats is not None
        # One cache directory for all: no precision's vectors are ever taken for another's build.
        assert stats.encoded == stats.texts and stats.cached == 0
        assert read_manifest(out).precision == precision
        built[precision] = Memory.load(out, precision="fp32")
        assert built[precision].entities.search(["Hamburg city in Germany"], k=1)[0][0].id == "Q1055"
    rebuilt = Memory.build(
        catalog, tmp_path / "again", build_encoder(None, "bf16"), progress=False, cache_dir=cache
    )
    assert rebuilt.build_stats is not None and rebuilt.build_stats.encoded == 0
    with pytest.raises(ValueError, match="auto, fp32, bf16, int8"):
        build_encoder(None, "fp16")


def test_a_manifest_from_before_the_precision_field_reads_as_float32(tmp_path: Path, encoder) -> None:  # type: ignore[no-untyped-def]
    import json

    from pgmr.kg.catalog import CatalogEntry, LabelCatalog
    from pgmr.memory import Memory, read_manifest

    catalog = LabelCatalog(
        [CatalogEntry("Q64", "Berlin", "capital of Germany"), CatalogEntry("P19", "place of birth", "")]
    )
    Memory.build(catalog, tmp_path / "m", encoder, progress=False, use_cache=False)
    path = tmp_path / "m" / "manifest.json"
    data = json.loads(path.read_text())
    del data["precision"]
    path.write_text(json.dumps(data))
    assert read_manifest(tmp_path / "m").precision == "fp32"


def test_memory_build_takes_a_precision_and_refuses_an_unknown_one(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["memory", "build", "-o", str(tmp_path / "m"), "--precision", "fp16"])
    assert result.exit_code == 2, result.output
    assert "auto, fp32, bf16, int8" in result.output
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize(
    "command",
    [
        ["ask", "Who wrote Hamlet?", "--store", "none", "--precision", "fp16"],
        ["serve", "--port", "58731", "--precision", "fp16"],
        ["generate", "models/pgmr-ensemble", "lcquad2-test", "-o", "x.jsonl", "--precision", "fp16"],
        ["demo", "--precision", "fp16"],
        ["experiment", "lcquad2-original", "--limit", "1", "--precision", "fp16"],
    ],
)
def test_an_unknown_precision_is_a_usage_error_before_anything_loads(
    command: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(Path(__file__).parents[1])  # models/pgmr-ensemble; nothing is written (x.jsonl)
    result = CliRunner().invoke(app, command)
    assert not Path("x.jsonl").exists()
    assert result.exit_code == 2, result.output
    assert "fp16" in result.output and "auto, fp32, bf16" in result.output
