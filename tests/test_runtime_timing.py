"""Timing statistics and the accept rule, on synthetic samples and on CPU launches."""
from __future__ import annotations

import math
import random

import pytest
import torch

from evaluator.runtime import timing


def test_tflops_counts_two_flops_per_multiply_add():
    assert timing.gemm_flops((4096, 4096, 4096)) == 2 * 4096 ** 3
    assert timing.tflops((4096, 4096, 4096), 0.1374) == pytest.approx(1000.3, rel=1e-3)


def test_summary_reports_median_and_interquartile_range():
    s = timing.summarize([5.0, 1.0, 2.0, 4.0, 3.0])
    assert (s.median_ms, s.min_ms, s.max_ms, s.samples) == (3.0, 1.0, 5.0, 5)
    assert s.q1_ms == 2.0 and s.q3_ms == 4.0 and s.iqr_ms == 2.0
    assert s.to_dict()["iqr_ms"] == 2.0


def test_rotation_exceeds_twice_the_cache():
    mib = 2 ** 20
    assert timing.input_set_count(96 * mib, 60 * mib) == 2          # 4096^3 bf16: two sets are 192 MiB
    count = timing.input_set_count(8 * mib, 60 * mib)
    assert count * 8 * mib >= 120 * mib
    assert timing.input_set_count(1024, 256 * mib) == timing.MAX_INPUT_SETS
    assert timing.input_set_count(6 * 2 ** 30, 60 * mib) == 2       # never fewer than two


def synthetic(n, cand_ms, inc_ms, noise, seed=1):
    rng = random.Random(seed)
    return ([cand_ms * (1 + rng.gauss(0, noise)) for _ in range(n)],
            [inc_ms * (1 + rng.gauss(0, noise)) for _ in range(n)])


def test_a_clear_speedup_has_an_interval_above_one():
    cand, inc = synthetic(30, 1.0, 1.2, 0.01)
    speedup, low, high = timing.bootstrap_speedup(cand, inc)
    assert low < speedup < high
    assert speedup == pytest.approx(1.2, rel=0.02) and low > 1.15


def test_equal_kernels_give_an_interval_that_contains_one():
    cand, inc = synthetic(30, 1.0, 1.0, 0.02)
    _, low, high = timing.bootstrap_speedup(cand, inc)
    assert low < 1.0 < high


def test_noise_widens_the_interval():
    quiet = timing.bootstrap_speedup(*synthetic(30, 1.0, 1.05, 0.005))
    loud = timing.bootstrap_speedup(*synthetic(30, 1.0, 1.05, 0.05))
    assert (loud[2] - loud[1]) > 3 * (quiet[2] - quiet[1])


def test_interval_is_reproducible_for_the_same_samples():
    cand, inc = synthetic(20, 1.0, 1.1, 0.03)
    assert timing.bootstrap_speedup(cand, inc, seed=4) == timing.bootstrap_speedup(cand, inc, seed=4)


def test_bootstrap_needs_paired_rounds():
    with pytest.raises(ValueError):
        timing.bootstrap_speedup([1.0], [1.0])


@pytest.fixture(scope="module")
def matrices():
    # One thread: on a busy 2-core CI machine, waking torch's thread pool costs more than a small product.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    gen = torch.Generator().manual_seed(0)
    yield torch.randn(128, 128, generator=gen), torch.randn(512, 512, generator=gen)
    torch.set_num_threads(threads)


def test_compare_accepts_a_candidate_doing_a_sixty_fourth_of_the_work(matrices):
    small, big = matrices
    result = timing.compare_interleaved(lambda i: small @ small, lambda i: big @ big, "cpu", rounds=12,
                                        calls_per_round=5, min_gain=0.05)
    assert result["accepted"] and result["ci_low"] > 1.05, result
    assert len(result["samples"]["candidate_ms"]) == 12 and "bootstrap" in result["method"]


def test_compare_rejects_a_candidate_that_is_the_incumbent(matrices):
    small, _ = matrices
    result = timing.compare_interleaved(lambda i: small @ small, lambda i: small @ small, "cpu", rounds=8,
                                        calls_per_round=4, min_gain=0.05)
    assert not result["accepted"]


def test_compare_rejects_a_slower_candidate(matrices):
    small, big = matrices
    result = timing.compare_interleaved(lambda i: big @ big, lambda i: small @ small, "cpu", rounds=8,
                                        calls_per_round=4)
    assert result["speedup"] < 1 and not result["accepted"]


def test_time_calls_interleaves_and_returns_one_time_per_call():
    seen = []
    times = timing.time_calls(timing.Timer("cpu"), {"x": lambda i: seen.append(("x", i)),
                                                     "y": lambda i: seen.append(("y", i))}, reps=4, warmup=1)
    assert len(times["x"]) == len(times["y"]) == 4
    timed = seen[2:]  # after one warm-up call each
    assert timed[:4] == [("x", 0), ("y", 0), ("y", 1), ("x", 1)]


def vendor_spec(dtype, out_dtype, scales=None):
    from evaluator.contract import KernelSpec

    return KernelSpec(path="cpu-test", target="sm90", dtype=dtype, out_dtype=out_dtype, shapes=((64, 32, 128),),
                      shape_multiple=(1, 1, 1), scales=scales)


def vendor_args(spec):
    from evaluator.runtime import correctness as corr

    return corr.make_arguments(spec, (64, 32, 128), "cpu", corr.generator_for("cpu", 1))


def test_vendor_gemm_is_torch_matmul_on_a_times_b_transposed():
    spec = vendor_spec("bfloat16", "bfloat16")
    args = vendor_args(spec)
    call, name = timing.vendor_call(spec, args)
    assert name == "torch.matmul"
    assert torch.equal(call(), torch.matmul(args["a"], args["b"].T))


def test_vendor_gemm_for_fp8_is_scaled_mm_with_the_kernel_scales():
    spec = vendor_spec("float8_e4m3fn", "bfloat16", scales="per_tensor")
    args = vendor_args(spec)
    call, name = timing.vendor_call(spec, args)
    assert name.startswith("torch._scaled_mm")
    expected = (args["a"].float() @ args["b"].float().T) * args["a_scale"] * args["b_scale"]
    got = call().float()
    assert torch.linalg.vector_norm(got - expected) / torch.linalg.vector_norm(expected) < 1e-2


def test_no_vendor_baseline_for_mxfp4_says_why():
    spec = vendor_spec("float4_e2m1", "bfloat16", scales="e8m0_k32")
    call, why = timing.vendor_call(spec, vendor_args(spec))
    assert call is None and "MXFP4" in why


def test_the_ab_interval_covers_an_aa_at_its_nominal_rate():
    """Simulated A/A experiments (both sides the same, noise and drift per round): a 95% interval of 20 rounds
    must cover 1.0 in about 95% of them (here 95.3%; the percentile bootstrap alone, 94.3%)."""
    rng = random.Random(7)
    covered = 0
    trials = 300
    for trial in range(trials):
        drift = [rng.gauss(0, 0.02) for _ in range(20)]  # both sides of a round share its drift
        cand = [1.0 * math.exp(d + rng.gauss(0, 0.003)) for d in drift]
        inc = [1.0 * math.exp(d + rng.gauss(0, 0.003)) for d in drift]
        _, low, high = timing.bootstrap_speedup(cand, inc, seed=trial, resamples=400)
        covered += low <= 1.0 <= high
    assert covered / trials >= 0.93, covered / trials
