"""A directory of candidate files as a batch user meets them: mostly good, a few that hang, crash or are broken.

Used by tests/test_eval_batch.py and benchmarks/batch_speed.py, so the benchmark measures the test's batch.
The good files are knob variants of the small test kernels (distinct compiles, as an LLM's variants are);
the hanging ones spin in `launch`; the crashing ones declare sm90 but use a gfx950-only instruction, which
makes stock Triton 3.6.0's LLVM abort; the invalid ones do not parse (refused by the policy check before they run) or declare no contract.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from pathlib import Path

KERNELS = Path(__file__).resolve().parent / "kernels"

GFX950_KNOBS = [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "num_warps": 4}
                for m, n, k in itertools.product((64, 128), (64, 128), (32, 64))]
SM90_KNOBS = [{"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": 64, "num_warps": 4}
              for m, n in itertools.product((64, 128), (64, 128))]

HANG = '''"""Never returns from launch: the batch must kill it at its own time limit and go on."""
TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 64)]


def launch(a, b, c):
    while True:
        pass
'''

SYNTAX_ERROR = '''"""Does not parse."""
TARGET = "gfx950"
DTYPE = "float16"
SHAPES = [(256, 256, 64)]

def launch(a, b, c)
    return None
'''

NO_CONTRACT = '''"""Declares nothing of the kernel contract."""


def helper(x):
    return x
'''


def _with_knobs(source: str, knobs: dict) -> str:
    return re.sub(r"^KNOBS = .*$", f"KNOBS = {knobs!r}", source, count=1, flags=re.MULTILINE)


def _crashing_source() -> str:
    """The gfx950-only direct-to-LDS kernel, made into a contract file that declares sm90."""
    source = (KERNELS / "foreign_wrong_target.py").read_text().replace('TARGET = "gfx950"', 'TARGET = "sm90"')
    return source + '''
DTYPE = "float16"
SHAPES = [(256, 256, 128)]


def launch(a, b, c):
    matmul(a, b)
'''


def write_batch_dir(folder: Path, ok: int = 24, hanging: int = 2, crashing: int = 2) -> Counter:
    """Write `ok` good files, `hanging` + `crashing` bad ones and two invalid ones into `folder`; return the
    status count a batch should report for them."""
    folder.mkdir(parents=True, exist_ok=True)
    gfx950 = (KERNELS / "small_gfx950.py").read_text()
    sm90 = (KERNELS / "small_sm90.py").read_text()
    variants = [(gfx950, k) for k in GFX950_KNOBS] + [(sm90, k) for k in SM90_KNOBS]
    for n in range(ok):
        source, knobs = variants[n % len(variants)]
        (folder / f"cand_{n:02d}.py").write_text(_with_knobs(source, knobs))
    for n in range(hanging):
        (folder / f"hang_{n}.py").write_text(HANG)
    for n in range(crashing):
        (folder / f"crash_{n}.py").write_text(_crashing_source())
    (folder / "invalid_syntax.py").write_text(SYNTAX_ERROR)
    (folder / "invalid_contract.py").write_text(NO_CONTRACT)
    return Counter({"ok": ok, "timeout": hanging, "crashed": crashing, "syntax_error": 1, "contract_error": 1})
