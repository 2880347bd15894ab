"""Low-precision operand formats, their exact dequantization, and an fp32 reference GEMM.

Formats (OCP Microscaling spec v1.0; gfx950 MFMA f8f6f4 operand formats):

- e2m1 (fp4): 1 sign, 2 exponent (bias 1), 1 mantissa bit. Sixteen codes, values
  0, 0.5, 1, 1.5, 2, 3, 4, 6 and their negatives; no inf or NaN.
- Packing: two e2m1 codes per byte, the *even* element (k = 2i) in the low nibble (bits 0-3) and the odd
  element (k = 2i + 1) in the high nibble. This is the order the gfx950 MFMA reads fp4 operands in (element 0
  in the least significant bits of the source register), the order of Triton's `tl.dot_scaled` /
  `gl.amd.cdna4.mfma_scaled` e2m1 operands, and of torch's `float4_e2m1fn_x2`.
- e8m0 (shared scale): an unsigned 8-bit biased exponent, value 2^(x - 127); 0xFF is NaN, there is no zero.
  MXFP4 applies one e8m0 scale to each 32 consecutive elements along K ("e8m0_k32").
- e5m2 / e4m3 (fp8): torch's `float8_e5m2` and `float8_e4m3fn` (the OCP "fn" variant gfx950 uses).

`dequantize_operand` gives every operand exactly in fp32 (all these formats, times a power-of-two scale, are
exact in fp32 barring sub-2^-126 underflow). The runtime's correctness check multiplies those in float64
(`evaluator.runtime.correctness.reference`); `reference_gemm` multiplies them in fp32, so its only error is
fp32 accumulation.
Tolerances per operand and output format live with the correctness check that applies them
(`evaluator.runtime.correctness.ACCUMULATION_TOLERANCE` / `OUTPUT_ROUNDING_TOLERANCE`).
"""
from __future__ import annotations

from typing import Any

import torch

from .compile import torch_dtype

MX_BLOCK = 32  # elements along K sharing one e8m0 scale
E8M0_BIAS = 127
E8M0_NAN = 0xFF

# Index = 4-bit code: bit 3 sign, bits 2-1 exponent, bit 0 mantissa.
E2M1_VALUES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0,
                                  -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
E2M1_MAX = 6.0
# Midpoints between consecutive e2m1 magnitudes, and whether a tie rounds up (to the even code above).
_E2M1_MIDPOINTS = ((0.25, False), (0.75, True), (1.25, False), (1.75, True), (2.5, False), (3.5, True), (5.0, False))

FP8_DTYPE_NAMES = ("float8_e5m2", "float8_e4m3fn")
PLAIN_DTYPE_NAMES = ("float16", "bfloat16", *FP8_DTYPE_NAMES)  # operand formats stored as themselves, without packing


# ---------------------------------------------------------------------------------------------
# e2m1


def e2m1_decode(codes: torch.Tensor) -> torch.Tensor:
    """fp32 values of 4-bit e2m1 codes (any integer tensor with values 0..15)."""
    table = torch.tensor(E2M1_VALUES, dtype=torch.float32, device=codes.device)
    return table[codes.long() & 0xF]


def e2m1_encode(x: torch.Tensor) -> torch.Tensor:
    """Nearest e2m1 code (uint8, 0..15) of each value; saturates at +-6, ties go to the even mantissa."""
    mag = x.abs().float().clamp(max=E2M1_MAX)
    # The code of a magnitude is the number of midpoints it lies above. A tie rounds toward the neighbour
    # with an even code (mantissa bit 0), so some midpoints count when reached, others only when passed.
    code = torch.zeros_like(mag, dtype=torch.int64)
    for midpoint, tie_rounds_up in _E2M1_MIDPOINTS:
        code += (mag >= midpoint if tie_rounds_up else mag > midpoint).long()
    sign = torch.signbit(x.float())
    return (code | (sign.long() << 3)).to(torch.uint8)


def pack_e2m1(codes: torch.Tensor) -> torch.Tensor:
    """Pack 4-bit codes two per byte along the last dimension: even element in the low nibble."""
    if codes.shape[-1] % 2:
        raise ValueError(f"last dimension must be even to pack e2m1 pairs, got {codes.shape[-1]}")
    codes = codes.to(torch.uint8) & 0xF
    return codes[..., 0::2] | (codes[..., 1::2] << 4)


def unpack_e2m1(packed: torch.Tensor) -> torch.Tensor:
    """Inverse of `pack_e2m1`: uint8 [..., K/2] -> codes uint8 [..., K]."""
    packed = packed.to(torch.uint8)
    low, high = packed & 0xF, packed >> 4
    return torch.stack((low, high), dim=-1).flatten(-2)


# ---------------------------------------------------------------------------------------------
# e8m0


def e8m0_decode(x: torch.Tensor) -> torch.Tensor:
    """fp32 value 2^(x - 127) of each e8m0 byte; 0xFF decodes to NaN.

    Built from the fp32 bit pattern so it is exact for every code, including x = 0 (2^-127, a subnormal).
    """
    e = x.to(torch.int32)
    bits = torch.where(e == 0, torch.full_like(e, 0x00400000), e << 23)
    bits = torch.where(e == E8M0_NAN, torch.full_like(e, 0x7FC00000), bits)
    return bits.view(torch.float32)


def e8m0_encode_exponent(exponent: torch.Tensor) -> torch.Tensor:
    """e8m0 byte of the scale 2^exponent (integer exponents clamped to the finite range -127..127)."""
    return (exponent.to(torch.int32).clamp(-E8M0_BIAS, E8M0_BIAS) + E8M0_BIAS).to(torch.uint8)


# ---------------------------------------------------------------------------------------------
# MXFP4


def dequantize_mxfp4(packed: torch.Tensor, scales: torch.Tensor) -> torch.Tensor:
    """fp32 [R, K] from e2m1 values packed [R, K/2] and e8m0 scales [R, K/32] (one per 32 along K)."""
    rows, half_k = packed.shape
    k = half_k * 2
    if k % MX_BLOCK or tuple(scales.shape) != (rows, k // MX_BLOCK):
        raise ValueError(f"scales must be [{rows}, {k // MX_BLOCK}] for packed [{rows}, {half_k}], "
                         f"got {list(scales.shape)}")
    values = e2m1_decode(unpack_e2m1(packed)).view(rows, k // MX_BLOCK, MX_BLOCK)
    return (values * e8m0_decode(scales).unsqueeze(-1)).view(rows, k)


def quantize_mxfp4(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Quantize fp32 [R, K] to (packed e2m1 [R, K/2], e8m0 scales [R, K/32]).

    Each block's scale is the power of two that brings its largest magnitude to at most 6 (the e2m1
    maximum); elements round to the nearest e2m1 value. Used to make realistic test and benchmark inputs.
    """
    rows, k = x.shape
    blocks = x.float().view(rows, k // MX_BLOCK, MX_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    exponent = torch.where(amax > 0, torch.ceil(torch.log2(amax / E2M1_MAX)), torch.zeros_like(amax))
    scales = e8m0_encode_exponent(exponent)
    codes = e2m1_encode(blocks / e8m0_decode(scales).unsqueeze(-1))
    return pack_e2m1(codes.view(rows, k)), scales


# ---------------------------------------------------------------------------------------------
# fp8


def to_fp8(x: torch.Tensor, dtype_name: str) -> torch.Tensor:
    """Round to an fp8 dtype, saturating at its largest finite value instead of overflowing to inf/NaN."""
    if dtype_name not in FP8_DTYPE_NAMES:
        raise ValueError(f"{dtype_name!r} is not an fp8 dtype ({', '.join(FP8_DTYPE_NAMES)})")
    dtype = torch_dtype(dtype_name)
    limit = torch.finfo(dtype).max
    return x.float().clamp(-limit, limit).to(dtype)


# ---------------------------------------------------------------------------------------------
# Reference GEMM


def _spec_field(spec: Any, name: str):
    return spec[name] if isinstance(spec, dict) else getattr(spec, name)


def dequantize_operand(x: torch.Tensor, dtype: str, scales: str | None, scale: torch.Tensor | None) -> torch.Tensor:
    """One GEMM operand (rows x K) as exact fp32, whatever its storage format."""
    if scales == "e8m0_k32":
        if scale is None:
            raise ValueError("e8m0_k32 operands need their scale tensor")
        return dequantize_mxfp4(x, scale)
    if dtype not in PLAIN_DTYPE_NAMES:
        raise ValueError(f"unsupported operand dtype {dtype!r} without e8m0_k32 scales")
    if x.dtype != torch_dtype(dtype):
        raise ValueError(f"operand is {x.dtype}, the kernel declares {dtype}")
    value = x.to(torch.float32)
    if scales == "per_tensor":
        if scale is None or scale.numel() != 1:
            raise ValueError("per_tensor operands need a one-element fp32 scale")
        value = value * scale.to(torch.float32).reshape(())
    elif scales is not None:
        raise ValueError(f"unknown SCALES {scales!r}")
    return value


def reference_gemm(a: torch.Tensor, b: torch.Tensor, spec: Any,
                   a_scale: torch.Tensor | None = None, b_scale: torch.Tensor | None = None) -> torch.Tensor:
    """C = A @ B^T in fp32 from the kernel's operands (B is N x K); `spec` gives `dtype` and `scales`.

    `spec` is a `KernelSpec` or a dict with those keys. DTYPE float16 / bfloat16 / float8_e5m2 /
    float8_e4m3fn with SCALES None or "per_tensor", or SCALES "e8m0_k32" (DTYPE "float4_e2m1", operands
    packed uint8). The product runs in fp32 on the operands' device (TF32 must be off, torch's default).
    """
    dtype, scales = _spec_field(spec, "dtype"), _spec_field(spec, "scales")
    a32 = dequantize_operand(a, dtype, scales, a_scale)
    b32 = dequantize_operand(b, dtype, scales, b_scale)
    if a32.shape[1] != b32.shape[1]:
        raise ValueError(f"K mismatch: A is {list(a32.shape)}, B is {list(b32.shape)} (B must be N x K)")
    return a32 @ b32.T
