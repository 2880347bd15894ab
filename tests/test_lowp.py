"""Low-precision formats (evaluator.lowp) and the gfx950 BF8 / MXFP4 reference kernels.

Format checks use hand-computed values; the reference GEMM is checked against an independent NumPy decoding
from raw bits. The kernels are compiled for gfx950 on the CPU and their ISA is read: scaled MFMAs with the
right operand formats, the expected MFMA count per hot-loop trip, and no scratch access in the hot loop.
"""
from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import torch
from triton_release import RELEASE

from evaluator import lowp
from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.targets import get_target

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

ROOT = Path(__file__).resolve().parents[1]
BF8 = ROOT / "kernels/gfx950/bf8/v00_bf8.py"
MXFP4_V00 = ROOT / "kernels/gfx950/mxfp4/v00_mxfp4.py"
MXFP4_V01 = ROOT / "kernels/gfx950/mxfp4/v01_mxfp4_scales_lds.py"
LDS_BYTES = 160 * 1024
# Compiler output that differs by Triton release (compile-only, gfx950, default knobs): the releases on which each
# kernel's VGPRs do not spill (3.6.0 keeps all three in 256 registers; later LLVMs use up to 384 and spill some,
# with scratch accesses in the hot loop), and those on which mxfp4 v01's hot loop never waits for vmcnt(0).
SPILL_FREE = {"bf8": {(3, 6), (3, 7)}, "mxfp4": {(3, 6)}, "mxfp4-v01": {(3, 6), (3, 8)}}
DRAIN_FREE_MXFP4_V01 = {(3, 6), (3, 8)}

# ---------------------------------------------------------------------------------------------
# Independent NumPy decoders (from the bit layouts in the OCP MX spec, not from evaluator.lowp)


def np_e2m1(codes: np.ndarray) -> np.ndarray:
    sign = np.where(codes & 0x8, -1.0, 1.0)
    exp = (codes >> 1) & 0x3
    man = codes & 0x1
    mag = np.where(exp == 0, 0.5 * man, np.ldexp(1.0 + 0.5 * man, exp.astype(np.int64) - 1))
    return sign * mag


def np_e8m0(x: np.ndarray) -> np.ndarray:
    return np.where(x == 0xFF, np.nan, np.ldexp(1.0, x.astype(np.int64) - 127))


def np_fp8(bits: np.ndarray, exp_bits: int) -> np.ndarray:
    """Finite values of an fp8 byte with `exp_bits` exponent bits (e5m2: 5, e4m3fn: 4), IEEE-style bias."""
    man_bits = 7 - exp_bits
    bias = (1 << (exp_bits - 1)) - 1
    sign = np.where(bits & 0x80, -1.0, 1.0)
    exp = ((bits >> man_bits) & ((1 << exp_bits) - 1)).astype(np.int64)
    man = (bits & ((1 << man_bits) - 1)).astype(np.float64) / (1 << man_bits)
    return sign * np.where(exp == 0, np.ldexp(man, 1 - bias), np.ldexp(1.0 + man, exp - bias))


# ---------------------------------------------------------------------------------------------
# e2m1, e8m0, packing


def test_e2m1_decodes_every_code_to_its_hand_computed_value():
    expected = [0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6]
    got = lowp.e2m1_decode(torch.arange(16)).tolist()
    assert got == expected
    assert [np.signbit(v) for v in got[8:]] == [True] * 8


def test_e2m1_encode_rounds_to_nearest_even_and_saturates():
    x = torch.tensor([0.2, 0.25, 0.3, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 7.0, 1e9, -0.75, -2.9, -100.0])
    expected = [0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 6.0, -1.0, -3.0, -6.0]
    assert lowp.e2m1_decode(lowp.e2m1_encode(x)).tolist() == expected


def test_e2m1_encode_inverts_decode_on_all_codes():
    codes = torch.arange(16, dtype=torch.uint8)
    assert torch.equal(lowp.e2m1_encode(lowp.e2m1_decode(codes)), codes)


def test_pack_puts_the_even_element_in_the_low_nibble():
    packed = lowp.pack_e2m1(torch.tensor([[0x1, 0x2, 0x3, 0xF]], dtype=torch.uint8))
    assert packed.tolist() == [[0x21, 0xF3]]
    assert lowp.unpack_e2m1(packed).tolist() == [[0x1, 0x2, 0x3, 0xF]]


def test_pack_matches_torch_float4_x2_layout():
    # torch's float4_e2m1fn_x2 (OCP order) keeps element 2i in bits 0-3 as well: same bytes, viewed.
    codes = torch.randint(0, 16, (4, 64), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    packed = lowp.pack_e2m1(codes)
    assert torch.equal(lowp.unpack_e2m1(packed), codes)
    assert torch.equal(packed.view(torch.float4_e2m1fn_x2).view(torch.uint8), packed)


def test_pack_rejects_odd_length():
    with pytest.raises(ValueError, match="even"):
        lowp.pack_e2m1(torch.zeros(3, dtype=torch.uint8))


def test_e8m0_decodes_hand_computed_values_and_nan():
    got = lowp.e8m0_decode(torch.tensor([0, 1, 126, 127, 128, 130, 254, 255], dtype=torch.uint8))
    assert got[:7].tolist() == [2.0 ** -127, 2.0 ** -126, 0.5, 1.0, 2.0, 8.0, 2.0 ** 127]
    assert torch.isnan(got[7])


def test_dequantize_mxfp4_applies_one_scale_per_32_values():
    codes = torch.zeros(1, 64, dtype=torch.uint8)
    codes[0, 0], codes[0, 1], codes[0, 31] = 0x7, 0x9, 0x3   # 6, -0.5, 1.5 in block 0
    codes[0, 32], codes[0, 63] = 0x2, 0xC                     # 1, -2 in block 1
    scales = torch.tensor([[126, 129]], dtype=torch.uint8)   # x0.5, x4
    out = lowp.dequantize_mxfp4(lowp.pack_e2m1(codes), scales)
    assert out.shape == (1, 64)
    assert [out[0, i].item() for i in (0, 1, 31, 32, 63)] == [3.0, -0.25, 0.75, 4.0, -8.0]
    assert out[0, 2:31].abs().sum().item() == 0.0


def test_dequantize_mxfp4_rejects_mismatched_scales():
    with pytest.raises(ValueError, match="scales must be"):
        lowp.dequantize_mxfp4(torch.zeros(2, 32, dtype=torch.uint8), torch.zeros(2, 1, dtype=torch.uint8))


def test_quantize_mxfp4_is_exact_on_representable_blocks():
    g = torch.Generator().manual_seed(2)
    codes = torch.randint(0, 16, (8, 128), dtype=torch.uint8, generator=g)
    codes[:, ::32] = 0x7  # every block holds a +-6 so its scale is pinned
    scales = torch.randint(115, 140, (8, 4), dtype=torch.uint8, generator=g)
    x = lowp.dequantize_mxfp4(lowp.pack_e2m1(codes), scales)
    packed, got_scales = lowp.quantize_mxfp4(x)
    assert torch.equal(got_scales, scales)
    assert torch.equal(lowp.dequantize_mxfp4(packed, got_scales), x)


def test_to_fp8_saturates_instead_of_overflowing():
    out = lowp.to_fp8(torch.tensor([1e9, -1e9, 1.0]), "float8_e5m2")
    assert out.float().tolist() == [57344.0, -57344.0, 1.0]
    assert lowp.to_fp8(torch.tensor([1e9]), "float8_e4m3fn").float().item() == 448.0


# ---------------------------------------------------------------------------------------------
# Reference GEMM against NumPy


def test_mxfp4_reference_matches_numpy():
    rng = np.random.default_rng(3)
    m, n, k = 24, 40, 128
    a_codes = rng.integers(0, 16, (m, k), dtype=np.uint8)
    b_codes = rng.integers(0, 16, (n, k), dtype=np.uint8)
    a_scale = rng.integers(118, 136, (m, k // 32), dtype=np.uint8)
    b_scale = rng.integers(118, 136, (n, k // 32), dtype=np.uint8)

    def np_pack(codes):  # low nibble = even element
        return (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8)

    def np_dequant(codes, scale):
        return np_e2m1(codes) * np.repeat(np_e8m0(scale), 32, axis=1)

    expected = np_dequant(a_codes, a_scale) @ np_dequant(b_codes, b_scale).T
    got = lowp.reference_gemm(torch.from_numpy(np_pack(a_codes)), torch.from_numpy(np_pack(b_codes)),
                              {"dtype": "float4_e2m1", "scales": "e8m0_k32"},
                              torch.from_numpy(a_scale), torch.from_numpy(b_scale))
    assert got.dtype == torch.float32 and got.shape == (m, n)
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


@pytest.mark.parametrize("dtype, exp_bits", [("float8_e5m2", 5), ("float8_e4m3fn", 4)])
def test_fp8_reference_matches_numpy(dtype, exp_bits):
    g = torch.Generator().manual_seed(4)
    a = lowp.to_fp8(torch.randn(32, 96, generator=g) * 4, dtype)
    b = lowp.to_fp8(torch.randn(48, 96, generator=g) * 4, dtype)
    expected = np_fp8(a.view(torch.uint8).numpy(), exp_bits) @ np_fp8(b.view(torch.uint8).numpy(), exp_bits).T
    got = lowp.reference_gemm(a, b, {"dtype": dtype, "scales": None})
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-5, atol=1e-6 * np.abs(expected).max())


def test_per_tensor_reference_applies_both_scales():
    g = torch.Generator().manual_seed(5)
    a = lowp.to_fp8(torch.randn(8, 64, generator=g), "float8_e4m3fn")
    b = lowp.to_fp8(torch.randn(16, 64, generator=g), "float8_e4m3fn")
    spec = {"dtype": "float8_e4m3fn", "scales": "per_tensor"}
    plain = lowp.reference_gemm(a, b, {"dtype": "float8_e4m3fn", "scales": None})
    scaled = lowp.reference_gemm(a, b, spec, torch.tensor([0.5]), torch.tensor([3.0]))
    torch.testing.assert_close(scaled, plain * 1.5, rtol=1e-6, atol=1e-6)
    with pytest.raises(ValueError, match="per_tensor"):
        lowp.reference_gemm(a, b, spec)


def test_reference_rejects_storage_that_does_not_match_dtype():
    with pytest.raises(ValueError, match="declares"):
        lowp.reference_gemm(torch.zeros(2, 4), torch.zeros(2, 4), {"dtype": "float8_e5m2", "scales": None})


# ---------------------------------------------------------------------------------------------
# Kernels: compile for gfx950 on the CPU and read the ISA


def hot_loop(asm: str) -> list[str]:
    """Instruction lines of the innermost loop holding MFMAs, by LLVM's block annotations.

    A header block carries "Loop Header: Depth=N" (on the label line, or on the comment line right after
    it when the label also names the IR block); the loop's other blocks carry "in Loop: Header=".
    """
    lines = asm.splitlines()
    label_of_line, current, pending = {}, None, False
    headers, members = set(), {}
    for i, line in enumerate(lines):
        label = re.match(r"^\.?(L?BB\w+):", line)
        if label:
            current, pending = label.group(1).lstrip("L"), True
        elif not line.lstrip().startswith(";"):
            pending = False
        if current and (pending or label):
            if "Loop Header: Depth=" in line:
                headers.add(current)
                members[current] = current
            elif (m := re.search(r"in Loop: Header=(BB\w+)", line)):
                members[current] = m.group(1)
        label_of_line[i] = current
    loops: dict[str, list[str]] = {}
    for i, line in enumerate(lines):
        block = label_of_line[i]
        if block in members and line.startswith("\t") and not line.lstrip().startswith((";", ".")):
            loops.setdefault(members[block], []).append(line.strip())
    with_mfma = {h: body for h, body in loops.items() if any(ins.startswith("v_mfma") for ins in body)}
    assert with_mfma, "no loop with MFMAs found"
    return max(with_mfma.values(), key=lambda body: sum(ins.startswith("v_mfma") for ins in body))


def amdgcn_metadata(asm: str, key: str) -> int:
    return int(re.search(rf"\.{key}:\s+(\d+)", asm).group(1))


@pytest.fixture(scope="module", params=[BF8, MXFP4_V00, MXFP4_V01], ids=["bf8_v00", "mxfp4_v00", "mxfp4_v01"])
def compiled(request):
    module, spec = load_candidate(request.param)
    kernel = compile_candidate(module, spec, get_target(spec.target))[0]
    return module, spec, kernel


def test_kernel_declares_the_low_precision_contract(compiled):
    module, spec, _ = compiled
    assert spec.target == "gfx950"
    assert module.STAGE.split("-")[0] in ("bf8", "mxfp4") and module.TECHNIQUE
    if module.STAGE == "bf8":
        assert (spec.dtype, spec.scales, spec.benchmark_shape) == ("float8_e5m2", None, (4096, 4096, 16384))
        assert (spec.knobs["BLOCK_M"], spec.knobs["BLOCK_N"], spec.knobs["BLOCK_K"]) == (256, 256, 128)
    else:
        assert (spec.dtype, spec.scales, spec.benchmark_shape) == ("float4_e2m1", "e8m0_k32", (4096, 4096, 32768))
        assert (spec.knobs["BLOCK_M"], spec.knobs["BLOCK_N"], spec.knobs["BLOCK_K"]) == (256, 256, 256)


def test_kernel_uses_scaled_mfma_with_its_operand_format(compiled):
    module, _, kernel = compiled
    asm = kernel.asm["amdgcn"]
    mfmas = re.findall(r"^\s*(v_mfma\w+)\s.*$", asm, re.MULTILINE)
    assert mfmas and set(mfmas) == {"v_mfma_scale_f32_16x16x128_f8f6f4"}
    # cbsz (A) / blgp (B) select the f8f6f4 operand format: 0 fp8 e4m3, 1 bf8 e5m2, 4 fp4 e2m1.
    expected = "cbsz:1 blgp:1" if module.STAGE == "bf8" else "cbsz:4 blgp:4"
    formats = set(re.findall(r"^\s*v_mfma_scale\S+ .*?(cbsz:\d+ blgp:\d+)", asm, re.MULTILINE))
    assert formats == {expected}


def test_kernel_fits_registers_and_lds_spilling_as_its_release_does(compiled):
    module, _, kernel = compiled
    asm = kernel.asm["amdgcn"]
    if RELEASE in SPILL_FREE[module.STAGE]:
        assert amdgcn_metadata(asm, "vgpr_spill_count") == 0
    else:
        assert amdgcn_metadata(asm, "vgpr_spill_count") > 0, f"spill-free on Triton {RELEASE}: add it to SPILL_FREE"
    assert amdgcn_metadata(asm, "sgpr_spill_count") == 0
    assert amdgcn_metadata(asm, "vgpr_count") + amdgcn_metadata(asm, "agpr_count") <= 512
    assert 0 < kernel.shared_bytes <= LDS_BYTES


def test_hot_loop_has_the_expected_mfma_count_and_scratch_only_where_its_release_spills(compiled):
    module, spec, kernel = compiled
    body = hot_loop(kernel.asm["amdgcn"])
    scratch = [ins for ins in body if ins.startswith("scratch_")]
    if module.STAGE == "mxfp4" and RELEASE == (3, 7):
        assert not scratch  # 3.7 spills mxfp4 v00 outside its hot loop only
    else:
        assert bool(scratch) == (RELEASE not in SPILL_FREE[module.STAGE])
    knobs = spec.knobs
    tiles_per_wave = knobs["BLOCK_M"] * knobs["BLOCK_N"] // (16 * 16) // knobs["num_warps"]
    k_chunks = knobs["BLOCK_K"] // 128  # one 16x16x128 MFMA per 128 K-values
    steps_per_trip = 2 if module.STAGE == "bf8" else 1  # bf8 unrolls its K loop by two
    assert sum(ins.startswith("v_mfma") for ins in body) == tiles_per_wave * k_chunks * steps_per_trip


def test_hot_loop_copies_operands_straight_to_lds(compiled):
    _, _, kernel = compiled
    body = hot_loop(kernel.asm["amdgcn"])
    copies = [ins for ins in body if ins.startswith("buffer_load_dwordx4") and re.search(r"\blds\b", ins)]
    assert len(copies) >= 8
    assert not [ins for ins in body if ins.startswith("global_load")]


@pytest.fixture(scope="module")
def mxfp4_loops():
    out = {}
    for path in (MXFP4_V00, MXFP4_V01):
        module, spec = load_candidate(path)
        out[path.name] = hot_loop(compile_candidate(module, spec, get_target(spec.target))[0].asm["amdgcn"])
    return out


def test_mxfp4_v00_scales_go_through_registers_into_a_scale_ordered_lds_tile(mxfp4_loops):
    body = mxfp4_loops[MXFP4_V00.name]
    assert [ins for ins in body if re.match(r"buffer_load_dword\s", ins) and not re.search(r"\blds\b", ins)]
    assert [ins for ins in body if ins.startswith("ds_write")]
    # The LDS scale tile follows the MFMA scale layout, so a lane reads its scales in one access per half.
    assert [ins for ins in body if ins.startswith("ds_read_b64")]
    assert not [ins for ins in body if ins.startswith("ds_read_u8")]


def test_mxfp4_v01_scales_ride_the_async_copies_and_never_drain_them(mxfp4_loops):
    body = mxfp4_loops[MXFP4_V01.name]
    assert [ins for ins in body if re.match(r"buffer_load_dword\s", ins) and re.search(r"\blds\b", ins)]
    assert not [ins for ins in body if ins.startswith("ds_write")]
    waits = [int(n) for ins in body for n in re.findall(r"vmcnt\((\d+)\)", ins)]
    assert waits and (min(waits) > 0) == (RELEASE in DRAIN_FREE_MXFP4_V01)
    if RELEASE in DRAIN_FREE_MXFP4_V01:
        assert "vmcnt(0)" in " ".join(mxfp4_loops[MXFP4_V00.name])  # what v01 removes
