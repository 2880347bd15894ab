"""The gfx950 static report agrees with the raw assembly it was read from."""
from __future__ import annotations

import re

import pytest
from conftest import TEST_KERNELS

from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.targets import get_target

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

GFX950 = get_target("gfx950")


@pytest.fixture(scope="module")
def small():
    module, spec = load_candidate(TEST_KERNELS / "small_gfx950.py")
    kernels = compile_candidate(module, spec, GFX950)
    from evaluator.static import analyze

    return kernels[0], analyze(kernels, GFX950)


def test_mfma_count_equals_mfma_lines_in_assembly(small):
    kernel, report = small
    lines = [ln for ln in kernel.asm["amdgcn"].splitlines() if re.match(r"\s+v_mfma", ln)]
    assert report["mfma_count"] == len(lines) > 0
    assert report["mfma_shape"] == ["v_mfma_f32_16x16x32_f16"]


def test_register_counts_match_metadata(small):
    kernel, report = small
    text = kernel.asm["amdgcn"]
    assert f".vgpr_count:     {report['total_vgprs']}" in text
    assert f"; NumVgprs: {report['arch_vgprs']}" in text
    assert report["total_vgprs"] >= report["arch_vgprs"] + report["agprs"] - 4  # AGPRs start 4-aligned


def test_small_kernel_reports_no_spills(small):
    _, report = small
    assert report["vgpr_spill_count"] == 0 and report["scratch_bytes"] == 0 and report["hot_loop_spills"] == 0


def test_lds_comes_from_compile_metadata_not_the_zero_amdgcn_field(small):
    kernel, report = small
    assert ".group_segment_fixed_size: 0" in kernel.asm["amdgcn"]
    assert report["lds_bytes"] == kernel.metadata["shared"] > 0


def test_occupancy_is_limited_by_registers():
    from evaluator.targets.amd.static import occupancy

    assert occupancy(512, 0, 4, GFX950)["occupancy_waves_per_simd"] == 1
    assert occupancy(128, 0, 4, GFX950)["occupancy_waves_per_simd"] == 4
    # LDS: 64 KiB per 4-wave workgroup leaves room for two workgroups in 160 KiB.
    assert occupancy(64, 64 * 1024, 4, GFX950)["occupancy_waves_per_simd"] == 2


def test_kernel_built_to_spill_reports_spills_inside_the_hot_loop(static_eval):
    record = static_eval(str(TEST_KERNELS / "spilling_gfx950.py"))
    st = record["static"]
    assert st["vgpr_spill_count"] > 0 and st["scratch_bytes"] > 0
    assert st["hot_loop_spills"] > 0
    assert st["hot_loop_spills"] == st["hot_loop"]["scratch_load"] + st["hot_loop"]["scratch_store"]


def test_unit_strides_are_specialized_as_constants(small):
    kernel, _ = small
    ttgir = kernel.asm["ttgir"]
    signature = ttgir[ttgir.index("tt.func public"):].split("\n", 1)[0]
    # The K strides of A and B and the column stride of C are 1: constants, gone from the signature.
    for name in ("stride_ak", "stride_bk", "stride_cn"):
        assert f"%{name}:" not in signature
    # Strides that are multiples of 16 carry the divisibility hint the runtime would give.
    assert re.search(r"%stride_am: i32 \{tt.divisibility = 16", signature)


def test_efficiency_is_labelled_a_static_estimate(static_eval):
    st = static_eval(str(TEST_KERNELS / "small_gfx950.py"))["static"]
    assert st["estimate_kind"] == "static_estimate" and st["estimate"]["kind"] == "static_estimate"
    assert 0 < st["estimated_efficiency"] <= 1


def test_instruction_mix_counts_the_loop_body(static_eval):
    st = static_eval(str(TEST_KERNELS / "small_gfx950.py"))["static"]
    loop = st["hot_loop"]
    assert loop["mfma"] == st["mfma_count"]  # every MFMA of this kernel sits in its K loop
    assert loop["global_load"] > 0 and loop["s_waitcnt"] > 0
    assert "v_mfma" in loop["excerpt"]


def test_assembly_without_its_register_metadata_is_a_compile_failure_not_zeros(small):
    from evaluator.errors import CompileFailure
    from evaluator.targets.amd import amdgcn

    kernel, _ = small
    cut = kernel.asm["amdgcn"].split(".amdgpu_metadata")[0]  # the code, without the HSA metadata after it
    assert amdgcn.parse_resource_usage(kernel.asm["amdgcn"]).total_vgprs > 0
    with pytest.raises(CompileFailure, match="no .vgpr_count metadata"):
        amdgcn.parse_resource_usage(cut)
