"""Tensor element types by the names people write: torch's own (`float16`) and the common short ones (`fp16`).

Kernel files declare dtypes by torch name (`DTYPE = "float16"`); `--arg a=4096x8192:fp16` on the command line
takes the short names Triton, PyTorch and vendor libraries use too. One table, so both spellings always agree.
"""
from __future__ import annotations

from .errors import UsageError

# Short name -> torch attribute name. torch's own names are accepted as well (see `torch_dtype`).
ALIASES: dict[str, str] = {
    "fp16": "float16", "f16": "float16", "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32", "f32": "float32", "float": "float32",
    "fp64": "float64", "f64": "float64", "double": "float64",
    "fp8e4m3": "float8_e4m3fn", "fp8e4m3fn": "float8_e4m3fn", "e4m3": "float8_e4m3fn", "fp8": "float8_e4m3fn",
    "fp8e5m2": "float8_e5m2", "e5m2": "float8_e5m2", "bf8": "float8_e5m2",
    "fp8e4m3fnuz": "float8_e4m3fnuz", "fp8e5m2fnuz": "float8_e5m2fnuz",
    "fp8e8m0": "float8_e8m0fnu", "e8m0": "float8_e8m0fnu",
    "fp4x2": "float4_e2m1fn_x2", "e2m1x2": "float4_e2m1fn_x2",
    "i8": "int8", "u8": "uint8", "i16": "int16", "i32": "int32", "int": "int32", "i64": "int64", "long": "int64",
}

# torch names accepted directly: every dtype a GEMM operand or argument plausibly has.
TORCH_NAMES = (
    "float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz",
    "float8_e5m2fnuz", "float8_e8m0fnu", "float4_e2m1fn_x2", "int8", "uint8", "int16", "int32", "int64", "bool",
)


def valid_names() -> list[str]:
    """Every name `canonical_name` accepts, sorted."""
    return sorted({*TORCH_NAMES, *ALIASES})


def canonical_name(name: str) -> str:
    """torch's name for a dtype written as `name` (either spelling); a usage error lists the valid names.

    Needs no torch import, so arguments are checked before any compile starts.
    """
    canonical = ALIASES.get(name.lower(), name)
    if canonical not in TORCH_NAMES:
        raise UsageError(f"unknown dtype {name!r}; valid names: {', '.join(valid_names())}")
    return canonical


def torch_dtype(name: str):
    """The torch dtype named `name` (torch's name or a common short one)."""
    import torch

    canonical = canonical_name(name)
    dtype = getattr(torch, canonical, None)
    if not isinstance(dtype, torch.dtype):
        raise UsageError(f"this torch build ({torch.__version__}) has no dtype {canonical}")
    return dtype
