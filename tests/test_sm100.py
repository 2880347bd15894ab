"""sm100 (B200, Blackwell): its facts, and compile-only static analysis of an mma.sync and a tcgen05 stage."""
from __future__ import annotations

import pytest

from evaluator.ladder import ladder_dirs, stage_paths
from evaluator.targets import get_target, target_for_device

pytestmark = pytest.mark.compiler  # reads real compiler output: CI runs it on two Triton releases

SM100 = get_target("sm100")
STAGES = {p.stem: str(p) for p in stage_paths(ladder_dirs("sm100")[0])}


def test_facts_give_twice_hoppers_dense_rate_per_sm_clock():
    fma_per_sm_clock = SM100.peak_tflops["bfloat16"] * 1e12 / 2 / (SM100.compute_units * SM100.clock_ghz * 1e9)
    assert fma_per_sm_clock == pytest.approx(4096, rel=0.01)
    assert target_for_device("cuda", "10.0") is SM100 and target_for_device("cuda", "9.0") is not SM100
    assert not SM100.verified_on_hardware


def test_mma_sync_stage_compiles_and_is_estimated(static_eval):
    record = static_eval(STAGES["v00_mma_v2"])
    assert record["status"] == "ok", record.get("message")
    static = record["static"]
    assert static["registers"] > 0 and static["spills"] == 0        # ptxas for sm_100a answered
    assert static["hmma_count"] > 0 and static["tcgen05_count"] == 0
    assert static["estimated_efficiency"] is not None


def test_tcgen05_stage_counts_its_mmas_and_says_it_does_not_cost_them(static_eval):
    record = static_eval(STAGES["v01_tcgen05"])
    assert record["status"] == "ok", record.get("message")
    static = record["static"]
    assert static["tcgen05_count"] > 0 and static["tma_load_count"] > 0 and static["hmma_count"] == 0
    assert static["matrix_instructions"] == static["tcgen05_count"]
    assert static["hot_loop"]["tcgen05"] > 0
    assert static["estimated_efficiency"] is None and static["estimate"] is None   # not modelled, not zero
    # The accumulator lives in tensor memory: far fewer registers than the mma.sync stage.
    assert static["registers"] < static_eval(STAGES["v00_mma_v2"])["static"]["registers"]


def test_a_uniform_branch_with_its_condition_as_an_operand_can_fall_through():
    """`BRA.U !UP0, target` is conditional: control also reaches the next block (the loop after it here)."""
    from evaluator.targets.nvidia import sass

    lines = ["        /*0000*/                   MOV R1, c[0x0][0x28] ;",
             "        /*0010*/                   BRA.U !UP0, `(.L_x_2) ;",
             ".L_x_1:",
             "        /*0020*/                   UTCHMMA gdesc[UR12], gdesc[UR14], tmem[UR22], tmem[UR16], idesc[UR17], UPT ;",
             "        /*0030*/                   BRA.U !UP0, `(.L_x_1) ;",
             ".L_x_2:",
             "        /*0040*/                   EXIT ;"]
    text = "\n".join(lines)
    flow = sass.control_flow(text)
    assert [lp.header for lp in flow.loops] == [".L_x_1"]
    body = flow.loop_instructions(flow.loops[0])
    assert [i.mnemonic for i in body if sass.is_tcgen05(i.mnemonic)] == ["UTCHMMA"]
