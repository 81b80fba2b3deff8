"""A sentence-transformers model exported once to ONNX, cached, and checked against the model it came from.

The export needs torch and transformers; using the cached file needs only onnxruntime and tokenizers, so a
process that finds the file does not import torch for its encoder. The file is written beside its final name
and renamed into place only after ONNX Runtime reproduced the PyTorch vectors, so a killed export or a
concurrent one never leaves a half-written or wrong model for the next process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# sentence-transformers modules an exported graph plus pgmr's own pooling reproduce exactly.
_TRANSFORMER = "sentence_transformers.models.Transformer"
_POOLING = "sentence_transformers.models.Pooling"
_NORMALIZE = "sentence_transformers.models.Normalize"
_POOLING_MODES = {"pooling_mode_mean_tokens": "mean", "pooling_mode_cls_token": "cls"}
# Bump when the export itself changes (opset, inputs, quantization), so that old cached files are not reused.
EXPORT_VERSION = 1
OPSET = 17
CHECK_TEXTS = (
    "Hamburg city and state in northern Germany",
    "place of birth",
    "",
    "Kilimanjaro dormant volcano in Tanzania, the highest mountain in Africa",
)
# Largest 1 - cosine allowed between ONNX Runtime's and PyTorch's vectors of CHECK_TEXTS: float32 graphs agree
# to ~1e-7; int8 weights move MiniLM's vectors by up to ~0.02 (bench/encoders.py measures what that costs).
CHECK_TOLERANCE = {"fp32": 1e-4, "int8": 0.05}


class OnnxExportError(RuntimeError):
    """The model cannot be exported, or its export does not reproduce it."""


@dataclass(frozen=True)
class ModelLayout:
    """What pgmr needs to know of a local sentence-transformers directory to run it without PyTorch."""

    path: Path
    pooling: str  # "mean" or "cls"
    max_length: int
    normalize: bool


def model_layout(path: Path) -> ModelLayout | None:
    """The layout of a Transformer + Pooling (+ Normalize) model at `path`; None for anything else (other
    module stacks, no fast tokenizer file), which the PyTorch backend encodes instead."""
    try:
        modules = json.loads((path / "modules.json").read_text())
        types = [m["type"] for m in modules]
        pooling_dir = next(m["path"] for m in modules if m["type"] == _POOLING)
        pooling_config = json.loads((path / pooling_dir / "config.json").read_text())
        st_config = json.loads((path / "sentence_bert_config.json").read_text())
    except (OSError, ValueError, KeyError, StopIteration, TypeError):
        return None
    if types not in ([_TRANSFORMER, _POOLING], [_TRANSFORMER, _POOLING, _NORMALIZE]):
        return None
    if not (path / "tokenizer.json").is_file() or not (path / "config.json").is_file():
        return None
    modes = [mode for key, mode in _POOLING_MODES.items() if pooling_config.get(key)]
    others = [
        k
        for k, v in pooling_config.items()
        if k.startswith("pooling_mode_") and v and k not in _POOLING_MODES
    ]
    if len(modes) != 1 or others:
        return None
    return ModelLayout(path, modes[0], int(st_config.get("max_seq_length") or 512), _NORMALIZE in types)


def cache_root() -> Path:
    """`$PGMR_ONNX_DIR`, else `~/.cache/pgmr/onnx`."""
    env = os.environ.get("PGMR_ONNX_DIR")
    if env:
        return Path(env).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pgmr" / "onnx"


def _fingerprint(layout: ModelLayout) -> str:
    """Changes when the model's files change: configs by content, weights by size and modification time
    (hashing 90 MB of weights on every load would cost more than the encoder saves)."""
    digest = hashlib.sha256(f"v{EXPORT_VERSION}:{layout.path.resolve()}".encode())
    for name in sorted(os.listdir(layout.path)):
        file = layout.path / name
        if not file.is_file():
            continue
        if name.endswith(".json"):
            digest.update(name.encode() + file.read_bytes())
        else:
            stat = file.stat()
            digest.update(f"{name}:{stat.st_size}:{stat.st_mtime_ns}".encode())
    return digest.hexdigest()[:16]


# `encode(model_file, texts)`: unit vectors of `texts` from an ONNX file (the caller's runtime).
EncodeWith = Callable[[Path, list[str]], np.ndarray]


def cached_model(layout: ModelLayout, quantized: bool, encode: EncodeWith, root: Path | None = None) -> Path:
    """The ONNX file for `layout` (exported and checked with `encode` now if it is not cached yet)."""
    folder = (root or cache_root()) / f"{layout.path.name}-{_fingerprint(layout)}"
    target = folder / ("model.int8.onnx" if quantized else "model.onnx")
    if target.is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    if quantized:
        source = cached_model(layout, False, encode, root)
        _write_checked(target, layout, lambda tmp: _quantize(source, tmp), encode, "int8")
    else:
        _write_checked(target, layout, lambda tmp: _export(layout, tmp), encode, "fp32")
    return target


def _write_checked(
    target: Path, layout: ModelLayout, write: Callable[[Path], None], encode: EncodeWith, kind: str
) -> None:
    tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
    try:
        write(tmp)
        worst = _check(tmp, layout, encode)
        if worst > CHECK_TOLERANCE[kind]:
            raise OnnxExportError(
                f"the {kind} ONNX export of {layout.path} does not reproduce the model: 1 - cosine {worst:.2g} "
                f"> {CHECK_TOLERANCE[kind]:g}; use the PyTorch encoder (PGMR_ENCODER_BACKEND=torch)"
            )
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)


def _export(layout: ModelLayout, out: Path) -> None:
    try:
        import torch
        from transformers import AutoModel
    except ImportError as exc:  # pragma: no cover - both are core dependencies
        raise OnnxExportError(f"exporting to ONNX needs torch and transformers: {exc}") from exc

    from transformers.utils import logging as hf_logging

    # Without transformers' weight-loading progress bar: the export runs inside other commands' output.
    was_enabled = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        model = AutoModel.from_pretrained(str(layout.path), local_files_only=True).eval()
    finally:
        if was_enabled:
            hf_logging.enable_progress_bar()

    class _Hidden(torch.nn.Module):
        # The graph returns the last hidden state only; pooling stays in numpy so every layout shares one file.
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            return self.model(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    dummy = torch.ones((2, 8), dtype=torch.long)
    names = ["input_ids", "attention_mask", "token_type_ids"]
    # The tracer's warnings concern shapes it fixes for the dummy batch; the dynamic axes and the check
    # against PyTorch's vectors below are what make the graph right for any batch.
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(
            _Hidden(),
            (dummy, dummy, torch.zeros_like(dummy)),
            str(out),
            input_names=names,
            output_names=["last_hidden_state"],
            dynamic_axes={name: {0: "batch", 1: "tokens"} for name in [*names, "last_hidden_state"]},
            opset_version=OPSET,
            dynamo=False,
        )


def _quantize(source: Path, out: Path) -> None:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    # Per-channel int8 weights of the matrix products only: per-tensor scales or quantized embeddings move
    # MiniLM's vectors ~4x further (largest 1 - cosine 0.045 against 0.011 on seven label texts, 2026-12-07).
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)  # its advice to pre-process the model is logged on the root logger
    try:
        quantize_dynamic(
            source, out, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
    finally:
        root.setLevel(level)


def _check(model_file: Path, layout: ModelLayout, encode: EncodeWith) -> float:
    """Largest 1 - cosine between this file's vectors and sentence-transformers' own, on CHECK_TEXTS."""
    from pgmr.memory.encoders.sentence_transformers import SentenceTransformerEncoder

    reference = SentenceTransformerEncoder(str(layout.path), precision="fp32").encode(list(CHECK_TEXTS))
    candidate = encode(model_file, list(CHECK_TEXTS))
    return float(np.max(1.0 - np.sum(reference * candidate, axis=1)))
