"""gfx942 (MI300X/MI325X, CDNA3): its facts, compile-only static analysis, and its two reference stages."""
from __future__ import annotations

import pytest

from evaluator.ladder import ladder_dirs, ladder_records, render, stage_paths
from evaluator.targets import get_target, target_for_device

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

GFX942 = get_target("gfx942")
STAGES = {p.stem: str(p) for p in stage_paths(ladder_dirs("gfx942")[0])}


def test_facts_are_the_mi300x_datasheet_and_its_table_gives_the_datasheet_peak():
    assert (GFX942.compute_units, GFX942.shared_bytes_per_cu, GFX942.warp_size) == (304, 64 * 1024, 64)
    # peak = FLOPs per MFMA * 4 SIMDs per CU * CUs * clock / cycles per MFMA (AMD's CDNA3 formula)
    for mnemonic, flops, dtype in (("v_mfma_f32_16x16x16_f16", 2 * 16 * 16 * 16, "float16"),
                                   ("v_mfma_f32_32x32x8_bf16", 2 * 32 * 32 * 8, "bfloat16"),
                                   ("v_mfma_f32_32x32x16_fp8_fp8", 2 * 32 * 32 * 16, "float8_e4m3fnuz")):
        cycles = GFX942.matrix_cycles[mnemonic]
        peak = flops * GFX942.simds_per_cu * GFX942.compute_units * GFX942.clock_ghz * 1e9 / cycles / 1e12
        assert peak == pytest.approx(GFX942.peak_tflops[dtype], rel=1e-3)


def test_a_rocm_device_reporting_gfx942_is_this_target():
    assert target_for_device("hip", "gfx942:sramecc+:xnack-") is GFX942
    assert target_for_device("hip", "gfx950:sramecc+:xnack-") is not GFX942
    assert not GFX942.verified_on_hardware


def test_the_ladder_has_a_naive_and_an_lds_pipelined_stage():
    assert sorted(STAGES) == ["v00_naive", "v01_lds_pipelined"]


@pytest.fixture(scope="module")
def ladder():
    return {row["stage"]: row for row in ladder_records("gfx942")}


def test_both_stages_compile_for_gfx942_without_spills(ladder):
    for stage in ("v00", "v01"):
        row = ladder[stage]
        assert row["status"] == "ok", row["message"]
        assert row["spills"] == 0 and row["hot_loop_spills"] == 0
        assert row["mfma_shape"] == ["v_mfma_f32_16x16x16_f16"]
        assert row["lds_bytes"] <= GFX942.shared_bytes_per_block


def test_lds_pipelining_raises_the_static_estimate(ladder):
    assert ladder["v01"]["estimated_efficiency"] > 2 * ladder["v00"]["estimated_efficiency"]


def test_pipelined_hot_loop_uses_buffer_loads_lds_and_no_masks(static_eval):
    loop = static_eval(STAGES["v01_lds_pipelined"])["static"]["hot_loop"]
    assert loop["buffer_load"] > 0 and loop["global_load"] == 0
    assert loop["ds_write"] > 0 and loop["ds_read"] > 0
    assert loop["branch"] == 1                       # the loop's own back edge; no mask branches
    naive = static_eval(STAGES["v00_naive"])["static"]["hot_loop"]
    assert naive["global_load"] > 0 and naive["branch"] > loop["branch"]


def test_ladder_table_labels_the_target_unverified_on_hardware(ladder):
    text = render("gfx942", list(ladder.values()), [])
    assert "v01" in text and "MFMA/iter" in text
    assert "gfx942: nearpeak's runtime path has not yet run on hardware" in text
