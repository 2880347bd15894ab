"""A foreign host function that allocates on the GPU by name compiles on a CPU: each such allocation is made
on `meta` while the entry runs, and listed with its line (fixtures: tests/kernels/foreign_gpu_by_name/)."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, TEST_KERNELS

from evaluator.errors import NearpeakError
from evaluator.foreign import compile_foreign, parse_arg
from evaluator.meta_device import MetaLog, gpu_device, on_meta
from evaluator.report import format_record
from evaluator.stages import evaluate_foreign
from evaluator.targets import get_target

FOLDER = TEST_KERNELS / "foreign_gpu_by_name"
HOST = FOLDER / "host_allocs.py"


def line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize("entry, marker, call, device", [
    ("empty_on_cuda", 'device="cuda"))', "torch.empty(device='cuda')", "cuda"),
    ("zeros_on_cuda0", 'device="cuda:0"', "torch.zeros(device='cuda:0')", "cuda:0"),
    ("on_a_torch_device", "device=gpu", "torch.empty_like(device=torch.device('cuda'))", "cuda"),
    ("made_here_then_cuda", ".cuda()", "Tensor.cuda()", "cuda"),
    ("made_here_then_to_cuda", '.to("cuda")', "Tensor.to('cuda')", "cuda"),
])
def test_each_way_of_allocating_on_the_gpu_by_name_compiles_on_meta_and_is_listed(entry, marker, call, device):
    run = compile_foreign(str(HOST), entry, [parse_arg("x=4096:fp32")], get_target("sm90"))
    (launch,) = run.launches
    assert [k.name for k in launch.kernels] == ["copy_kernel"] and launch.kernels[0].grid[0] == 16
    (moved,) = run.meta_allocations
    assert (moved.line, moved.call, moved.device, moved.sibling) == (line_of(HOST, marker), call, device, None)
    assert marker in moved.statement


def test_a_host_guard_on_is_cuda_passes_for_the_meta_inputs_and_is_listed():
    run = compile_foreign(str(HOST), "asserts_gpu_inputs", [parse_arg("x=4096:fp32")], get_target("sm90"))
    (launch,) = run.launches
    assert [k.name for k in launch.kernels] == ["copy_kernel"]
    (answered,) = run.meta_allocations
    assert answered.line == line_of(HOST, "assert x.is_cuda") and answered.call.startswith("Tensor.is_cuda")
    meta = torch.empty(4, device="meta")
    with on_meta(MetaLog(str(HOST), (FOLDER,))):
        assert meta.is_cuda is False            # asked from here (not the file's own code): the truth
    assert meta.is_cuda is False


def test_a_sibling_that_allocates_by_name_is_named_with_the_files_line():
    run = compile_foreign(str(HOST), "through_a_helper", [parse_arg("x=4096:fp32")], get_target("sm90"))
    (moved,) = run.meta_allocations
    helper_line = line_of(FOLDER / "output_helpers.py", 'device="cuda"')
    assert moved.line == line_of(HOST, "output_on_gpu(x))") and moved.sibling == f"output_helpers.py:{helper_line}"


def test_reading_a_value_back_still_fails_and_says_what_was_put_on_meta():
    with pytest.raises(NearpeakError) as caught:
        compile_foreign(str(HOST), "reads_the_result", [parse_arg("x=4096:fp32")], get_target("sm90"))
    err = caught.value
    assert err.status == "entry_error" and err.line == line_of(HOST, "y.sum().item()")
    assert "reads tensor data in its host code" in err.message
    assert f"line {line_of(HOST, 'y = _copy_into')}: torch.empty(device='cuda')" in err.message
    [record] = evaluate_foreign(str(HOST), "reads_the_result", ["x=4096:fp32"], "sm90")
    assert record["status"] == "entry_error" and record["meta_allocations"][0]["call"] == "torch.empty(device='cuda')"


def test_only_while_the_entry_runs():
    compile_foreign(str(HOST), "empty_on_cuda", [parse_arg("x=4096:fp32")], get_target("sm90"))
    with pytest.raises((RuntimeError, AssertionError), match="CUDA"):  # this torch has no CUDA: restored
        torch.empty(4, device="cuda")
    log = MetaLog(str(HOST), (FOLDER,))
    with on_meta(log):  # outside the file's code: rewritten, but no line of the file to name
        assert torch.ones(2, device="cuda:0").device.type == "meta"
        assert torch.ones(2).to(torch.float16).device.type == "cpu"  # a dtype is no device
    assert [(a.line, a.call) for a in log.allocations] == [(None, "torch.ones(device='cuda:0')")]


def test_which_values_name_a_gpu():
    assert [gpu_device(v) for v in ("cuda", "cuda:1", torch.device("cuda", 0), 0, "cpu", "meta", True,
                                    torch.float16, "float16")] == ["cuda", "cuda:1", "cuda:0", "cuda:0", None,
                                                                     None, None, None, None]


def test_the_record_and_its_text_list_the_allocations_put_on_meta():
    [record] = evaluate_foreign(str(HOST), "made_here_then_to_cuda", ["x=4096:fp32"], "sm90")
    assert record["status"] == "ok"
    assert record["meta_allocations"] == [{"line": line_of(HOST, '.to("cuda")'), "call": "Tensor.to('cuda')",
                                           "device": "cuda", "sibling": None,
                                           "statement": 'y = torch.zeros(x.shape, dtype=x.dtype).to("cuda")'}]
    assert f"allocated on meta instead of cuda: line {line_of(HOST, '.to(')}" in format_record(record)


@pytest.mark.slow
def test_the_sandboxed_cli_record_keeps_them():
    done = subprocess.run([sys.executable, "-m", "agent.cli", "eval", str(HOST), "--target", "sm90", "--entry",
                           "empty_on_cuda", "--arg", "x=4096:fp32", "--json"], capture_output=True, text=True,
                          cwd=ROOT, check=False, timeout=900)
    assert done.returncode == 0, done.stderr
    record = json.loads(done.stdout.splitlines()[-1])
    assert record["status"] == "ok" and record["meta_allocations"][0]["line"] == line_of(HOST, 'device="cuda"))')
