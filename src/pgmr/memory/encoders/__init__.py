"""Concrete encoders and a loader by name.

Two backends run the same sentence-transformers models: ONNX Runtime (`onnx`, on a CPU: the same float32
vectors, faster) and PyTorch (`torch`: any model, any device, bfloat16). `auto` picks ONNX Runtime where it
can run the model and PyTorch elsewhere; `$PGMR_ENCODER_BACKEND` overrides the choice for every load.
`build_encoder` is the one that encodes a memory's rows: there throughput counts, not one question's latency.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from pgmr.memory.encoder import Encoder
from pgmr.memory.encoders.onnx_export import OnnxExportError, model_layout
from pgmr.memory.encoders.onnx_runtime import OnnxEncoder, onnxruntime_available
from pgmr.memory.encoders.sentence_transformers import (
    DEFAULT_MODEL_NAME,
    SentenceTransformerEncoder,
    resolve_model,
)

__all__ = [
    "DEFAULT_MODEL_NAME",
    "ENCODER_BACKENDS",
    "build_encoder",
    "OnnxEncoder",
    "SentenceTransformerEncoder",
    "check_backend",
    "load_encoder",
    "load_query_encoder",
]

ENCODER_BACKENDS = ("auto", "onnx", "torch")
BACKEND_ENV = "PGMR_ENCODER_BACKEND"
_log = logging.getLogger(__name__)


def check_backend(value: str) -> str:
    if value not in ENCODER_BACKENDS:
        raise ValueError(f"unknown encoder backend {value!r}: expected one of {', '.join(ENCODER_BACKENDS)}")
    return value


def _onnx_can_run(source: str, device: str, precision: str) -> bool:
    # bfloat16 asked for by name is PyTorch's; `auto` is float32 here, as fast as PyTorch's bfloat16 on a CPU.
    return (
        device == "cpu"
        and precision in ("auto", "fp32", "int8")
        and onnxruntime_available()
        and Path(source).is_dir()
        and model_layout(Path(source)) is not None
    )


def load_encoder(
    name: str | None = None, device: str = "cpu", precision: str = "fp32", backend: str | None = None
) -> Encoder:
    """The encoder a name (as recorded in a memory's manifest) stands for; None is the default model.

    Every name is a sentence-transformers model: the bundled all-MiniLM-L6-v2, a local directory or a hub name.
    `precision`: `fp32` unless asked, so that a memory built with it does not depend on the machine; query
    encoding (`Memory.load`) asks for `auto`; `int8` (ONNX Runtime only) quantizes the weights.
    `backend`: one of ENCODER_BACKENDS, default `$PGMR_ENCODER_BACKEND` or `auto`.
    """
    backend = check_backend(backend or os.environ.get(BACKEND_ENV) or "auto")
    display, source = resolve_model(name)
    if backend == "onnx" or (backend == "auto" and _onnx_can_run(source, device, precision)):
        if device != "cpu":
            raise ValueError(f"the ONNX encoder backend runs on the CPU only, not {device!r}")
        try:
            return OnnxEncoder.for_model(Path(source), display, "int8" if precision == "int8" else "fp32")
        except OnnxExportError as exc:
            if backend == "onnx":
                raise
            _log.warning("%s; encoding with PyTorch instead", exc)
    if precision == "int8":
        raise ValueError("int8 encoding needs the ONNX backend (onnxruntime) and a local model directory")
    return SentenceTransformerEncoder(name, device=device, precision=precision)


def build_encoder(name: str | None = None, precision: str = "auto", device: str = "cpu") -> Encoder:
    """The encoder that writes a memory's vectors, in `precision` (pgmr.precision.ENCODER_PRECISIONS).

    `auto` is PyTorch in bfloat16 where `device` computes it natively; elsewhere ONNX Runtime with int8 weights
    where it can run the model, else float32. Each was chosen on LC-QuAD 2.0 validation: a memory built with
    it answers as a float32 one does (bench/memory_precision.py; docs/research-log.md, 2026-12-07). On a CPU
    with AVX512-BF16, bfloat16 encodes 1.5x as many texts a second as ONNX Runtime's float32 (756 against 498)
    and moves a vector by at most 1.2e-4 in cosine; on one without, int8 encodes 1.6x as many as float32 (423
    against 267, bench/memory_precision.py) and moves a stored vector by up to 0.06. `fp32` gives vectors that
    do not depend on the machine (within 1e-7 between backends); the memory's manifest records which was used.
    `$PGMR_ENCODER_BACKEND=onnx` means float32 for `auto`.
    """
    from pgmr.precision import check_encoder_precision, native_bf16

    check_encoder_precision(precision, "build precision")
    if precision == "int8":
        return load_encoder(name, device=device, precision="int8")
    onnx_asked = (os.environ.get(BACKEND_ENV) or "auto") == "onnx"
    if precision == "fp32" or onnx_asked:
        return load_encoder(name, device=device, precision="fp32")
    if precision == "bf16" or native_bf16(device):
        return SentenceTransformerEncoder(name, device=device, precision="bf16")
    try:
        return load_encoder(name, device=device, precision="int8")
    except ValueError:  # no ONNX Runtime, a GPU, or a model it cannot export
        return load_encoder(name, device=device, precision="fp32")


def load_query_encoder(name: str, precision: str, tuned: str = "") -> Encoder:
    """The encoder of a memory's queries: in `precision`, or in the memory's own `tuned` one (its manifest's
    `query_precision`) when `precision` is the default `auto`. A tuned precision this machine cannot run
    (int8 without ONNX Runtime) falls back to `precision` with a warning: the memory still answers."""
    if not tuned or precision != "auto":
        return load_encoder(name, precision=precision)
    try:
        return load_encoder(name, precision=tuned)
    except (ValueError, ImportError, OnnxExportError) as exc:
        _log.warning(
            "the memory asks for %s query encoding, which cannot run here (%s); using %s",
            tuned,
            exc,
            precision,
        )
        return load_encoder(name, precision=precision)
