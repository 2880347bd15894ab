"""The correctness machinery on CPU tensors: an honest CPU launch passes, each kind of broken one fails."""
from __future__ import annotations

import pytest
import torch

from evaluator.contract import KernelSpec
from evaluator.lowp import dequantize_mxfp4
from evaluator.runtime import correctness as corr


def spec(dtype="bfloat16", out_dtype="bfloat16", multiple=(1, 1, 1), scales=None, shape=(192, 160, 256)):
    return KernelSpec(path="cpu-test", target="sm90", dtype=dtype, out_dtype=out_dtype, shapes=(shape,),
                      shape_multiple=multiple, scales=scales)


def product(a, b, a_scale=None, b_scale=None):
    out = a.float() @ b.float().T
    if a_scale is not None:
        out = out * a_scale * b_scale
    return out


def honest(a, b, c, **scales):
    c.copy_(product(a, b, **scales).to(c.dtype))


def check(launch, s, shapes=None, seed=7):
    return corr.check_correctness(launch, s, shapes or [s.benchmark_shape, (64, 96, 128)], {}, "cpu", seed)


# ---------------------------------------------------------------------------------------------
# Tolerances


def test_tolerance_adds_accumulation_and_output_rounding_terms():
    assert corr.tolerance_for("bfloat16", "bfloat16") == pytest.approx(1e-4 + 8e-3)
    assert corr.tolerance_for("float8_e4m3fn", "bfloat16") == pytest.approx(1e-2 + 8e-3)
    assert corr.tolerance_for("float4_e2m1", "float16") == pytest.approx(1e-3 + 2e-3)


def test_each_low_precision_format_has_its_own_entry():
    for dtype in ("float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "float4_e2m1"):
        assert dtype in corr.ACCUMULATION_TOLERANCE
    assert corr.tolerance_for("float16", "float16") < corr.tolerance_for("bfloat16", "bfloat16")
    assert corr.tolerance_for("float8_e4m3fn", "float8_e4m3fn") < corr.tolerance_for("float8_e5m2", "float8_e5m2")


def test_unknown_dtype_has_no_tolerance():
    with pytest.raises(ValueError):
        corr.tolerance_for("int8", "bfloat16")


@pytest.mark.parametrize("out_dtype", ["float16", "bfloat16", "float32", "float8_e4m3fn", "float8_e5m2"])
def test_rounding_to_the_output_dtype_stays_inside_its_tolerance(out_dtype):
    report = check(honest, spec(dtype="float8_e4m3fn", out_dtype=out_dtype, shape=(256, 256, 1024)))
    assert report.ok, report.verdict


# ---------------------------------------------------------------------------------------------
# Shapes


def test_shapes_are_benchmark_small_and_held_out_without_duplicates():
    s = spec(multiple=(16, 16, 32), shape=(1024, 1024, 2048))
    shapes = corr.correctness_shapes(s, seed=3)
    assert shapes[0] == (1024, 1024, 2048)
    assert shapes[1] == (256, 256, 512)
    assert len(shapes) == 3 and all(s.supports(x) for x in shapes)
    held_out = shapes[2]
    assert held_out[0] % 128 and held_out[1] % 128  # off the usual tile when the multiple allows it


def test_held_out_shape_depends_on_the_seed():
    assert len({corr.held_out_shape((1, 1, 1), seed) for seed in range(20)}) > 10


def test_coarse_multiples_get_whole_tiles_only():
    shape = corr.held_out_shape((256, 256, 64), seed=11)
    assert shape[0] % 256 == 0 and shape[1] % 256 == 0 and shape[2] % 64 == 0


def test_verdicts_never_name_the_held_out_dimensions():
    s = spec(multiple=(16, 16, 32), shape=(256, 256, 256))
    shapes = corr.correctness_shapes(s, seed=5)
    held_out = corr.held_out_shape(s.shape_multiple, 5)
    dims = "x".join(map(str, held_out))
    passed = corr.check_correctness(honest, s, shapes, {}, "cpu", 5, held_out=held_out)
    assert passed.ok and "held-out shape" in passed.verdict and dims not in passed.verdict
    assert [c.held_out for c in passed.checks] == [False, False, True]  # the record still says which it was

    def wrong_off_tile(a, b, c):  # right on tile multiples, wrong on the held-out shape's ragged edge
        honest(a, b, c)
        if c.shape[0] % 128:
            c[-1, -1] += 100.0

    failed = corr.check_correctness(wrong_off_tile, s, shapes, {}, "cpu", 5, held_out=held_out)
    assert not failed.ok and failed.verdict.startswith("held-out shape:") and dims not in failed.verdict


# ---------------------------------------------------------------------------------------------
# Inputs


def test_inputs_are_random_nonzero_and_reproducible_from_the_seed():
    s = spec()
    first = corr.make_arguments(s, (64, 64, 64), "cpu", corr.generator_for("cpu", 5))
    again = corr.make_arguments(s, (64, 64, 64), "cpu", corr.generator_for("cpu", 5))
    other = corr.make_arguments(s, (64, 64, 64), "cpu", corr.generator_for("cpu", 6))
    assert torch.equal(first["a"], again["a"]) and not torch.equal(first["a"], other["a"])
    assert (first["a"] != 0).float().mean() > 0.99
    assert torch.isnan(first["c"].float()).all()  # poisoned from the start


def test_per_tensor_scales_are_drawn_away_from_one():
    s = spec(dtype="float8_e4m3fn", scales="per_tensor")
    args = corr.make_arguments(s, (32, 32, 64), "cpu", corr.generator_for("cpu", 1))
    assert args["a"].dtype == torch.float8_e4m3fn
    assert 0.5 <= float(args["a_scale"]) < 2.0 and float(args["a_scale"]) != float(args["b_scale"])


def test_snapshot_sees_a_single_changed_byte():
    args = corr.make_arguments(spec(), (16, 16, 32), "cpu", corr.generator_for("cpu", 2))
    snap = corr.snapshot_inputs(args)
    assert corr.modified_inputs(args, snap) == []
    args["b"].view(torch.uint8)[3, 5] ^= 1
    assert corr.modified_inputs(args, snap) == ["b"]


# ---------------------------------------------------------------------------------------------
# Honest and broken launches


def test_honest_cpu_launch_passes_every_shape():
    report = check(honest, spec())
    assert report.ok, report.verdict
    assert all(c.rel_error < c.tolerance for c in report.checks)
    assert report.verdict.startswith("correct on 192x160x256")


def test_partial_write_is_reported_as_unwritten_with_its_first_element():
    def partial(a, b, c):
        c[:, :-3].copy_(product(a, b)[:, :-3].to(c.dtype))

    report = check(partial, spec())
    bad = report.first_failure
    assert not report.ok and bad.reason == "unwritten"
    assert bad.worst_index == (0, 157) and bad.bad_elements == 192 * 3
    assert "192x160x256" in report.verdict


def test_wrong_result_names_the_shape_and_the_largest_error():
    def transposed_b(a, b, c):
        c.copy_((a.float() @ b.float()[:, : a.shape[1]].T).to(c.dtype) * 1.05)

    report = check(transposed_b, spec())
    bad = report.first_failure
    assert bad.reason == "wrong_result" and bad.rel_error > bad.tolerance
    assert "(row" in report.verdict and "col" in report.verdict


def test_one_wrong_element_fails_even_when_the_norm_passes():
    def one_off(a, b, c):
        honest(a, b, c)
        c[17, 33] += 4.0

    bad = check(one_off, spec()).first_failure
    assert bad is not None and bad.reason == "wrong_result" and bad.worst_index == (17, 33)
    assert bad.rel_error <= bad.tolerance


def test_nan_output_never_passes():
    def nan_in_corner(a, b, c):
        honest(a, b, c)
        c[-1, -1] = float("nan")

    assert check(nan_in_corner, spec()).first_failure.reason == "unwritten"


def test_infinite_output_never_passes():
    def inf(a, b, c):
        honest(a, b, c)
        c[2, 3] = float("inf")

    bad = check(inf, spec()).first_failure
    assert bad.reason == "non_finite" and bad.worst_index == (2, 3)


def test_input_mutation_is_caught():
    def mutate(a, b, c):
        honest(a, b, c)
        a[0, 0] += 1.0

    bad = check(mutate, spec()).first_failure
    assert bad.reason == "inputs_modified" and "a" in bad.detail


def test_cheaper_fp8_approximation_of_a_bf16_gemm_fails():
    def fp8_shortcut(a, b, c):
        c.copy_((a.to(torch.float8_e4m3fn).float() @ b.to(torch.float8_e4m3fn).float().T).to(c.dtype))

    assert check(fp8_shortcut, spec()).first_failure.reason == "wrong_result"


def test_skipping_the_last_k_block_fails():
    def short_k(a, b, c):
        k = a.shape[1] - 32
        c.copy_((a[:, :k].float() @ b[:, :k].float().T).to(c.dtype))

    assert check(short_k, spec()).first_failure.reason == "wrong_result"


def test_ignoring_per_tensor_scales_fails():
    s = spec(dtype="float8_e4m3fn", scales="per_tensor")
    assert check(honest, s).ok

    def no_scales(a, b, c, a_scale, b_scale):
        c.copy_(product(a, b).to(c.dtype))

    assert check(no_scales, s).first_failure.reason == "wrong_result"


def test_mxfp4_reference_dequantizes_e2m1_with_e8m0_scales():
    s = spec(dtype="float4_e2m1", scales="e8m0_k32", multiple=(32, 32, 64), shape=(128, 96, 256))

    def mx(a, b, c, a_scale, b_scale):
        c.copy_((dequantize_mxfp4(a, a_scale) @ dequantize_mxfp4(b, b_scale).T).to(c.dtype))

    assert check(mx, s, shapes=[(128, 96, 256)]).ok

    def swapped_nibbles(a, b, c, a_scale, b_scale):
        a_swapped = (a >> 4) | (a << 4)
        c.copy_((dequantize_mxfp4(a_swapped, a_scale) @ dequantize_mxfp4(b, b_scale).T).to(c.dtype))

    assert check(swapped_nibbles, s, shapes=[(128, 96, 256)]).first_failure.reason == "wrong_result"


def test_a_raising_launch_propagates_for_the_caller_to_classify():
    def boom(a, b, c):
        raise RuntimeError("CUDA error: an illegal memory access was encountered")

    with pytest.raises(RuntimeError, match="illegal memory access"):
        check(boom, spec())
