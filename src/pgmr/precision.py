"""The number format models run inference in: `auto` (the default), `fp32` or `bf16`.

`auto` is bfloat16 where the hardware computes it natively (a CPU with AVX512-BF16 or AMX, a CUDA GPU that
supports it) and float32 elsewhere: on a CPU without those instructions bfloat16 is emulated and slower than
float32. Measured on LC-QuAD 2.0 validation (docs/research-log.md, "2026-12-03 — Inference precision:
bfloat16"): bfloat16 weights make the default generator and the memory's query encoder 1.2-2.3x faster, with
the same Query EM. Training has its own switch (`pgmr train --bf16`, mixed precision). Building a memory takes
`auto` too since 2026-12-07 (pgmr.memory.encoders.build_encoder: bfloat16 where it is native, else int8 weights
in ONNX Runtime; 1.5x and 1.6x faster, the same validation Query EM); `pgmr memory build --precision fp32` gives
stored vectors that do not depend on the machine that built them.

Imports torch lazily: `pgmr.config` and the CLI's option parsing use `check_precision` without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

PRECISIONS = ("auto", "fp32", "bf16")
DEFAULT_PRECISION = "auto"


def check_precision(value: str) -> str:
    """`value` if it is a precision name; else ValueError naming the choices (settings validate at the edge)."""
    if value not in PRECISIONS:
        raise ValueError(f"unknown precision {value!r}: expected one of {', '.join(PRECISIONS)}")
    return value


# The sentence encoder also runs with int8 weights (ONNX Runtime): for a memory's rows
# (pgmr.memory.encoders.build_encoder) and for its queries (the manifest's `query_precision`).
ENCODER_PRECISIONS = (*PRECISIONS, "int8")


def check_encoder_precision(value: str, what: str = "encoder precision") -> str:
    """`value` if the encoder runs in it (ENCODER_PRECISIONS); else ValueError naming `what` and the choices."""
    if value not in ENCODER_PRECISIONS:
        raise ValueError(f"unknown {what} {value!r}: expected one of {', '.join(ENCODER_PRECISIONS)}")
    return value


def native_bf16(device: Any = "cpu") -> bool:
    """Whether `device` computes bfloat16 natively (so that it is faster there, not emulated)."""
    import torch

    device = torch.device(device)
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    cpu = torch.cpu
    avx512_bf16 = getattr(cpu, "_is_avx512_bf16_supported", None)
    amx = getattr(cpu, "_is_amx_tile_supported", None)
    return bool((avx512_bf16 is not None and avx512_bf16()) or (amx is not None and amx()))


def inference_dtype(precision: str, device: Any = "cpu") -> torch.dtype:
    """The dtype a model's weights take for inference under `precision` on `device`."""
    import torch

    check_precision(precision)
    if precision == "bf16" or (precision == "auto" and native_bf16(device)):
        return torch.bfloat16
    return torch.float32


def precision_name(dtype: Any) -> str:
    """`bf16` or `fp32`, for cards, reports and logs."""
    import torch

    return "bf16" if dtype == torch.bfloat16 else "fp32"
