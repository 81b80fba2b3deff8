"""Compact model directories: weights stored as int8 with one scale per row, restored to float32 on load.

The default generator is committed to the repository, which caps it at 50 MB; the warm-started model is
~31M parameters (124 MB as float32). Symmetric per-row int8 (`w ~= q * scale`, `scale = max|row| / 127`)
stores it in a quarter of that. Only 2-D weights are quantized; biases, LayerNorms and other small tensors stay
float32. `bench/generation_speed.py` and the validation figures in the model card are measured on the
restored model, so what ships is what was measured (the card records both).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForSeq2SeqLM, GenerationConfig, PreTrainedModel

from pgmr.fsutil import replace_dir

PACKED_WEIGHTS = "model.int8.safetensors"
PACKING_FILE = "packing.json"
PACKING_FORMAT = "pgmr-int8-rows/1"
_SCALE = ".__scale__"
# Files of a model dir that are copied as they are (tokenizers, card, configs).
_SKIP = {"model.safetensors", "pytorch_model.bin", "training_args.bin"}


class PackingError(ValueError):
    """A packed model directory that is incomplete or does not match its config."""


def quantize(tensor: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """int8 rows and their float32 scales (a zero row gets scale 1 so that it restores to zeros)."""
    weight = tensor.detach().float()
    scale = weight.abs().amax(dim=1, keepdim=True) / 127.0
    scale = torch.where(scale > 0, scale, torch.ones_like(scale))
    return torch.round(weight / scale).clamp(-127, 127).to(torch.int8), scale.squeeze(1)


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale.unsqueeze(1)


def pack_model_dir(model_dir: Path | str, out_dir: Path | str, *, min_rows: int = 64) -> dict[str, Any]:
    """Write a packed copy of `model_dir` (a saved seq2seq model dir) to `out_dir`, atomically."""
    model_dir, out_dir = Path(model_dir), Path(out_dir)
    model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
    state = model.state_dict()
    tensors: dict[str, torch.Tensor] = {}
    seen: dict[int, str] = {}
    aliases: dict[str, str] = {}
    quantized = kept = 0
    for name, tensor in state.items():
        key = tensor.data_ptr()
        if key in seen and state[seen[key]].shape == tensor.shape:
            aliases[name] = seen[key]  # tied weights are stored once
            continue
        seen[key] = name
        if tensor.dim() == 2 and tensor.shape[0] >= min_rows and tensor.is_floating_point():
            q, scale = quantize(tensor)
            tensors[name] = q.contiguous()
            tensors[name + _SCALE] = scale.contiguous()
            quantized += tensor.numel()
        else:
            tensors[name] = tensor.detach().float().contiguous()
            kept += tensor.numel()
    tmp = out_dir.parent / f".{out_dir.name}.partial"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in model_dir.iterdir():
        if item.name in _SKIP:
            continue
        if item.is_dir():
            shutil.copytree(item, tmp / item.name)
        else:
            shutil.copy2(item, tmp / item.name)
    save_file(tensors, str(tmp / PACKED_WEIGHTS))
    info = {
        "format": PACKING_FORMAT,
        "weights": PACKED_WEIGHTS,
        "aliases": aliases,
        "quantized_parameters": quantized,
        "float_parameters": kept,
        "bytes": (tmp / PACKED_WEIGHTS).stat().st_size,
    }
    (tmp / PACKING_FILE).write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    replace_dir(tmp, out_dir)
    return info


def is_packed(model_dir: Path | str) -> bool:
    return (Path(model_dir) / PACKING_FILE).is_file()


def load_packed(model_dir: Path | str) -> PreTrainedModel:
    """The float32 model restored from a packed dir."""
    model_dir = Path(model_dir)
    try:
        info = json.loads((model_dir / PACKING_FILE).read_text(encoding="utf-8"))
        if info.get("format") != PACKING_FORMAT:
            raise PackingError(f"{model_dir / PACKING_FILE}: unknown format {info.get('format')!r}")
        stored = load_file(str(model_dir / info["weights"]))
    except (OSError, json.JSONDecodeError, KeyError) as exc:
        raise PackingError(f"cannot read the packed model in {model_dir}: {exc}") from None
    config = AutoConfig.from_pretrained(model_dir)
    model = AutoModelForSeq2SeqLM.from_config(config)
    if (model_dir / "generation_config.json").is_file():
        model.generation_config = GenerationConfig.from_pretrained(model_dir)
    state: dict[str, torch.Tensor] = {}
    for name, tensor in stored.items():
        if name.endswith(_SCALE):
            continue
        scale = stored.get(name + _SCALE)
        state[name] = dequantize(tensor, scale) if scale is not None else tensor
    for name, target in info.get("aliases", {}).items():
        if target not in state:
            raise PackingError(f"{model_dir}: tied weight {name} points at missing {target}")
        state[name] = state[target]
    expected = set(model.state_dict())
    missing, unexpected = expected - set(state), set(state) - expected
    if missing or unexpected:
        raise PackingError(
            f"{model_dir}: weights do not match the config (missing {sorted(missing)[:3]}, "
            f"unexpected {sorted(unexpected)[:3]})"
        )
    model.load_state_dict(state, strict=True)
    model.tie_weights()
    return model.eval()
