"""evaluator.provenance: which code computed. Traced on meta tensors, as the static stage does on any CPU."""
from __future__ import annotations

import torch
from conftest import TEST_KERNELS

from evaluator import provenance
from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.targets import get_target


def meta(*shape):
    return torch.empty(*shape, device="meta", dtype=torch.bfloat16)


def test_views_allocations_and_fills_are_not_compute():
    trace = provenance.Trace(__file__)  # this file plays the candidate
    a, b = meta(64, 32), meta(48, 32)
    with provenance.recording(trace):
        a.t().view(32, 64).unsqueeze(0)
        b[:16].permute(1, 0)
        torch.zeros(4, 4, device="meta").fill_(1.0)
        a.new_empty(8).zero_()
    assert trace.ok and {"t", "view", "permute", "zeros", "fill_", "zero_"} <= set(trace.operators)


def test_a_gemm_by_any_other_name_is_foreign_compute_at_its_line():
    trace = provenance.Trace(__file__)
    a, b = meta(64, 32), meta(48, 32)
    with provenance.recording(trace):
        line = torch.nn.functional.conv1d(a.t().unsqueeze(0), b.unsqueeze(-1)) is not None and 32
        alias = [torch][0]
        alias.einsum("mk,nk->mn", a, b)
    names = [f.name for f in trace.foreign]
    assert not trace.ok and names[0] == "aten.convolution" and "aten.bmm" in names
    assert trace.foreign[0].line == line and trace.foreign[0].kind == "torch_operator"
    err = trace.error()
    assert err.status == "foreign_compute" and f"line {line}" in err.message and "(+" in err.message


def test_operators_the_candidate_did_not_issue_are_not_its_fault():
    trace = provenance.Trace("/somewhere/else/candidate.py")
    with provenance.recording(trace):
        torch.nn.functional.conv1d(meta(1, 32, 64), meta(48, 32, 1))  # the evaluator's own work, say
    assert trace.ok


def test_a_kernel_defined_in_another_file_is_foreign():
    module, spec = load_candidate(str(TEST_KERNELS / "small_sm90.py"))
    trace = provenance.Trace(__file__)
    with provenance.recording(trace):
        compile_candidate(module, spec, get_target("sm90"))
    assert [(f.kind, f.name) for f in trace.foreign] == [("triton_kernel", "small_wgmma")]
    assert "small_sm90.py" in trace.error().message


def test_the_candidates_own_kernels_and_constant_fills_may_run_on_the_device():
    module, _ = load_candidate(str(TEST_KERNELS / "small_sm90.py"))
    trace = provenance.Trace(str(TEST_KERNELS / "small_sm90.py"))
    trace.declare_module(module)
    assert trace.own_names == {"small_wgmma"}
    fill = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<int>>(...)"
    trace.check_device_kernels(["small_wgmma", fill, "Memset (Device)"])
    assert trace.ok
    trace.check_device_kernels(["sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"])
    assert not trace.ok and trace.foreign[0].kind == "device_kernel"
    check = provenance.kernel_check(trace, None)
    assert check["name"] == "provenance" and not check["ok"] and check["reason"] == "foreign_compute"


def test_guard_records_every_call_and_costs_little():
    import time

    trace = provenance.Trace(__file__)
    calls = []
    guarded = provenance.guard(lambda x: calls.append(x), trace)
    guarded(1)
    started = time.perf_counter()
    for i in range(2000):
        guarded(i)
    per_call_us = (time.perf_counter() - started) / 2000 * 1e6
    assert len(calls) == 2001 and trace.ok
    assert per_call_us < 200  # a few microseconds on an idle core; generous for a loaded CI machine
