"""runtime_evaluate and compare on a real sm90 GPU (marked gpu), and their refusal without one (CPU)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from evaluator.errors import NoDeviceError
from evaluator.runtime import compare, runtime_evaluate

ROOT = Path(__file__).resolve().parents[1]
KERNEL = ROOT / "kernels" / "sm90" / "bf16" / "v00_mma_v2.py"
SHAPE = (2048, 2048, 1024)


def has_sm90() -> bool:
    return torch.cuda.is_available() and not torch.version.hip and torch.cuda.get_device_capability(0) == (9, 0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_runtime_evaluate_without_a_gpu_raises_no_device():
    with pytest.raises(NoDeviceError) as info:
        runtime_evaluate(KERNEL)
    assert info.value.exit_code == 3


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without a GPU")
def test_compare_without_a_gpu_raises_no_device():
    with pytest.raises(NoDeviceError):
        compare(KERNEL, KERNEL)


def variant(tmp_path: Path, old: str, new: str) -> Path:
    """A copy of the v00 kernel with one line changed (a deliberately broken candidate)."""
    source = KERNEL.read_text()
    assert old in source
    path = tmp_path / "variant.py"
    path.write_text(source.replace(old, new))
    return path


@pytest.fixture(scope="module")
def honest_record():
    if not has_sm90():
        pytest.skip("needs an sm90 GPU")
    return runtime_evaluate(KERNEL, shape=SHAPE, seed=1234)


@pytest.mark.gpu
def test_v00_is_correct_and_timed_against_torch(honest_record):
    rec = honest_record
    assert rec["correct"], rec["verdict"]
    assert rec["status"] == "ok" and rec["seed"] == 1234 and len(rec["shapes"]) == 3
    assert all(s["ok"] and s["rel_error"] < s["tolerance"] for s in rec["shapes"])
    assert 1 < rec["tflops"] < rec["peak_tflops"] * 1.1
    assert rec["vendor"] == "torch.matmul" and rec["ratio_vs_vendor"] > 0
    assert rec["spread"]["candidate"]["samples"] >= 20 and "device events" in rec["timing_method"]
    assert all(d["ok"] for d in rec["defenses"]) and rec["health"]["healthy"]
    json.dumps(rec)  # JSON-ready as the sandbox needs


@pytest.mark.gpu
@pytest.mark.skipif(not has_sm90(), reason="needs an sm90 GPU")
def test_a_kernel_that_skips_the_last_row_of_tiles_is_unwritten(tmp_path):
    path = variant(tmp_path, "grid = (triton.cdiv(M, BLOCK_M), triton.cdiv(N, BLOCK_N))",
                   "grid = (triton.cdiv(M, BLOCK_M) - 1, triton.cdiv(N, BLOCK_N))")
    rec = runtime_evaluate(path, shape=SHAPE, seed=5)
    assert not rec["correct"] and rec["status"] == "unwritten"
    assert "2048x2048x1024" in rec["verdict"]


@pytest.mark.gpu
@pytest.mark.skipif(not has_sm90(), reason="needs an sm90 GPU")
def test_a_kernel_that_drops_a_k_step_is_wrong(tmp_path):
    path = variant(tmp_path, "for _k in range(0, K, BLOCK_K):", "for _k in range(0, K - BLOCK_K, BLOCK_K):")
    rec = runtime_evaluate(path, shape=SHAPE, seed=5)
    assert rec["status"] == "wrong_result" and "(row" in rec["verdict"]


@pytest.mark.gpu
@pytest.mark.skipif(not has_sm90(), reason="needs an sm90 GPU")
def test_compare_against_itself_is_not_accepted():
    result = compare(KERNEL, KERNEL, shape=SHAPE, min_gain=0.02, seed=3, rounds=10, calls_per_round=5)
    assert result["candidate_correct"] and not result["accepted"]
    assert result["ci_low"] < 1.02 < result["ci_high"] or result["ci_high"] < 1.02
