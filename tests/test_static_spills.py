"""Register spills in the static model (evaluator.local_memory, docs/static-model.md "Spills"): the level that
serves local memory follows the footprint of every resident spilling thread, a reload waits that level's latency,
and its traffic competes for that level's bandwidth. The sm90 cases compile real reference stages with knobs that
make ptxas spill (or not) and read what the model makes of them."""
from __future__ import annotations

import pytest

from evaluator.api import evaluate_static
from evaluator.isa.common import Instruction
from evaluator.local_memory import CacheLevel, place_spills
from evaluator.static_error import mechanisms_changed
from evaluator.targets import get_target
from evaluator.targets.nvidia.model import estimate_sass
from evaluator.throughput import Sharing, StreamLoop, shared_iteration

SM90 = get_target("sm90")
SHAPE = (4096, 4096, 4096)
LEVELS = (CacheLevel("L1", 64 * 1024, True, 32, 128.0, False),
          CacheLevel("L2", 60 * 2 ** 20, False, 2000, None, True),
          CacheLevel("HBM", float("inf"), False, 2000, 20.0, True))


def ins(text: str) -> Instruction:
    mnemonic, _, operands = text.partition(" ")
    return Instruction(mnemonic, operands, 0)


def test_the_footprint_of_every_resident_spilling_thread_picks_the_level():
    assert place_spills(0, 128, 2, 132, LEVELS) is None
    assert place_spills(24, 128, 2, 132, LEVELS).level == "L1"                # 6 KiB per SM
    l2 = place_spills(624, 128, 1, 132, LEVELS)                               # 78 KiB per SM, 10 MB in all
    assert l2.level == "L2" and l2.footprint_per_unit == 624 * 128 and l2.through_operand_feed
    hbm = place_spills(4584, 64, 8, 132, LEVELS)                              # 300 MB: past the L2
    assert hbm.level == "HBM" and hbm.footprint_device > 60 * 2 ** 20 and hbm.bytes_per_cycle == 20.0
    # the same kernel with fewer SMs busy (a small grid) fits the L2 again
    assert place_spills(4584, 64, 8, 4, LEVELS).level == "L2"


def test_a_reload_feeding_a_wgmma_waits_for_its_level():
    body = [ins(t) for t in ["LDL.LU.64 R150, [R1+0x68]", "WARPGROUP.ARRIVE",
                             "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0", "WARPGROUP.DEPBAR.LE gsb0, 0x0",
                             "STL.64 [R1+0x68], R150"]]
    # R150 lies inside the accumulator R24..R151 the wgmma reads, though the SASS names only R24
    near = estimate_sass(body, SM90.matrix_cycles, spill_latency=32)
    far = estimate_sass(body, SM90.matrix_cycles, spill_latency=2000)
    assert far.iteration_cycles - near.iteration_cycles == pytest.approx(2000 - 32, abs=2)
    assert far.bound == "spill_wait" and near.stall_cycles["spill_wait"] <= 32


def test_spill_traffic_shares_the_operand_feed_from_the_l2_on_and_hbm_beyond():
    loop = StreamLoop(iteration_cycles=1000.0, matrix_cycles=512.0, issue_cycles=100.0)
    operands = Sharing(operand_bytes=48 * 1024, operand_bytes_per_cycle=40.0)
    plain = shared_iteration(loop, 1, 1, operands)
    l2 = place_spills(624, 128, 1, 132, LEVELS)
    spilling = Sharing(48 * 1024, 40.0, spill_bytes=160 * 1024, spills=l2)
    assert shared_iteration(loop, 1, 1, spilling).cycles == pytest.approx((48 + 160) * 1024 / 40.0)
    assert shared_iteration(loop, 1, 1, spilling).cycles > 3 * plain.cycles
    hbm = Sharing(48 * 1024, 40.0, spill_bytes=160 * 1024, spills=place_spills(4584, 64, 8, 132, LEVELS))
    assert shared_iteration(loop, 1, 1, hbm).bound == "spills"               # 20 B/clk: slower than the feed
    l1 = Sharing(48 * 1024, 40.0, spill_bytes=16 * 1024, spills=place_spills(24, 128, 2, 132, LEVELS))
    assert l1.feed_bytes() == 48 * 1024 and l1.spill_level_cycles() == 128    # stays in the SM, at 128 B/clk
    assert shared_iteration(loop, 1, 1, l1).cycles == pytest.approx(plain.cycles)


def _static(path: str, knobs: dict | None = None) -> dict:
    record = evaluate_static(path, target="sm90", shape=SHAPE, knobs=knobs)
    assert record["status"] == "ok", record.get("message")
    return record["static"]


@pytest.fixture(scope="module")
def v05():
    path = "kernels/sm90/bf16/v05_two_warpgroups.py"
    return _static(path), _static(path, {"num_warps": 4})


@pytest.mark.compiler
@pytest.mark.slow
def test_one_warpgroup_holding_a_128x256_accumulator_spills_to_the_l2_and_collapses(v05):
    two, one = v05
    # compiler output: 256 fp32 accumulators per thread do not fit in 255 registers
    assert two["spills"] == 0 and two["model"]["spills"] is None
    assert one["registers"] == 255 and one["stack_frame_bytes"] > 0 and one["hot_loop_spills"] > 100
    # 128 threads x the stack frame is past the L1 left beside a 192 KiB shared carveout, far below the L2
    assert one["model"]["spills"]["level"] == "L2"
    assert one["model"]["spill_bytes_per_iteration"] > 3 * one["model"]["work"]["operand_bytes_per_iteration"]
    assert one["estimate"]["stall_cycles"]["spill_wait"] > one["estimate"]["matrix_cycles_per_iteration"]
    # measured on the H200 (set 1): 132 vs 664 TFLOP/s; the estimate must at least fall by half
    assert one["estimated_tflops"] < 0.5 * two["estimated_tflops"]
    assert "spills" in mechanisms_changed(one, two)


@pytest.mark.compiler
@pytest.mark.slow
def test_a_small_stack_frame_stays_in_the_l1_and_costs_little():
    path = "kernels/sm90/bf16/v00_mma_v2.py"
    base, spilled = _static(path), _static(path, {"BLOCK_K": 64})
    assert 0 < spilled["stack_frame_bytes"] <= 64 and spilled["model"]["spills"]["level"] == "L1"
    stalls = spilled["estimate"]["stall_cycles"]
    assert stalls["spill_wait"] < 0.05 * spilled["estimate"]["estimated_iteration_cycles"]
    # BLOCK_K = 64 halves the iterations; its few L1-resident spills must not turn that into a loss
    assert spilled["estimated_tflops"] > base["estimated_tflops"]


@pytest.mark.compiler
@pytest.mark.slow
def test_spills_of_many_resident_ctas_past_the_l2_stream_from_hbm():
    path = "kernels/sm90/bf16/v00_mma_v2.py"
    base, two_warps = _static(path), _static(path, {"num_warps": 2})
    placement = two_warps["model"]["spills"]
    assert placement["level"] == "HBM" and placement["footprint_device"] > SM90.last_level_cache_bytes
    # measured on the H200 (set 1): 6.8 vs 154 TFLOP/s
    assert two_warps["estimated_tflops"] < 0.1 * base["estimated_tflops"]
