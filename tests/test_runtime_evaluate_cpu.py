"""runtime_evaluate end to end with the CPU standing in for the GPU.

Device detection is pointed at the CPU (the record's device says so), and the candidates are small
contract files whose `launch` computes on CPU tensors: an honest one and cheats that each defense must
catch. Everything else - input sets, poison, references, timing, vendor interleaving, defenses, the
record - is the code that runs on the H200.
"""
from __future__ import annotations

import json
import textwrap

import pytest
import torch

from evaluator import provenance
from evaluator.request import EvalRequest
from evaluator.runtime import evaluate
from evaluator.runtime.device import DeviceInfo

HEADER = '''
import torch
TARGET = "sm90"
DTYPE = "bfloat16"
OUT_DTYPE = "bfloat16"
SHAPES = [(256, 192, 128)]
SHAPE_MULTIPLE = (64, 64, 32)
KNOBS = {}
'''

HONEST = HEADER + '''
def launch(a, b, c):
    c.copy_((a.float() @ b.float().T).to(c.dtype))
'''

CACHED = HEADER + '''
_seen = {}
def launch(a, b, c):
    key = (a.data_ptr(), tuple(c.shape))
    if key not in _seen:
        _seen[key] = (a.float() @ b.float().T).to(c.dtype)
    c.copy_(_seen[key])
'''

MUTATES_LATER = HEADER + '''
_calls = [0]
def launch(a, b, c):
    _calls[0] += 1
    c.copy_((a.float() @ b.float().T).to(c.dtype))
    if _calls[0] > 5:
        a[0, 0] = 1.0 + a[0, 0]
'''

PATCHES_TIMER = HEADER + '''
import time
_real = time.perf_counter
time.perf_counter = lambda: _real() * 0.5
def launch(a, b, c):
    c.copy_((a.float() @ b.float().T).to(c.dtype))
'''

RAISES = HEADER + '''
def launch(a, b, c):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")
'''


@pytest.fixture
def cpu_device(monkeypatch):
    info = DeviceInfo(target="sm90", name="CPU stand-in", arch="cpu", backend="cuda", index=0, multiprocessors=1,
                      memory_bytes=0, l2_bytes=2 ** 20)
    monkeypatch.setattr(evaluate, "require_device", lambda target: info)
    monkeypatch.setattr(evaluate, "_device", lambda info: torch.device("cpu"))
    monkeypatch.setattr(evaluate, "read_driver_and_clocks", lambda backend, index: (None, {}))
    monkeypatch.setattr(evaluate, "UNTIMED_CHECK_CALLS", 10)
    # The stand-in candidates compute with torch on the CPU, which the provenance trace rightly refuses:
    # trust them here (test_provenance_trace_refuses_a_torch_launch shows the trace at work).
    monkeypatch.setattr(evaluate, "_trace_launches", lambda module, path: provenance.Trace(str(path)))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield info
    torch.set_num_threads(threads)


def run(tmp_path, source: str, **kwargs) -> dict:
    path = tmp_path / "candidate.py"
    path.write_text(textwrap.dedent(source))
    return evaluate.runtime_evaluate(path, EvalRequest(seed=11, **kwargs), timing_budget_s=0.05)


def test_honest_candidate_gets_a_complete_record(tmp_path, cpu_device):
    rec = run(tmp_path, HONEST)
    assert rec["correct"] and rec["status"] == "ok" and rec["verdict"] == "correct", rec["verdict"]
    assert rec["summary"].startswith("correct on 256x192x128") and "TFLOP/s" in rec["summary"]
    assert [s["shape"] for s in rec["shapes"]][:2] == [[256, 192, 128], [256, 256, 512]]
    assert len(rec["shapes"]) == 3 and rec["seed"] == 11
    assert rec["tflops"] > 0 and rec["vendor"] == "torch.matmul" and rec["ratio_vs_vendor"] > 0
    assert rec["pct_of_peak"] == pytest.approx(100 * rec["tflops"] / 989.4)
    assert rec["input_sets"] >= 2 and rec["input_sets"] * 256 * 192 * 2 > 0
    assert {d["name"] for d in rec["defenses"]} == {"timed_outputs", "timed_stream", "stream_order", "fresh_inputs",
                                                    "speed_of_light", "provenance", "integrity"}
    assert all(d["ok"] for d in rec["defenses"]) and rec["health"]["healthy"]
    assert "median" in rec["timing_method"] and rec["spread"]["vendor"]["samples"] >= 20
    assert json.loads(json.dumps(rec))["device"] == "CPU stand-in"


def test_seed_makes_the_held_out_shape_reproducible(tmp_path, cpu_device):
    first = run(tmp_path, HONEST)
    again = run(tmp_path, HONEST)
    assert first["shapes"][2]["shape"] == again["shapes"][2]["shape"]
    assert first["shapes"][2]["rel_error"] == again["shapes"][2]["rel_error"]


def test_result_cached_per_buffer_is_rejected(tmp_path, cpu_device):
    rec = run(tmp_path, CACHED)
    # Caught by whichever check first feeds a known buffer new operands: the rotated timing sets (when the
    # allocator reuses a correctness buffer's address) or the in-place refill after timing.
    assert not rec["correct"] and rec["status"] in ("cached_result", "wrong_result"), rec["verdict"]
    assert "after the timed calls" in rec["verdict"] or "same buffers" in rec["verdict"]


def test_input_mutated_during_timing_is_rejected(tmp_path, cpu_device):
    rec = run(tmp_path, MUTATES_LATER)
    assert rec["status"] == "inputs_modified", rec["verdict"]


def test_timer_patched_at_import_is_rejected(tmp_path, cpu_device):
    import time

    real = time.perf_counter
    try:
        rec = run(tmp_path, PATCHES_TIMER)
    finally:
        time.perf_counter = real
    assert rec["status"] == "tampered" and "time.perf_counter" in rec["verdict"]


def test_a_fault_in_launch_becomes_a_verdict(tmp_path, cpu_device):
    rec = run(tmp_path, RAISES)
    assert rec["status"] == "runtime_fault" and not rec["correct"]
    assert "illegal memory access" in rec["verdict"]


def test_shape_off_the_multiple_is_a_usage_error(tmp_path, cpu_device):
    from evaluator.errors import UsageError

    with pytest.raises(UsageError):
        run(tmp_path, HONEST, shape=(100, 192, 128))


SLOW = HEADER + '''
def launch(a, b, c):
    for _ in range(6):
        c.copy_((a.float() @ b.float().T).to(c.dtype))
'''

FAST_WRONG = HEADER + '''
def launch(a, b, c):
    c.copy_((a[:, :32].float() @ b[:, :32].float().T).to(c.dtype))
'''


def write(tmp_path, name: str, source: str):
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


def test_compare_accepts_a_faster_correct_candidate(tmp_path, cpu_device):
    result = evaluate.compare(write(tmp_path, "fast.py", HONEST), write(tmp_path, "slow.py", SLOW), EvalRequest(min_gain=0.05,
                              seed=2, ab_rounds=8, ab_calls=3))
    assert result["candidate_correct"] and result["accepted"] and result["ci_low"] > 1.05, result
    assert result["shape"] == [256, 192, 128] and result["input_sets"] >= 2


def test_compare_times_the_candidate_against_the_vendor_in_the_same_session(tmp_path, cpu_device):
    fast, slow = write(tmp_path, "fast.py", HONEST), write(tmp_path, "slow.py", SLOW)
    ratios = {}
    for name, (candidate, incumbent) in {"fast": (fast, slow), "slow": (slow, fast)}.items():
        vendor = evaluate.compare(candidate, incumbent, EvalRequest(seed=2, ab_rounds=6, ab_calls=3))["vs_vendor"]
        assert vendor["vendor"] == "torch.matmul" and "candidate/vendor" in vendor["method"]
        assert vendor["ci_low"] <= vendor["ratio"] <= vendor["ci_high"]
        ratios[name] = vendor["ratio"]
    assert ratios["slow"] < ratios["fast"] / 2  # six products per call against one


def test_compare_never_accepts_a_faster_wrong_candidate(tmp_path, cpu_device):
    result = evaluate.compare(write(tmp_path, "wrong.py", FAST_WRONG), write(tmp_path, "slow.py", SLOW), EvalRequest(seed=2,
                              ab_rounds=6, ab_calls=3))
    assert result["speedup"] > 1 and not result["candidate_correct"] and not result["accepted"]
    assert "256x192x128" in result["candidate_verdict"]


def test_compare_runs_the_candidate_defenses(tmp_path, cpu_device):
    result = evaluate.compare(write(tmp_path, "fast.py", HONEST), write(tmp_path, "slow.py", SLOW), EvalRequest(seed=2,
                              ab_rounds=8, ab_calls=3))
    names = [c["name"] for c in result["candidate_defenses"]]
    assert names == ["timed_outputs", "timed_stream", "stream_order", "fresh_inputs", "provenance", "integrity"]
    assert result["candidate_status"] == "ok" and all(c["ok"] for c in result["candidate_defenses"])


def test_provenance_trace_refuses_a_torch_launch(tmp_path, cpu_device, monkeypatch):
    """Without the test's trust, a launch that computes with torch is foreign compute, in eval and in compare."""
    monkeypatch.undo()  # drop the fixture's trusted trace, keep a CPU device
    info = cpu_device
    monkeypatch.setattr(evaluate, "require_device", lambda target: info)
    monkeypatch.setattr(evaluate, "_device", lambda info: torch.device("cpu"))
    monkeypatch.setattr(evaluate, "read_driver_and_clocks", lambda backend, index: (None, {}))
    rec = run(tmp_path, HONEST)
    assert rec["status"] == "foreign_compute" and "aten." in rec["verdict"] and "line 11" in rec["verdict"]
    result = evaluate.compare(write(tmp_path, "fast.py", HONEST), write(tmp_path, "slow.py", SLOW), EvalRequest(seed=2,
                              ab_rounds=8, ab_calls=3))
    assert not result["accepted"] and result["candidate_status"] == "foreign_compute"


def test_rotation_counts_every_output_buffer_a_set_feeds():
    from evaluator.contract import KernelSpec

    shape = (256, 192, 128)
    spec = KernelSpec(path="cpu-test", target="sm90", dtype="bfloat16", out_dtype="bfloat16", shapes=(shape,),
                      shape_multiple=(1, 1, 1))
    sets, one_output = evaluate._rotating_sets(spec, shape, "cpu", 3, cache_bytes=2 ** 20)
    _, two_outputs = evaluate._rotating_sets(spec, shape, "cpu", 3, cache_bytes=2 ** 20, outputs_per_set=2)
    assert one_output == 2 * (256 * 128 + 192 * 128 + 256 * 192)
    assert two_outputs == one_output + 2 * 256 * 192
    assert len(sets) * one_output > 2 * 2 ** 20
    assert not torch.equal(sets[0]["a"], sets[1]["a"])  # each set draws its own operands


@pytest.mark.parametrize(("message", "status"), [
    ("CUDA error: an illegal memory access was encountered", "runtime_fault"),
    ("Triton Error [CUDA]: unspecified launch failure", "runtime_fault"),
    ("HIP error: hipErrorIllegalAddress", "runtime_fault"),
    ("launch() got an unexpected keyword argument 'BLOCK_M'", "launch_error"),
])
def test_launch_exceptions_are_classified_by_the_sandbox_fault_vocabulary(message, status):
    from evaluator.sandbox import GPU_FAULT_PATTERN

    assert evaluate._fault_status(RuntimeError(message)) == status
    assert bool(GPU_FAULT_PATTERN.search(message)) == (status == "runtime_fault")


def test_compare_at_a_problem_times_every_shape_and_pools_them(tmp_path, cpu_device):
    """A run's problem of two weighted shapes: each is timed (never the candidate's own SHAPES), and the
    verdict is one weighted-geometric-mean speedup whose interval holds both."""
    from evaluator.request import Problem

    problem = Problem.of([((128, 128, 64), 3.0), ((256, 192, 128), 1.0)])
    result = evaluate.compare(write(tmp_path, "fast.py", HONEST), write(tmp_path, "slow.py", SLOW),
                              EvalRequest(problem=problem, seed=2, ab_rounds=6, ab_calls=3))
    assert result["shapes"] == [[128, 128, 64], [256, 192, 128]] and result["weights"] == [3.0, 1.0]
    assert [r["shape"] for r in result["per_shape"]] == result["shapes"]
    assert result["ci_low"] <= result["speedup"] <= result["ci_high"] and result["speedup"] > 1
    per = [r["speedup"] for r in result["per_shape"]]
    assert min(per) <= result["speedup"] <= max(per)  # a weighted mean of the two
    assert result["candidate_correct"] and result["timing"] == "eager"
    assert "host_us_per_call" in result["per_shape"][0] and "launch_bound" in result
