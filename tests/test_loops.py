"""The hot loop found in real compiled kernels is the K loop (natural loops from the control-flow graph).

Every reference stage of both ladders, and two team-written Hopper kernels in the style of Triton's Gluon
tutorials (tests/kernels/wgmma_pipelined_sm90.py, wgmma_persistent_sm90.py), is compiled for its target.
"The K loop" is checked against what the TTGIR says independently of the ISA: one iteration of the hot loop
must issue exactly the matrix FLOPs of one iteration of the TTGIR's K loop (per warp or warpgroup, times the
issuing warps); a tile loop must enclose it in persistent kernels; the copies the K loop issues must be in it
(not taken for a prologue); the out-of-line mbarrier retry stubs must serve blocks of the loops they belong to.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import TEST_KERNELS

from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.targets import get_target
from evaluator.targets.amd import amdgcn
from evaluator.targets.nvidia import sass
from evaluator.targets.nvidia.static import sass_text
from evaluator.work import matrix_work

ROOT = Path(__file__).resolve().parents[1]
SM90 = sorted((ROOT / "kernels" / "sm90" / "bf16").glob("v*.py")) + sorted((ROOT / "kernels" / "sm90" / "fp8").glob("v*.py")) + [
    TEST_KERNELS / "wgmma_pipelined_sm90.py", TEST_KERNELS / "wgmma_persistent_sm90.py"]
GFX950 = sorted((ROOT / "kernels" / "gfx950" / "fp16").glob("v*.py")) + [
    ROOT / "kernels" / "gfx950" / "bf8" / "v00_bf8.py", ROOT / "kernels" / "gfx950" / "mxfp4" / "v00_mxfp4.py"]
PERSISTENT = {"v06_persistent", "v07_tma_store", "v08_warp_specialized", "v09_tuned", "wgmma_persistent_sm90"}
_SHAPE = re.compile(r"(\d+)x(\d+)x(\d+)")
HMMA_SHAPES = {"HMMA.16816": (16, 8, 16), "HMMA.1688": (16, 8, 8)}


def compiled(path: Path, target: str):
    module, spec = load_candidate(str(path))
    (kernel,) = compile_candidate(module, spec, get_target(target), spec.benchmark_shape, None)
    return kernel


def shape_flops(mnemonic: str) -> int:
    """FLOPs of one matrix instruction: HGMMA/MFMA name their shape MxNxK, HMMA.16816 is m16n8k16."""
    found = _SHAPE.search(mnemonic)
    m, n, k = (int(g) for g in found.groups()) if found else next(
        v for key, v in HMMA_SHAPES.items() if mnemonic.startswith(key))
    return 2 * m * n * k


@pytest.mark.slow
@pytest.mark.parametrize("path", SM90, ids=lambda p: p.stem)
def test_sm90_hot_loop_is_the_k_loop(path):
    kernel = compiled(path, "sm90")
    flow = sass.control_flow(sass_text(kernel))
    work = matrix_work(kernel.asm["ttgir"])
    hot = flow.innermost_carrying(sass.is_matrix)
    body = flow.loop_instructions(hot)
    matrix = [i for i in body if sass.is_matrix(i.mnemonic)]
    # One iteration = one TTGIR K-loop iteration of matrix work, spread over the issuing warps/warpgroups.
    per_stream = sum(shape_flops(i.mnemonic) for i in matrix)
    streams = work.consumer_warps // (4 if matrix[0].mnemonic.startswith(("HGMMA", "QGMMA")) else 1)
    assert per_stream * streams == work.flops_per_iteration
    assert not any(lp.parent == hot.header for lp in flow.loops if any(
        sass.is_matrix(i.mnemonic) for i in flow.loop_instructions(lp)))  # innermost carrier
    assert not any(sass.classify(i) == "tma_store" for i in body)  # never the tile loop with its epilogue
    if path.stem in PERSISTENT:
        assert hot.parent is not None, "a persistent kernel's K loop sits inside its tile loop"
    if not work.warp_specialized and "UTMALDG" in sass_text(kernel):
        assert any(sass.classify(i) == "tma_load" for i in body), "the ring's refill copies belong to the K loop"
    stub_blocks = flow.stub_blocks()
    assert not stub_blocks & {b for lp in flow.loops for b in flow.own_blocks(lp)}
    for stub in flow.stubs:
        serving_loops = [lp for lp in flow.loops if stub.serves in lp.blocks]
        assert all(stub.blocks <= lp.blocks for lp in serving_loops)  # the stub returns into the loop it serves
    # The K loop's barrier waits stand inline; their out-of-line retries serve blocks of the K loop.
    waits = sum(1 for i in body if "TRYWAIT" in i.mnemonic)
    served = [s for s in flow.stubs if s.serves in hot.blocks]
    assert len(served) == waits


@pytest.mark.slow
@pytest.mark.parametrize("path", GFX950, ids=lambda p: f"{p.parent.name}-{p.stem}")
def test_gfx950_hot_loop_is_the_k_loop(path):
    kernel = compiled(path, "gfx950")
    flow = amdgcn.control_flow(kernel.asm["amdgcn"])
    work = matrix_work(kernel.asm["ttgir"])
    hot = flow.innermost_carrying(amdgcn.is_mfma)
    body = flow.loop_instructions(hot)
    per_wave = sum(shape_flops(i.mnemonic) for i in body if amdgcn.is_mfma(i.mnemonic))
    assert per_wave * work.consumer_warps == work.flops_per_iteration
    assert hot.depth == 1 and not flow.stubs
    assert any(amdgcn.classify(i) in ("global_load", "buffer_load", "direct_to_lds_load") for i in body)


@pytest.mark.slow
def test_two_barriers_per_step_give_two_retry_stubs_in_the_k_loop():
    kernel = compiled(TEST_KERNELS / "wgmma_pipelined_sm90.py", "sm90")
    flow = sass.control_flow(sass_text(kernel))
    hot = flow.innermost_carrying(sass.is_matrix)
    assert len([s for s in flow.stubs if s.serves in hot.blocks]) == 2   # `empty` and `ready`
    assert [lp.header for lp in flow.loops] == [hot.header]             # the stubs are not loops of their own
