"""evaluator.policy: each rule catches its shortcut, names the line, and lets honest kernels through."""
from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from evaluator.policy import RULES, check_policy, check_source, describe

ROOT = Path(__file__).resolve().parents[1]


def rules(source: str) -> list[str]:
    return [v.rule for v in check_source(textwrap.dedent(source))]


@pytest.mark.parametrize(("source", "rule"), [
    ("import torch\ndef launch(a, b, c):\n    torch.mm(a, b.t(), out=c)\n", "vendor_gemm"),
    ("import torch\ndef launch(a, b, c):\n    c.copy_(torch.bmm(a[None], b.t()[None])[0])\n", "vendor_gemm"),
    ("def launch(a, b, c):\n    c.copy_(a.matmul(b.t()))\n", "vendor_gemm"),
    ("def launch(a, b, c):\n    c.copy_(a @ b.t())\n", "vendor_gemm"),
    ("def launch(a, b, c):\n    x = a\n    x @= b\n", "vendor_gemm"),
    ("import torch\ndef launch(a, b, c):\n    torch.einsum('mk,nk->mn', a, b)\n", "vendor_gemm"),
    ("from torch import matmul\n", "vendor_gemm"),
    ("from torch.nn.functional import linear\n", "vendor_gemm"),
    ("import torch\nf = torch.ops.aten.mm.default\n", "vendor_gemm"),
    ("import torch\nx = torch._scaled_mm\n", "vendor_gemm"),
    ("import hipblaslt\n", "vendor_gemm"),
    ("import os\n", "process_network_ffi"),
    ("import subprocess as sp\n", "process_network_ffi"),
    ("from multiprocessing import Pool\n", "process_network_ffi"),
    ("import socket\n", "process_network_ffi"),
    ("import ctypes\n", "process_network_ffi"),
    ("import cffi\n", "process_network_ffi"),
    ("import requests\n", "process_network_ffi"),
    ("from http import client\n", "process_network_ffi"),
    ("from torch.utils.cpp_extension import load_inline\n", "process_network_ffi"),
    ("from torch.utils import cpp_extension\n", "process_network_ffi"),
    ("import torch.multiprocessing\n", "process_network_ffi"),
    ("import triton\nx = triton._C.libtriton\n", "process_network_ffi"),
    ("import evaluator\n", "evaluator_access"),
    ("from agent import loop\n", "evaluator_access"),
    ("import sys\n", "evaluator_access"),
    ("import time\n", "evaluator_access"),
    ("import random\n", "evaluator_access"),
    ("import numpy.random\n", "evaluator_access"),
    ("import torch\ntorch.cuda.Event = object\n", "timer_patch"),
    ("import triton\ntriton.testing.do_bench = lambda fn: 0.001\n", "timer_patch"),
    ("import torch\nev = torch.cuda.Event\nev.record = None\n", "timer_patch"),
    ("import torch\nsetattr(torch.cuda, 'synchronize', lambda: None)\n", "timer_patch"),
    ("import torch\ntorch.manual_seed(0)\n", "rng_seeding"),
    ("import torch\ntorch.cuda.manual_seed_all(1)\n", "rng_seeding"),
    ("import torch\ntorch.randn = lambda *s, **k: torch.zeros(*s, **k)\n", "rng_seeding"),
    ("def launch(a, b, c):\n    open('/tmp/answer.bin', 'rb')\n", "file_io"),
    ("def launch(a, b, c):\n    open('../evaluator/api.py', 'a')\n", "file_io"),
    ("def launch(a, b, c):\n    name = 'x'\n    open(name)\n", "file_io"),
    ("import torch\ndef launch(a, b, c):\n    c.copy_(torch.load('c.pt'))\n", "file_io"),
    ("import torch\ntorch.allclose = lambda *a, **k: True\n", "monkeypatch"),
    ("import torch\ntorch.backends.cuda.matmul.allow_tf32 = True\n", "monkeypatch"),
    ("import triton.language as tl\ntl.float32.name = 'x'\n", "monkeypatch"),
    ("import torch\ndel torch.testing\n", "monkeypatch"),
    ("exec('import os')\n", "dynamic_code"),
    ("m = __import__('os')\n", "dynamic_code"),
    ("import torch\nname = 'mat' + 'mul'\nf = getattr(torch, name)\n", "dynamic_code"),
    ("def launch(a, b, c):\n    launch.__globals__['x'] = 1\n", "dynamic_code"),
    ("from torch import *\n", "dynamic_code"),
    ("import numpy\n", "import_not_allowed"),
    ("from . import helper\n", "import_not_allowed"),
    ("def launch(a, b, c)\n", "syntax_error"),
])
def test_rule_catches(source, rule):
    assert rule in RULES
    assert rule in rules(source), check_source(source)


@pytest.mark.parametrize("source", [
    # The matrix-multiply operator inside a JIT function is Triton's tl.dot sugar, not the vendor library.
    "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x, y):\n    return x @ y\n",
    "import triton\nimport triton.language as tl\n@triton.jit\ndef k(x, y, acc):\n    return tl.dot(x, y, acc)\n",
    ("from triton.experimental import gluon\nfrom triton.experimental.gluon import language as gl\n"
     "@gluon.jit\ndef k(a_ptr, BLOCK: gl.constexpr):\n    x = gl.load(a_ptr)\n"),
    "from triton.experimental.gluon.language.nvidia.hopper import warpgroup_mma, tma\n",
    "from triton.experimental.gluon.language.amd.cdna4 import mfma\n",
    "from __future__ import annotations\nimport math\nimport functools\nimport typing\nimport dataclasses\n",
    "import torch\ndef launch(a, b, c):\n    n = torch.cuda.get_device_properties(a.device).multi_processor_count\n",
    "def launch(a, b, c):\n    open('notes.txt', 'w').write('scratch is fine')\n",
    "class Cfg:\n    pass\ncfg = Cfg()\ncfg.block = 128\n",
    "import torch\nDT = {'bfloat16': torch.bfloat16}\nx = DT['bfloat16']\n",
])
def test_allowed(source):
    assert check_source(source) == []


def test_violation_names_rule_line_and_source():
    source = "import torch\n\n\ndef launch(a, b, c):\n    torch.matmul(a, b.t(), out=c)\n"
    (violation,) = check_source(source)
    assert (violation.rule, violation.line) == ("vendor_gemm", 5)
    assert violation.source_line == "torch.matmul(a, b.t(), out=c)"
    assert str(violation).startswith("line 5: [vendor_gemm]")
    assert describe([violation, violation]).endswith("(+1 more)")


def test_violations_come_in_line_order_once_per_rule_and_line():
    found = check_source("import os\nimport torch\nos.system('x'); os.fork()\ntorch.mm(1, 2)\n")
    assert [(v.line, v.rule) for v in found] == [(1, "process_network_ffi"), (3, "process_network_ffi"),
                                                  (4, "vendor_gemm")]


def test_import_alias_is_followed():
    assert rules("import torch.nn.functional as Fn\ny = Fn.linear\n") == ["vendor_gemm"]
    assert rules("from torch import cuda as c\nc.Event.elapsed_time = None\n") == ["timer_patch"]


@pytest.mark.parametrize("path", sorted(str(p.relative_to(ROOT)) for p in (ROOT / "kernels").rglob("*.py")))
def test_every_reference_kernel_passes(path):
    assert check_policy(ROOT / path) == []


def test_honest_adversarial_kernels_pass():
    for name in ("honest_sm90", "honest_gfx950"):
        assert check_policy(ROOT / "tests" / "adversarial" / "candidates" / f"{name}.py") == []


FOREIGN_TUTORIAL = """
import importlib
import os
import sys
import time

import torch
import triton
common = importlib.import_module("05-common")

def matmul(a, b):
    if os.environ.get("VERBOSE"):
        print(time.time(), sys.argv)
    return torch.matmul(a, b)
"""


def test_a_foreign_file_is_judged_by_what_it_does_not_by_its_names():
    """Scored as written (--entry): siblings, importlib, os, even torch.matmul and the names of process and FFI
    modules pass the source check (evaluator.containment judges what runs); the scorer's packages do not."""
    assert check_source(FOREIGN_TUTORIAL, foreign=True) == []
    assert "vendor_gemm" in {v.rule for v in check_source(FOREIGN_TUTORIAL)}  # a candidate could not do this
    for named in ("import subprocess\n", "import socket\n", "import os\nos.system('x')\n", "import ctypes\n",
                  "if False:\n    from triton._C.libtriton import nvidia\n"):
        assert check_source(named, foreign=True) == [], named
        assert {v.rule for v in check_source(named)} == {"process_network_ffi"}, named
    for escape in ("import evaluator.runtime\n", "from agent import loop\n"):
        assert [v.rule for v in check_source(escape, foreign=True)] == ["evaluator_access"], escape


def test_foreign_fixtures_of_the_scorer_pass_the_foreign_policy():
    for path in sorted((ROOT / "tests" / "kernels").glob("foreign_*.py")):
        assert check_policy(path, foreign=True) == [], path.name
    # refused when it runs instead (tests/test_foreign_files.py, the adversarial case)
    assert check_policy(ROOT / "tests" / "adversarial" / "candidates" / "foreign_forbidden_import.py", foreign=True) == []
