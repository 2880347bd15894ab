"""Other people's files through the scorer: judged by what they do, reaching what they need, failing with a
reason and a line, scored a folder at a time (fixtures: tests/kernels/foreign_batch/, foreign_utils/)."""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest
import triton
from conftest import ROOT, TEST_KERNELS
from triton.experimental.gluon import language as gl

from evaluator.batch import ScoreOptions, plan_batch, summary_table
from evaluator.containment import ContainmentError
from evaluator.errors import EXIT_CANDIDATE, EXIT_USAGE, CallError, UsageError
from evaluator.foreign import compile_foreign, guess_entry, host_functions, parse_arg, parse_env
from evaluator.manifest import read_manifest
from evaluator.policy import check_policy, check_source
from evaluator.report import batch_registers, format_record
from evaluator.targets import get_target

BATCH = TEST_KERNELS / "foreign_batch"
UTILS = TEST_KERNELS / "foreign_utils"


def nearpeak(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent.cli", *args], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=timeout)


def line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


# -- 1. judged by what it does ------------------------------------------------------------------------------

def test_harmless_imports_and_a_guarded_native_branch_pass_the_foreign_policy():
    assert check_policy(BATCH / "stage_outside_import.py", foreign=True) == []  # os, argparse, pytest, triton._C
    assert check_policy(BATCH / "starts_a_process.py", foreign=True) == []      # judged when it runs instead
    strict = {v.rule for v in check_policy(BATCH / "stage_outside_import.py")}
    assert {"process_network_ffi", "import_not_allowed"} <= strict               # a contract candidate could not
    for source in ("import evaluator.runtime\n", "from agent import loop\n", "import tests.conftest\n"):
        assert [v.rule for v in check_source(source, foreign=True)] == ["evaluator_access"], source
    assert [v.rule for v in check_source("def f(:\n", foreign=True)] == ["syntax_error"]


def test_a_process_started_by_the_file_is_refused_at_its_line_even_when_caught():
    path = str(BATCH / "starts_a_process.py")
    with pytest.raises(ContainmentError) as caught:
        compile_foreign(path, "double", [parse_arg("x=1024:fp32")], get_target("sm90"))
    err = caught.value
    assert err.status == "policy_violation" and err.violation.rule == "process_network_ffi"
    assert err.line == line_of(BATCH / "starts_a_process.py", 'os.system("true")')
    assert "starts a process (os.system)" in err.message


def test_triton_compiling_a_kernel_is_not_the_file_starting_a_process():
    """ptxas runs as a subprocess of Triton's own code while the file's kernel compiles for sm90: allowed."""
    (launch,) = compile_foreign(str(BATCH / "scheduler_arg.py"), "matmul",
                                [parse_arg(a) for a in ("a=256x128:fp16", "b=128x256:fp16", "schedule=@Swizzled")],
                                get_target("sm90")).launches
    assert [k.name for k in launch.kernels] == ["matmul_kernel"]
    assert launch.kernels[0].constants.get("GROUP") == 8 or 8 in launch.kernels[0].constants.values()


# -- 2. and 3. what the file needs: folders, environment, its own objects ----------------------------------

def test_object_arguments_and_their_errors():
    spec = parse_arg("schedule=@Swizzled")
    assert spec.symbol == "Swizzled" and not spec.is_tensor
    with pytest.raises(UsageError, match="'@' names one module-level object"):
        parse_arg("schedule=@not.a.name")
    with pytest.raises(CallError, match=r"no module-level 'Grouped'.*RowMajor, Swizzled, matmul, matmul_kernel"):
        compile_foreign(str(BATCH / "scheduler_arg.py"), "matmul",
                        [parse_arg(a) for a in ("a=256x128:fp16", "b=128x256:fp16", "schedule=@Grouped")],
                        get_target("sm90"))
    assert parse_env(["TILE_MNK=64,64,32", "EMPTY="]) == {"TILE_MNK": "64,64,32", "EMPTY": ""}
    for bad, message in ((["nope"], "expected NAME=VALUE"), (["A=1", "A=2"], "--env given twice")):
        with pytest.raises(UsageError, match=message):
            parse_env(bad)


@pytest.mark.slow  # sandboxed compiles
def test_an_outside_helper_and_a_shell_variable_reach_the_file_and_the_record():
    stage = str(BATCH / "stage_outside_import.py")
    base = ("eval", stage, "--target", "gfx950", "--entry", "matmul", "--arg", "a=256x128:fp16",
            "--arg", "b=128x256:fp16", "--json")
    without = nearpeak(*base)
    record = json.loads(without.stdout)
    assert record["status"] == "import_error" and "No module named 'outside_helpers'" in record["message"]
    assert "--path DIR" in record["message"]
    no_env = json.loads(nearpeak(*base, "--path", str(UTILS)).stdout)
    assert no_env["status"] == "entry_error" and "TILE_MNK" in no_env["message"]
    out = nearpeak(*base, "--path", str(UTILS), "--env", "TILE_MNK=64,64,32")
    assert out.returncode == 0, out.stdout + out.stderr
    record = json.loads(out.stdout)
    assert record["status"] == "ok" and record["static"]["kernel"] == "matmul_kernel"
    assert record["import_paths"] == [str(UTILS.resolve())] and record["env"] == {"TILE_MNK": "64,64,32"}
    assert record["kernel_provenance"]["own_kernels"] == {"matmul_kernel": 1}
    assert record["kernel_provenance"]["judged"] is False
    shown = nearpeak(*base[:-1], "--path", str(UTILS), "--env", "TILE_MNK=64,64,32")
    assert "import folders: " + str(UTILS.resolve()) in shown.stdout and "environment: TILE_MNK=64,64,32" in shown.stdout


def test_path_and_env_without_entry_are_usage_errors_for_one_file():
    out = nearpeak("eval", str(TEST_KERNELS / "small_gfx950.py"), "--env", "A=1")
    assert out.returncode == EXIT_USAGE and "--env does not apply without --entry" in out.stderr


# -- 4. errors that say where and why ---------------------------------------------------------------------

NEWER_GLUON_MISSING = not hasattr(gl, "constexpr_function")   # Triton 3.9 has it: the fixture is not newer there


@pytest.mark.skipif(not NEWER_GLUON_MISSING, reason="the installed Triton has gl.constexpr_function")
def test_a_version_mismatch_is_named_at_its_line():
    name = "newer_gluon.py"
    with pytest.raises(Exception) as caught:
        compile_foreign(str(BATCH / name), "fill", [parse_arg("c=1024:fp16")], get_target("gfx950"))
    err = caught.value
    assert err.status == "import_error"
    assert (f"is not in the installed Triton {triton.__version__}: the file may be written for another Triton version"
            in err.message)
    assert err.line == line_of(BATCH / name, "@gl.constexpr_function")


def test_a_launch_option_the_installed_triton_lacks_is_named_at_the_launch_line():
    path = TEST_KERNELS / "foreign_version" / "fork_launch_option.py"
    with pytest.raises(Exception) as caught:
        compile_foreign(str(path), "fill", [parse_arg("c=1024:fp16")], get_target("gfx950"))
    err = caught.value
    assert err.status == "compile_error"
    assert (f"not_a_launch_option_anywhere is neither a parameter of the kernel nor a launch option of the installed "
            f"Triton {triton.__version__}: the file may be written for another Triton version" in err.message)
    assert err.line == line_of(path, "not_a_launch_option_anywhere=")


LAYOUT = TEST_KERNELS / "foreign_layout" / "k_contiguous_b.py"


@pytest.mark.slow  # two sandboxed compiles
def test_a_compile_error_says_how_the_matrices_were_stored_and_the_authors_layout_compiles():
    base = ("eval", str(LAYOUT), "--target", "gfx950", "--entry", "matmul", "--arg", "a=128x256:fp16", "--json")
    row_major = json.loads(nearpeak(*base, "--arg", "b=256x128:fp16").stdout)
    assert row_major["status"] == "compile_error"
    assert row_major["argument_layouts"] == ["a 128x256 float16 row-major", "b 256x128 float16 row-major"]
    # the located reason replaced the child's message, and the storage is said after it either way
    assert "; arguments as passed: a 128x256 float16 row-major, b 256x128 float16 row-major (" in row_major["message"]
    assert "NAME=KxN:dtype:T" in row_major["message"]
    assert row_major["entry"] == "matmul" and row_major["args"] == ["a=128x256:fp16", "b=256x128:fp16"]  # reproducible
    column_major = json.loads(nearpeak(*base, "--arg", "b=256x128:fp16:T").stdout)
    assert column_major["status"] == "ok", column_major["message"]
    assert column_major["static"]["kernel"] == "tile_product"


def test_the_layout_hint_names_a_one_element_load_and_stays_out_of_other_records():
    from evaluator.foreign import layout_hint, matrix_layouts

    specs = [parse_arg("a=64x32:fp16"), parse_arg("b=32x64:bf16:T"), parse_arg("bias=64:fp32"), parse_arg("n=3")]
    assert matrix_layouts(specs) == ["a 64x32 float16 row-major", "b 32x64 bfloat16 column-major (:T)"]
    narrow = layout_hint("the load can only be vectorized to 1 element(s) (16 bits)", matrix_layouts(specs))
    assert "vectorize to one element" in narrow and "`torch.randn(N, K).T`" in narrow
    translation = layout_hint("LLVM Translation failed for operation: builtin.unrealized_conversion_cast",
                              matrix_layouts(specs))
    assert translation.startswith("; arguments as passed: a 64x32") and "vectorize to one element" not in translation
    assert layout_hint("async_copy_global_to_shared has been removed", matrix_layouts(specs)) == ""  # an API error
    assert layout_hint("cannot lower 'x'", matrix_layouts([parse_arg("x=1024:fp32")])) == ""


def test_an_api_the_installed_triton_removed_is_named_as_a_version_mismatch():
    from evaluator.errors import CompileFailure
    from evaluator.foreign import explained

    err = explained(CompileFailure("compile error: async_copy_global_to_shared has been removed; call async_load "
                                   "instead", file="f.py", line=555), at_import=False)
    assert err.message.endswith(f"; the installed Triton {triton.__version__} no longer has "
                                "async_copy_global_to_shared: the file is written for an older Triton version")


def test_an_unused_cuda_tensor_at_import_is_left_out_and_listed():
    run = compile_foreign(str(BATCH / "cuda_at_import.py"), "copy", [parse_arg("x=1024:fp32")], get_target("gfx950"))
    assert [k.name for k in run.launches[0].kernels] == ["copy_kernel"]
    (skipped,) = run.skipped_at_import
    assert (skipped.line, skipped.cause, skipped.defines) == (
        line_of(BATCH / "cuda_at_import.py", 'device="cuda"'), "no_gpu", ("WORKSPACE",))
    assert "Torch not compiled with CUDA enabled" in skipped.reason


# -- 5. a folder of mixed files -----------------------------------------------------------------------------

def test_entries_are_guessed_only_from_exactly_one_launching_host_function():
    assert guess_entry(BATCH / "stage_outside_import.py")[0] == "matmul"  # test_matmul is pytest's, not a host
    assert guess_entry(BATCH / "cuda_at_import.py")[0] == "copy"
    entry, why = guess_entry(BATCH / "two_hosts.py")
    assert entry is None and "2 host functions launch a kernel (double, halve)" in why
    assert host_functions("def helper(x):\n    return x\n") == []


def test_plan_labels_files_by_path_and_takes_each_files_manifest_entry():
    planned = {f.label: f for f in plan_batch([str(BATCH)], ScoreOptions())}
    assert set(planned) == {"NOTES.md", "cuda_at_import.py", "newer_gluon.py", "scheduler_arg.py",
                            "stage_outside_import.py", "starts_a_process.py", "two_hosts.py"}
    assert planned["NOTES.md"].skipped == "not scored: not a Python file (.md)"
    stage = planned["stage_outside_import.py"].options
    assert stage.entry == "matmul" and stage.entry_note.startswith("entry guessed")
    assert stage.target == "gfx950" and stage.env == {"TILE_MNK": "64,64,32"}
    assert stage.import_paths == (str(UTILS.resolve()),)
    assert planned["scheduler_arg.py"].options.target == "sm90"  # the file's entry over the manifest's default
    assert "double, halve" in planned["two_hosts.py"].failed


def test_manifest_mistakes_are_usage_errors(tmp_path):
    (tmp_path / "k.py").write_text("")
    for text, message in (('[files."k.py"]\nentyr = "matmul"\n', "unknown key"),
                          ('[files."missing.py"]\nentry = "matmul"\n', "no such file"),
                          ('[files."k.py"]\nargs = 3\n', "args must be a list of strings"),
                          ("target = \n", "not valid TOML")):
        manifest = tmp_path / "nearpeak-manifest.toml"
        manifest.write_text(text)
        with pytest.raises(UsageError, match=message):
            read_manifest(manifest)
    as_json = tmp_path / "m.json"
    as_json.write_text(json.dumps({"target": "sm90", "files": {"k.py": {"entry": "f", "args": ["x=4:fp32"]}}}))
    entry = read_manifest(as_json).entry_for(tmp_path / "k.py")
    assert (entry.entry, entry.args, entry.target) == ("f", ("x=4:fp32",), "sm90")


@pytest.mark.slow  # seven files through the sandbox
def test_a_folder_of_mixed_files_reports_every_failure_with_line_and_reason(tmp_path):
    out_file = tmp_path / "out.jsonl"
    out = nearpeak("eval", str(BATCH), "--jobs", "2", "--jsonl", str(out_file))
    assert out.returncode == 0, out.stderr
    records = {r["label"]: r for r in map(json.loads, out_file.read_text().splitlines())}
    assert {k: r["status"] for k, r in records.items()} == {
        "NOTES.md": "skipped", "cuda_at_import.py": "ok", "newer_gluon.py": "import_error" if NEWER_GLUON_MISSING else "ok",
        "scheduler_arg.py": "ok", "stage_outside_import.py": "ok", "starts_a_process.py": "policy_violation",
        "two_hosts.py": "call_error"}
    assert records["starts_a_process.py"]["policy"]["violations"][0]["rule"] == "process_network_ffi"
    assert [(s["line"], s["cause"]) for s in records["cuda_at_import.py"]["skipped_at_import"]] == [
        (line_of(BATCH / "cuda_at_import.py", 'device="cuda"'), "no_gpu")]
    summary = out.stdout
    line = line_of(BATCH / "starts_a_process.py", 'os.system("true")')
    assert f"starts_a_process.py:{line}: policy_violation: " in summary
    if NEWER_GLUON_MISSING:
        assert f"newer_gluon.py:{line_of(BATCH / 'newer_gluon.py', '@gl.constexpr_function')}: import_error" in summary
    assert "NOTES.md: not scored: not a Python file (.md)" in summary
    assert re.search(r"\d+ VGPR \+ \d+ AGPR", summary) and "registers/thread" in summary and "est. loop eff." in summary


@pytest.mark.slow
def test_a_batch_where_no_file_scored_exits_non_zero(tmp_path):
    for name in ("two_hosts.py", "NOTES.md", "newer_gluon.py"):
        shutil.copy(BATCH / name, tmp_path / name)
    out = nearpeak("eval", str(tmp_path), "--target", "gfx950")
    assert out.returncode == EXIT_CANDIDATE and "no file scored" in out.stderr
    assert "two_hosts.py: call_error: no --entry given and 2 host functions" in out.stdout


# -- 6. labels -------------------------------------------------------------------------------------------------

def test_registers_say_what_they_add_up_and_efficiency_what_it_is_a_fraction_of():
    assert batch_registers({"registers": 424, "arch_vgprs": 167, "agprs": 256}) == "424 (167 VGPR + 256 AGPR)"
    assert batch_registers({"registers": 154}) == "154"
    text = summary_table([{"file": "/x/a.py", "label": "sub/a.py", "status": "ok", "target": "sm90",
                           "static": {"kernel": "k", "registers": 154, "spills": 0, "occupancy": 1,
                                      "estimated_efficiency": 0.194, "estimated_tflops": 489.7}}])
    assert "sub/a.py" in text and "not a fraction of the GPU's peak" in text and "per thread" in text
    record = {"status": "ok", "file": "a.py", "target": "sm90", "static": {
        "hot_loop": {"instructions": 10, "header": "L", "mma": 2}, "hot_loop_spills": 0,
        "estimated_efficiency": 0.194, "estimate": {"matrix_cycles_per_iteration": 1, "estimated_iteration_cycles": 5,
                                                    "bound": "issue"}}}
    assert "hot-loop efficiency" in format_record(record) and "not of the GPU's peak" in format_record(record)


def test_an_llvm_translation_failure_is_placed_at_the_line_mlir_names():
    """MLIR prints a named value's location as `loc("name"("FILE":LINE:COL))` (gfx950 v3_lds on Triton 3.6.0)."""
    from evaluator.compile import compiler_diagnostic

    kernel = str(BATCH / "scheduler_arg.py")
    stderr = (f'loc("smemB"("{kernel}":39:82)): error: LLVM Translation failed for operation: '
              'builtin.unrealized_conversion_cast\n')
    said = "LLVM Translation failed for operation: builtin.unrealized_conversion_cast"
    assert compiler_diagnostic(stderr, kernel) == (39, said)
    assert compiler_diagnostic(f'loc("{kernel}":12:3): error: bad\n', kernel) == (12, "bad")
    assert compiler_diagnostic('loc("/elsewhere/k.py":12:3): error: bad\n', kernel) is None
