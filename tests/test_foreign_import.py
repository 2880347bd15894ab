"""A foreign file imported statement by statement: module-level demos that cannot run without a GPU are left
out and listed, real errors are not (fixtures: tests/kernels/foreign_lenient/)."""
from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest
from conftest import ROOT, TEST_KERNELS

from evaluator.compile import compile_only
from evaluator.containment import ContainmentError
from evaluator.errors import NearpeakError
from evaluator.foreign import compile_foreign, parse_arg
from evaluator.foreign_import import bound_names, import_leniently
from evaluator.targets import get_target

LENIENT = TEST_KERNELS / "foreign_lenient"
BATCH = TEST_KERNELS / "foreign_batch"


def line_of(path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_a_demo_at_import_is_left_out_statement_by_statement_and_the_rest_is_defined():
    path = LENIENT / "demo_at_import.py"
    with compile_only(get_target("sm90")):
        module, skipped = import_leniently(path)
    got = [(s.line, s.cause) for s in skipped]
    assert got == [(line_of(path, "if torch.allclose"), "tensor_data"),
                   (line_of(path, 'WORKSPACE = torch.empty'), "no_gpu"),
                   (line_of(path, 'print(f"workspace'), "skipped_name"),
                   (line_of(path, "report([1, 2, 3])"), "missing_module")]
    assert "nearpeak_absent_plotting_package" in skipped[3].reason
    assert module.HALF == 0.5 and callable(module.double) and module.y.device.type == "meta"  # after and before
    assert module.__doc__.startswith("A tutorial-shaped file")
    assert skipped[1].to_dict()["why"].startswith("it needs a GPU")


def test_the_entry_of_a_file_with_a_demo_scores_and_the_record_lists_what_was_left_out():
    run = compile_foreign(str(LENIENT / "demo_at_import.py"), "double", [parse_arg("x=8192:fp32")],
                          get_target("sm90"))
    (launch,) = run.launches
    assert [k.name for k in launch.kernels] == ["double_kernel"] and launch.kernels[0].grid[0] == 32
    assert len(run.skipped_at_import) == 4


@pytest.mark.parametrize("entry, name, said", [
    ("scale", "SCALE", "SCALE is not defined because line {line} (SCALE = torch.ones"),
    ("scale_twice", "@on_gpu_only", "the entry scale_twice is not defined because line {line} (@on_gpu_only)"),
])
def test_what_the_entry_needs_from_a_skipped_statement_is_named_with_that_line(entry, name, said):
    path = LENIENT / "needs_skipped.py"
    line = line_of(path, name)
    with pytest.raises(NearpeakError) as caught:
        compile_foreign(str(path), entry, [parse_arg("x=1024:fp32")], get_target("sm90"))
    assert said.format(line=line) in caught.value.message
    assert "it needs a GPU" in caught.value.message


def test_a_real_mistake_at_import_still_fails_at_its_line():
    path = LENIENT / "real_error_at_import.py"
    with pytest.raises(NearpeakError) as caught:
        compile_foreign(str(path), "noop", [parse_arg("x=256:fp32")], get_target("sm90"))
    err = caught.value
    assert err.status == "import_error" and "KeyError" in err.message
    assert err.line == line_of(path, 'CONFIGS["BLOCK_M"]')


def test_imports_are_never_skipped_and_refusals_are_never_skipped(tmp_path):
    missing = tmp_path / "imports_missing.py"
    missing.write_text("import torch\nimport nearpeak_absent_package\n\ndef f(x):\n    return x\n")
    with pytest.raises(NearpeakError) as caught:
        compile_foreign(str(missing), "f", [parse_arg("x=4:fp32")], get_target("sm90"))
    assert caught.value.status == "import_error" and caught.value.line == 2
    refused = tmp_path / "refused_at_import.py"
    refused.write_text('import os\nimport torch\ntry:\n    os.system("true")\nexcept Exception:\n    pass\n'
                       "x = torch.empty(4, device='cuda')\n\ndef f(x):\n    return x\n")
    with pytest.raises(ContainmentError) as refusal:
        compile_foreign(str(refused), "f", [parse_arg("x=4:fp32")], get_target("sm90"))
    assert refusal.value.line == 4


def test_bound_names_follow_blocks_but_not_function_bodies():
    tree = ast.parse("if ok:\n    A = 1\n    def g():\n        inner = 2\nelse:\n    for i, (B, C) in x:\n"
                     "        pass\n")
    assert bound_names(tree.body[0]) == ("A", "g", "i", "B", "C")


@pytest.mark.slow  # the sandboxed CLI
def test_the_cli_record_and_text_show_the_skipped_statements():
    base = ("eval", str(LENIENT / "demo_at_import.py"), "--target", "sm90", "--entry", "double",
            "--arg", "x=8192:fp32")
    out = subprocess.run([sys.executable, "-m", "agent.cli", *base, "--json"], capture_output=True, text=True,
                         cwd=ROOT, check=False, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    record = json.loads(out.stdout)
    assert record["status"] == "ok"
    assert [s["cause"] for s in record["skipped_at_import"]] == ["tensor_data", "no_gpu", "skipped_name",
                                                                 "missing_module"]
    text = subprocess.run([sys.executable, "-m", "agent.cli", *base], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=600).stdout
    line = line_of(LENIENT / "demo_at_import.py", "if torch.allclose")
    assert f"skipped at import: line {line} (if torch.allclose(y, 2 * x):): it reads tensor values" in text
