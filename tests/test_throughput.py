"""The work-normalised static objective: matrix work from TTGIR (evaluator.work) and the kernel-time arithmetic
(evaluator.throughput) respond in the direction the hardware would."""
from __future__ import annotations

import dataclasses
import math

import pytest

from evaluator.clock import ClockModel
from evaluator.targets.loop_estimate import Segment
from evaluator.throughput import (
    Residency,
    Sharing,
    StreamLoop,
    TileOverheads,
    estimate_throughput,
    one_cta_iteration,
    shared_iteration,
)
from evaluator.work import matrix_work

# A K loop with one accumulation chain of two dots (K 2 x 64), and the epilogue's store of the 128x128 tile.
TTGIR = """
module attributes {"ttg.num-warps" = 4 : i32} {
  tt.func public @k(%a: !tt.ptr<f16>) attributes {noinline = false} {
    %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %cst, %x = %y) -> (tensor<128x128xf32, #mma>, i32)  : i32 {
      %d0 = tt.dot %a0, %b0, %acc : tensor<128x64xf16, #dot0> * tensor<64x128xf16, #dot1> -> tensor<128x128xf32, #mma> loc(#l)
      %d1 = tt.dot %a1, %b1, %d0 : tensor<128x64xf16, #dot0> * tensor<64x128xf16, #dot1> -> tensor<128x128xf32, #mma> loc(#l)
      %c = tt.dot %a1, %b1, %copy : tensor<128x64xf16, #dot0> * tensor<64x128xf16, #dot1> -> tensor<128x128xf32, #mma> loc(#l)
      scf.yield %d1, %x : tensor<128x128xf32, #mma>, i32 loc(#l)
    } loc(#l)
    tt.store %p, %v : tensor<128x128x!tt.ptr<f16>, #blocked> loc(#l)
    tt.return loc(#l)
  } loc(#l)
} loc(#l)
"""


def test_work_reads_chains_depth_and_a_repeated_operand_pair():
    w = matrix_work(TTGIR)
    assert w.ops_per_iteration == 3 and w.chains == 2
    assert w.k_per_iteration == 128                         # the chain of two K=64 dots
    assert w.accumulated_area == 2 * 128 * 128
    assert w.distinct_area == 128 * 128                     # the third dot repeats (a1, b1) into another accumulator
    assert w.stored_elements == 128 * 128 and w.useful_area == 128 * 128
    assert not w.persistent and not w.warp_specialized and w.consumer_warps == 4


def test_work_sees_a_tile_loop_around_the_k_loop():
    persistent = TTGIR.replace("    %r:2 = scf.for", "    scf.for %t = %p to %q step %g {\n    %r:2 = scf.for").replace(
        "    tt.return", "    } loc(#l)\n    tt.return")
    w = matrix_work(persistent)
    assert w.persistent and w.k_per_iteration == 128


def test_work_without_matrix_ops():
    assert matrix_work('module attributes {"ttg.num-warps" = 4 : i32} {\n}').k_loop_line is None


WORK = matrix_work(TTGIR.replace("      %c = tt.dot %a1, %b1, %copy", "      // no copy"))
LOOP = StreamLoop(iteration_cycles=600.0, matrix_cycles=512.0, issue_cycles=100.0)
ONE = Residency(1, {"registers": 1})
OVERHEADS = TileOverheads(first_load_latency=800.0, prefetched_across_tiles=False, epilogue_cycles=500.0)
SHAPE = (4096, 4096, 4096)


def estimate(**changes):
    args = {"shape": SHAPE, "grid_ctas": 1024, "units": 132, "clock_ghz": 1.83, "work": WORK, "loop": LOOP,
            "streams_per_cta": 1, "residency": ONE, "overheads": OVERHEADS, **changes}
    return estimate_throughput(**args)


def test_iterations_tiles_and_useful_flops():
    e = estimate()
    assert e.iterations_per_tile == 4096 // 128
    assert e.tiles == 1024 and e.waves == 8                 # ceil(1024 / 132) CTAs on the busiest SM, one at a time
    assert e.useful_fraction == 1.0
    assert e.total_cycles == 8 * (800 + 32 * 600 + 500)
    assert abs(e.estimated_tflops - 2 * 4096 ** 3 / (e.total_cycles / 1.83e9) / 1e12) < 1e-6


def test_repeated_work_lowers_the_score_and_shows_as_waste():
    honest = estimate()
    doubled = dataclasses.replace(WORK, flops_per_iteration=2 * WORK.flops_per_iteration,
                                  accumulated_area=2 * WORK.accumulated_area, chains=2)
    slower = StreamLoop(iteration_cycles=1100.0, matrix_cycles=1024.0, issue_cycles=130.0)
    cheat = estimate(work=doubled, loop=slower)
    assert cheat.useful_fraction == 0.5
    assert cheat.estimated_tflops < honest.estimated_tflops


def test_resident_ctas_hide_each_others_latency_until_the_pipe_is_full():
    latency_bound = StreamLoop(iteration_cycles=1400.0, matrix_cycles=512.0, issue_cycles=100.0)
    alone = estimate(loop=latency_bound)
    three = estimate(loop=latency_bound, residency=Residency(3, {"registers": 3, "shared": 4}))
    assert three.estimated_tflops > 2 * alone.estimated_tflops
    assert three.resident_ctas == 3 and three.shared_iteration_cycles == 3 * 512
    assert three.resident_limited_by == ["registers"]
    assert estimate(grid_ctas=132, residency=Residency(3, {"registers": 3})).resident_limited_by == ["grid"]
    # A pipe-bound loop gains only the overlap of the tiles' latency and epilogue.
    pipe_bound = StreamLoop(iteration_cycles=520.0, matrix_cycles=512.0, issue_cycles=50.0)
    one, two = estimate(loop=pipe_bound), estimate(loop=pipe_bound, residency=Residency(2, {"shared": 2}))
    assert one.estimated_tflops < two.estimated_tflops < one.estimated_tflops * 1.1


def test_residency_reports_its_limits():
    r = Residency(2, {"registers": 3, "shared": 2, "warps": 16})
    assert r.limited_by == ["shared"]


def test_one_cta_too_many_costs_a_whole_wave():
    full = estimate(grid_ctas=132)
    spill = estimate(grid_ctas=133)
    assert spill.waves == 2 and spill.estimated_tflops < 0.6 * full.estimated_tflops * 133 / 132


def test_a_persistent_kernel_that_prefetches_across_tiles_pays_the_load_latency_once():
    persistent = dataclasses.replace(WORK, persistent=True)
    refills = estimate(work=persistent, grid_ctas=132)
    prefetches = estimate(work=persistent, grid_ctas=132,
                          overheads=dataclasses.replace(OVERHEADS, prefetched_across_tiles=True))
    assert refills.tiles == 1024 and refills.tiles_per_unit == 8
    assert prefetches.total_cycles == refills.total_cycles - 7 * 800


def test_a_foreign_entry_is_scored_for_the_shape_its_matrix_arguments_imply():
    from conftest import TEST_KERNELS

    from evaluator.foreign import gemm_shape, parse_args
    from evaluator.stages import evaluate_foreign

    assert gemm_shape(parse_args(["a=512x256:fp16", "b=256x384:fp16:T"])) == (512, 384, 256)
    assert gemm_shape(parse_args(["a=512x256:fp16", "b=384x256:fp16"])) == (512, 384, 256)
    assert gemm_shape(parse_args(["a=512x256:fp16", "b=100x100:fp16"])) is None
    (record,) = evaluate_foreign(TEST_KERNELS / "foreign_tutorial_style.py", "matmul",
                                 ["a=1024x512:float16", "b=512x1024:float16:T"], "gfx950")
    assert record["status"] == "ok" and record["shape"] == [1024, 1024, 512]
    static = record["static"]
    assert static["estimated_tflops"] > 0 and static["useful_fraction"] == 1.0
    assert static["throughput"]["tiles"] == math.prod(static["grid"])  # one tile per CTA of its grid


# Shared resources between resident streams (issue 23).

# One stream: a 400-cycle wait with no matrix work, then 512 matrix cycles, a barrier between them.
SPLIT = StreamLoop(iteration_cycles=912.0, matrix_cycles=512.0, issue_cycles=100.0,
                   segments=(Segment(400.0, 0.0, 20.0), Segment(512.0, 512.0, 80.0)))


def test_waves_of_one_workgroup_hide_stalls_only_between_barriers():
    two = one_cta_iteration(SPLIT, 2)
    assert two == 400 + 2 * 512                      # the wait before the barrier is paid by both
    assert two > max(SPLIT.iteration_cycles, 2 * SPLIT.matrix_cycles, 2 * SPLIT.issue_cycles)
    assert one_cta_iteration(SPLIT, 1) == SPLIT.iteration_cycles


def test_independent_workgroups_overlap_more_than_waves_of_one():
    waves = shared_iteration(SPLIT, streams=2, ctas=1)
    ctas = shared_iteration(SPLIT, streams=1, ctas=2)
    assert ctas.cycles < waves.cycles and waves.bound == "barriers" and ctas.bound == "matrix_pipe"


def test_the_cus_lds_bandwidth_is_shared_by_every_resident_wave():
    lds_heavy = StreamLoop(600.0, 256.0, 100.0, lds_cycles=300.0)
    sharing = Sharing(waves_per_cta=4, lds_share=0.5)
    one, three = shared_iteration(lds_heavy, 1, 1, sharing), shared_iteration(lds_heavy, 1, 3, sharing)
    assert one.bound == "own_latency" and three.bound == "lds" and three.cycles == 3 * 4 * 300 * 0.5


def test_no_estimate_exceeds_the_peak_at_its_clock():
    busy = StreamLoop(iteration_cycles=512.0, matrix_cycles=512.0, issue_cycles=40.0)
    clock = ClockModel(2.2, -0.9, 1.3, 2.4, "test line", True)
    e = estimate(loop=busy, clock=clock, grid_ctas=132, overheads=TileOverheads(0.0, True, 0.0))
    assert e.matrix_utilisation == pytest.approx(1.0) and e.clock_ghz == pytest.approx(1.3)
    assert e.share_of_datasheet_peak == pytest.approx(1.3 / 1.83)
    slow = estimate(loop=StreamLoop(2048.0, 512.0, 40.0), clock=clock)
    assert slow.clock_ghz > e.clock_ghz and slow.share_of_datasheet_peak <= slow.clock_ghz / 1.83
