"""`nearpeak eval` / `python -m evaluator` as users meet them: tables, JSON, dumps and every error path."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
from conftest import ROOT, TEST_KERNELS

from evaluator import SCHEMA_VERSION
from evaluator.errors import EXIT_CANDIDATE, EXIT_USAGE


def nearpeak(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, cwd=ROOT, check=False,
                          timeout=600)


def scorer(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evaluator", *args], capture_output=True, text=True, cwd=ROOT, check=False,
                          timeout=600)


def test_table_names_the_key_figures():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"))
    assert out.returncode == 0, out.stderr
    for label in ("total VGPRs", "AGPRs", "SGPRs", "LDS", "occupancy", "MFMA instructions", "hot_loop_spills",
                  "STATIC ESTIMATE"):
        assert label in out.stdout


def test_json_record_follows_the_schema():
    out = scorer(str(TEST_KERNELS / "small_sm90.py"), "--json")
    assert out.returncode == 0, out.stderr
    record = json.loads(out.stdout)
    assert record["schema"] == SCHEMA_VERSION and record["status"] == "ok" and record["target"] == "sm90"
    for key in ("registers", "spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "shared_bytes",
                "wgmma_count", "hmma_count", "tma_load_count", "tma_store_count", "cp_async_count",
                "hot_loop", "hot_loop_spills", "estimated_efficiency"):
        assert key in record["static"], key


def test_shape_and_knob_overrides_reach_the_compiler():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--shape", "128,128,64", "--knob", "BLOCK_K=64",
                   "--json")
    record = json.loads(out.stdout)
    assert record["shape"] == [128, 128, 64] and record["knobs"]["BLOCK_K"] == 64
    assert record["static"]["grid"] == [2, 2, 1]


def test_dump_writes_every_stage(tmp_path):
    out = nearpeak("eval", str(TEST_KERNELS / "small_sm90.py"), "--dump", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".llir", ".ptx", ".sass", ".ttgir"]
    assert "HGMMA" in (tmp_path / "small_wgmma.sass").read_text()


@pytest.mark.parametrize("name, status, line", [
    ("compile_error.py", "compile_error", 30),
    ("import_error.py", "import_error", 6),
    ("no_contract.py", "contract_error", None),
    ("compiles_nothing.py", "contract_error", None),
])
def test_candidate_failures_give_a_status_a_line_and_exit_1(name, status, line):
    out = nearpeak("eval", str(TEST_KERNELS / name), "--json")
    assert out.returncode == EXIT_CANDIDATE
    record = json.loads(out.stdout)
    assert record["status"] == status and record["line"] == line
    plain = nearpeak("eval", str(TEST_KERNELS / name))
    assert "Traceback" not in plain.stderr and name in plain.stderr
    if line:
        assert f"{name}:{line}" in plain.stderr


def test_missing_file_is_a_usage_error():
    out = nearpeak("eval", "no/such/kernel.py")
    assert out.returncode == EXIT_USAGE and "no such kernel file" in out.stderr and "Traceback" not in out.stderr


def test_shape_the_kernel_does_not_support_is_a_usage_error():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--shape", "100,100,100")
    assert out.returncode == EXIT_USAGE and "SHAPE_MULTIPLE" in out.stderr


def test_malformed_shape_is_rejected_by_the_parser():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--shape", "12,x")
    assert out.returncode == EXIT_USAGE and "M,N,K" in out.stderr


def test_run_without_a_gpu_says_so_with_its_own_exit_code():
    out = nearpeak("eval", str(TEST_KERNELS / "small_sm90.py"), "--run", "--json")
    record = json.loads(out.stdout)
    assert out.returncode == 3 and record["status"] == "no_device" and "sm90" in record["message"]


def test_foreign_kernel_through_its_own_host_function():
    out = nearpeak("eval", str(TEST_KERNELS / "foreign_tutorial_style.py"), "--target", "gfx950", "--entry", "matmul",
                   "--arg", "a=512x256:float16", "--arg", "b=256x512:float16:T", "--json")
    assert out.returncode == 0, out.stderr
    st = json.loads(out.stdout)["static"]
    assert st["kernel"] == "matmul_kernel" and st["mfma_count"] > 0 and len(st["kernels"]) == 1


@pytest.mark.parametrize("args, message", [
    (["--entry", "nope", "--arg", "a=4x4:float16"], "no function 'nope'"),
    (["--entry", "matmul", "--arg", "a=4x4"], "bad --arg"),
    (["--entry", "matmul", "--arg", "a=4x4:float99", "--arg", "b=4x4:float16"], "unknown torch dtype"),
])
def test_foreign_kernel_argument_errors(args, message):
    out = nearpeak("eval", str(TEST_KERNELS / "foreign_tutorial_style.py"), "--target", "gfx950", *args)
    assert out.returncode in (EXIT_USAGE, EXIT_CANDIDATE) and message in out.stderr and "Traceback" not in out.stderr


def test_policy_violation_is_reported_before_anything_runs():
    cheat = ROOT / "tests" / "adversarial" / "candidates" / "policy_matmul_in_launch.py"
    out = nearpeak("eval", str(cheat), "--json")
    record = json.loads(out.stdout)
    assert out.returncode == EXIT_CANDIDATE and record["status"] == "policy_violation"
    assert record["line"] and "vendor_gemm" in record["message"] and "static" not in record
