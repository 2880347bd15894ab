"""`nearpeak eval` / `python -m evaluator` as users meet them: tables, JSON, dumps and every error path."""
from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, TEST_KERNELS

from agent.cli import main
from evaluator import SCHEMA_VERSION
from evaluator.compile import compiler_diagnostic, last_compiler_message
from evaluator.errors import EXIT_CANDIDATE, EXIT_USAGE, UsageError
from evaluator.foreign import compile_foreign, parse_arg, parse_args
from evaluator.targets import get_target

pytestmark = pytest.mark.slow  # compiles dozens of kernels, each in a sandboxed child process


def nearpeak(*args: str) -> subprocess.CompletedProcess:
    """`nearpeak ARGS` run in this process from the repository root, its output captured.

    In-process, every test shares one interpreter's imports and one warm sandbox worker (each evaluation still
    runs in a child forked from it); a fresh interpreter per test would import torch twice each time.
    `scorer` below keeps one real `python -m evaluator` process.
    """
    out, err = io.StringIO(), io.StringIO()
    here, argv = os.getcwd(), sys.argv
    os.chdir(ROOT)
    sys.argv = ["nearpeak", *args]  # what a real process would see (the --json parse-error hook reads it)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as exc:  # argparse refusing the command line
                code = exc.code if isinstance(exc.code, int) else EXIT_USAGE
    finally:
        os.chdir(here)
        sys.argv = argv
    return subprocess.CompletedProcess(["nearpeak", *args], code, out.getvalue(), err.getvalue())


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
    as_json = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--shape", "12,x", "--json")
    record = json.loads(as_json.stdout)
    assert as_json.returncode == EXIT_USAGE and record["status"] == "usage_error" and "M,N,K" in record["message"]


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
    (["--entry", "matmul", "--arg", "a=4x4"], "a tensor needs a dtype"),
    (["--entry", "matmul", "--arg", "a=4x4:float99", "--arg", "b=4x4:float16"], "unknown dtype 'float99'; valid names"),
])
def test_foreign_kernel_argument_errors(args, message):
    out = nearpeak("eval", str(TEST_KERNELS / "foreign_tutorial_style.py"), "--target", "gfx950", *args)
    assert out.returncode == EXIT_USAGE and message in out.stderr and "Traceback" not in out.stderr


def line_of(path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def foreign(name: str, entry: str, *args: str) -> subprocess.CompletedProcess:
    return nearpeak("eval", str(TEST_KERNELS / name), "--entry", entry, *args)


def records_of(out: subprocess.CompletedProcess) -> list[dict]:
    return [json.loads(line) for line in out.stdout.splitlines()]


def test_tutorial_file_that_asks_the_driver_at_import_compiles_for_both_targets():
    for target in ("gfx950", "sm90"):
        out = foreign("foreign_driver_query.py", "matmul", "--target", target, "--arg", "a=256x128:fp16",
                      "--arg", "b=128x256:fp16", "--json")
        assert out.returncode == 0, out.stderr
        (record,) = records_of(out)
        assert record["status"] == "ok" and record["static"]["kernel"] == "matmul_kernel"
        assert record["static"]["matrix_instructions"] > 0


def test_sibling_module_and_numbered_lesson_are_importable():
    out = foreign("foreign_sibling.py", "gemm", "--arg", "a=256x128:fp16", "--arg", "b=256x128:fp16",
                  "--target", "gfx950", "--json")
    assert out.returncode == 0, out.stderr
    (record,) = records_of(out)
    assert record["static"]["kernel"] == "gemm_kernel" and record["static"]["mfma_count"] > 0


def test_autotuned_kernel_gives_one_record_per_config():
    out = foreign("foreign_autotune.py", "matmul", "--arg", "a=256x256:fp16", "--arg", "b=256x256:fp16",
                  "--target", "gfx950", "--json")
    assert out.returncode == 0, out.stderr
    records = records_of(out)
    assert [r["config"]["index"] for r in records] == [0, 1, 2]
    assert all(r["config"]["count"] == 3 for r in records)
    tiles = [(r["config"]["choices"][0]["values"]["BLOCK_M"], r["config"]["choices"][0]["values"]["num_warps"])
             for r in records]
    assert tiles == [(64, 4), (128, 4), (128, 8)]
    assert [r["static"]["num_warps"] for r in records] == [4, 4, 8]  # each config really reached the compiler
    grids = [r["static"]["grid"] for r in records]
    assert grids == [[4, 4, 1], [2, 4, 1], [2, 2, 1]]


def test_config_picks_one_and_an_index_past_the_list_is_a_usage_error():
    args = ("--arg", "a=256x256:fp16", "--arg", "b=256x256:fp16", "--target", "gfx950", "--json")
    out = foreign("foreign_autotune.py", "matmul", "--config", "2", *args)
    (record,) = records_of(out)
    assert out.returncode == 0 and record["config"]["index"] == 2 and record["static"]["num_warps"] == 8
    out = foreign("foreign_autotune.py", "matmul", "--config", "3", *args)
    (record,) = records_of(out)
    assert out.returncode == EXIT_USAGE and record["status"] == "usage_error" and "3 configs (0..2)" in record["message"]


def test_float_bool_tuple_and_string_arguments_reach_the_kernel():
    out = foreign("foreign_args.py", "matmul", "--target", "gfx950", "--arg", "a=256x128:fp16",
                  "--arg", "b=256x128:half", "--arg", "alpha=0.5", "--arg", "relu=true", "--arg", "tiles=(64, 128, 32)",
                  "--arg", "out=bf16", "--json")
    assert out.returncode == 0, out.stderr
    (record,) = records_of(out)
    assert record["static"]["grid"] == [4, 2, 1]  # BLOCK_N=128 from the tuple


def test_wrapper_assert_is_a_contract_error_at_its_line():
    out = foreign("foreign_args.py", "matmul", "--target", "gfx950", "--arg", "a=256x96:fp16", "--arg",
                  "b=256x96:fp16", "--arg", "tiles=(64,64,64)", "--json")
    (record,) = records_of(out)
    assert out.returncode == EXIT_CANDIDATE and record["status"] == "contract_error"
    assert record["line"] == line_of(TEST_KERNELS / "foreign_args.py", "assert K % block_k == 0")
    assert "K=96 must be a multiple of BLOCK_K=64" in record["message"]


def test_wrong_call_of_the_entry_is_a_call_error_with_its_signature():
    out = foreign("foreign_args.py", "matmul", "--target", "gfx950", "--arg", "a=256x96:fp16", "--arg",
                  "bee=256x96:fp16")
    assert out.returncode == EXIT_USAGE and "Traceback" not in out.stderr
    assert "call_error" in out.stderr and "matmul(a, b, alpha: float = 1.0, relu: bool = False" in out.stderr
    assert "missing a required argument: 'b'" in out.stderr


def test_compile_error_points_at_the_innermost_line_of_the_file():
    out = foreign("foreign_nested_error.py", "fill", "--target", "gfx950", "--arg", "c=128x64:fp16", "--json")
    (record,) = records_of(out)
    assert record["status"] == "compile_error" and "power of 2" in record["message"]
    assert record["line"] == line_of(TEST_KERNELS / "foreign_nested_error.py", "ROWS + 3")


def test_wrong_target_is_said_first_and_the_pass_diagnostic_gives_the_line():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--target", "sm90", "--json")
    (record,) = records_of(out)
    assert "declares TARGET gfx950 but is compiled for sm90" in out.stderr.splitlines()[0]
    assert record["status"] == "compile_error" and "threads per warp" in record["message"]
    assert record["line"] == line_of(TEST_KERNELS / "small_gfx950.py", "rows = gl.program_id(0)")
    assert record["note"].startswith(str(TEST_KERNELS / "small_gfx950.py"))


def test_compiler_abort_becomes_a_crashed_record_and_json_is_still_printed():
    out = foreign("foreign_wrong_target.py", "matmul", "--arg", "a=256x128:fp16", "--arg", "b=256x128:fp16",
                  "--target", "sm90", "--json")
    (record,) = records_of(out)
    assert out.returncode == EXIT_CANDIDATE and record["status"] == "crashed"
    assert "SIGABRT" in record["message"] and "LLVM ERROR" in record["message"]
    assert "declares TARGET gfx950" in out.stderr
    # Its own TARGET is the default target of --entry, and there it compiles.
    own = foreign("foreign_wrong_target.py", "matmul", "--arg", "a=256x128:fp16", "--arg", "b=256x128:fp16", "--json")
    assert own.returncode == 0 and records_of(own)[0]["target"] == "gfx950"


@pytest.mark.parametrize("args, message", [
    (["--entry", "matmul", "--run"], "--run does not apply with --entry"),
    (["--entry", "matmul", "--shape", "64,64,64", "--knob", "BLOCK_K=64"], "--shape, --knob do not apply"),
    (["--entry", "matmul", "--profile"], "--profile does not apply with --entry"),
    (["--profile"], "--profile needs --run"),
    (["--config", "1"], "--config does not apply without --entry"),
    (["--arg", "a=1"], "--arg does not apply without --entry"),
    (["--resume"], "--resume needs --jsonl"),
    (["--jsonl", "out.jsonl", "--dump", "d"], "--dump does not apply to batch scoring"),
])
def test_flags_that_do_not_apply_to_the_mode_are_usage_errors(args, message):
    out = nearpeak("eval", str(TEST_KERNELS / "foreign_args.py"), *args)
    assert out.returncode == EXIT_USAGE and message in out.stderr and "Traceback" not in out.stderr


def test_policy_violation_is_reported_before_anything_runs():
    cheat = ROOT / "tests" / "adversarial" / "candidates" / "policy_matmul_in_launch.py"
    out = nearpeak("eval", str(cheat), "--json")
    record = json.loads(out.stdout)
    assert out.returncode == EXIT_CANDIDATE and record["status"] == "policy_violation"
    assert record["line"] and "vendor_gemm" in record["message"] and "static" not in record


@pytest.mark.parametrize("text, expected", [
    ("n=7", 7), ("x=-3", -3), ("alpha=1.5", 1.5), ("relu=true", True), ("relu=False", False),
    ("tiles=(128, 64)", (128, 64)), ("mode=persistent", "persistent"), ("name='fp16'", "fp16"),
])
def test_plain_argument_values(text, expected):
    spec = parse_arg(text)
    assert not spec.is_tensor and spec.value == expected and type(spec.value) is type(expected)


@pytest.mark.parametrize("alias, torch_name", [
    ("fp16", "float16"), ("half", "float16"), ("float16", "float16"), ("bf16", "bfloat16"), ("fp32", "float32"),
    ("fp8e4m3", "float8_e4m3fn"), ("fp8e5m2", "float8_e5m2"), ("i8", "int8"),
])
def test_dtype_short_names_and_transposed_tensors(alias, torch_name):
    spec = parse_arg(f"b=64x32:{alias}:T")
    tensor = spec.build()
    assert spec.dtype == torch_name and str(tensor.dtype) == f"torch.{torch_name}"
    assert tuple(tensor.shape) == (64, 32) and tensor.stride() == (1, 64) and tensor.device.type == "meta"


def test_unknown_dtype_lists_the_valid_names_and_repeats_are_refused():
    with pytest.raises(UsageError) as err:
        parse_arg("a=4x4:fp17")
    for name in ("fp16", "bf16", "fp32", "fp8e4m3", "fp8e5m2", "half", "float8_e4m3fn"):
        assert name in err.value.message
    with pytest.raises(UsageError, match="given twice for a"):
        parse_args(["a=1", "a=2"])


def test_float_and_bool_arguments_reach_the_kernel_signature():
    (launch,) = compile_foreign(str(TEST_KERNELS / "foreign_args.py"), "matmul",
                                parse_args(["a=256x128:fp16", "b=256x128:fp16", "alpha=0.5", "relu=True", "out=bf16"]),
                                get_target("gfx950")).launches
    kernel = launch.kernels[0]
    assert kernel.signature["alpha"] == "fp32" and kernel.signature["c_ptr"] == "*bf16"
    assert True in kernel.constants.values() and not launch.configs


def test_torch_capability_queries_are_answered_for_the_target():
    for target in ("sm90", "gfx950"):
        out = foreign("foreign_cuda_query.py", "scale", "--target", target, "--arg", "x=1024:fp32", "--json")
        (record,) = records_of(out)
        assert out.returncode == 0, out.stderr
        assert record["static"]["grid"] == [4, 1, 1]  # capability >= (9, 0): the 256-wide block


@pytest.mark.skipif(torch.cuda.is_available(), reason="torch.cuda.synchronize() works where CUDA is built in")
def test_assert_raised_inside_a_library_is_an_entry_error_not_a_contract_error():
    out = foreign("foreign_cuda_query.py", "scale_and_wait", "--target", "sm90", "--arg", "x=1024:fp32", "--json")
    (record,) = records_of(out)
    assert record["status"] == "entry_error" and "AssertionError" in record["message"]
    assert record["line"] == line_of(TEST_KERNELS / "foreign_cuda_query.py", "torch.cuda.synchronize()")


def test_pass_diagnostic_of_the_candidate_is_found_in_stderr(tmp_path):
    kernel = tmp_path / "k.py"
    kernel.write_text("")
    stderr = (f"{tmp_path}/other.py:3:1: error: not this one\n"
              f"{kernel}:21:53: error: Result has an invalid layout: #ttg.slice<...>.\n"
              "Layout has 64 threads per warp, but the module specifies 32 threads per warp.\n"
              "    rows = gl.arange(0, BLOCK_M)\n"
              "                ^\n")
    line, message = compiler_diagnostic(stderr, str(kernel))
    assert line == 21 and message.startswith("Result has an invalid layout")
    assert message.endswith("the module specifies 32 threads per warp.")
    assert compiler_diagnostic("RuntimeError: error encountered during parsing\n", str(kernel)) is None


def test_last_compiler_message_prefers_the_llvm_error_line():
    stderr = ("some warning\nLLVM ERROR: amdg.buffer_load_to_local created with unregistered dialect.\n"
              "PLEASE submit a bug report\n")
    assert last_compiler_message(stderr).startswith("LLVM ERROR: amdg.buffer_load_to_local")
    assert last_compiler_message("") is None
