"""The gfx950 FP16 reference ladder: each stage's technique is visible in what the compiler produced.

Every stage is compiled once (benchmark shape, default knobs) for gfx950 on the CPU; the checks read the
AMDGCN assembly and the TTGIR. The small parsers here are deliberately local: they only need LLVM's loop
annotations and a few mnemonics.
"""
from __future__ import annotations

import re

import pytest

from evaluator.compile import compile_candidate
from evaluator.contract import load_candidate
from evaluator.ladder import ladder_dirs, stage_paths
from evaluator.targets import get_target

pytestmark = [pytest.mark.slow, pytest.mark.compiler]  # compiles every stage of the gfx950 ladder

LADDER = ladder_dirs("gfx950")[0]
STAGES = [p.stem for p in stage_paths(LADDER)]

_BLOCK_LABEL = re.compile(r"^(\.LBB\d+_\d+:|; %bb\.\d+:)")


def _instructions(lines: list[str]) -> list[str]:
    return [ln.strip() for ln in lines if ln.strip() and not ln.strip().startswith((";", "."))]


def hot_loop(asm: str) -> list[str]:
    """Instructions of the basic blocks LLVM annotates as loop blocks ("in Loop" / "Loop Header")."""
    lines = asm.splitlines()
    body, in_loop = [], False
    for i, line in enumerate(lines):
        if _BLOCK_LABEL.match(line):
            nxt = lines[i + 1] if i + 1 < len(lines) and lines[i + 1].strip().startswith(";") else ""
            tag = line + nxt
            in_loop = "in Loop" in tag or "Loop Header" in tag
            continue
        if in_loop:
            body.append(line)
    return _instructions(body)


def count(instructions: list[str], pattern: str) -> int:
    return sum(1 for ins in instructions if re.match(pattern, ins))


def metadata(asm: str, key: str) -> int:
    match = re.search(rf"\.{key}:\s*(\d+)", asm)
    assert match, f"no .{key} in the assembly"
    return int(match.group(1))


def is_scratch(ins: str) -> bool:
    return ins.startswith("scratch_") or "Spill" in ins or "Reload" in ins


def is_lds_dma(ins: str) -> bool:
    return re.match(r"(buffer|global)_load_\S+", ins) is not None and ins.endswith(" lds")


@pytest.fixture(scope="module")
def ladder():
    """stage name -> (module, compiled kernel, hot-loop instructions)."""
    target = get_target("gfx950")
    out = {}
    for stage in STAGES:
        module, spec = load_candidate(LADDER / f"{stage}.py")
        kernel = compile_candidate(module, spec, target)[0]
        out[stage] = (module, kernel, hot_loop(kernel.asm["amdgcn"]))
    return out


def stages_from(first: str) -> list[str]:
    return [s for s in STAGES if s >= first]


def stages_before(first: str) -> list[str]:
    return [s for s in STAGES if s < first]


def test_ladder_has_ten_stages_with_metadata(ladder):
    assert len(STAGES) == 10
    for stage, (module, _, _) in ladder.items():
        assert module.STAGE == stage[:3]
        assert module.TECHNIQUE
        assert (module.TARGET, module.DTYPE, module.OUT_DTYPE) == ("gfx950", "float16", "float16")
        assert tuple(module.SHAPES[0]) == (4096, 4096, 8192)


def test_every_stage_runs_16x16x32_mfma_in_a_loop(ladder):
    for stage, (_, _, loop) in ladder.items():
        assert loop, f"{stage}: no loop found in the assembly"
        assert count(loop, r"v_mfma_f32_16x16x32_f16") > 0, stage


def test_buffer_loads_from_v01_and_branches_drop(ladder):
    naive_branches = count(_instructions(ladder["v00_naive"][1].asm["amdgcn"].splitlines()), r"s_cbranch_")
    for stage in stages_before("v01"):
        loop = ladder[stage][2]
        assert count(loop, r"global_load_") > 0 and count(loop, r"buffer_load_") == 0, stage
    for stage in stages_from("v01"):
        loop = ladder[stage][2]
        assert count(loop, r"buffer_load_") > 0 and count(loop, r"global_load_") == 0, stage
        branches = count(_instructions(ladder[stage][1].asm["amdgcn"].splitlines()), r"s_cbranch_")
        assert branches * 10 <= naive_branches, f"{stage}: {branches} branches vs {naive_branches} in v00"


def test_operands_go_straight_to_lds_from_v02(ladder):
    for stage in stages_before("v02"):
        loop = ladder[stage][2]
        assert count(loop, r"ds_write") > 0 and not any(is_lds_dma(i) for i in loop), stage
    for stage in stages_from("v02"):
        loop = ladder[stage][2]
        assert any(is_lds_dma(i) for i in loop), f"{stage}: no direct-to-LDS load in the hot loop"
        assert count(loop, r"ds_write") == 0, f"{stage}: operands written to LDS through registers"
        assert count(loop, r"ds_read_b128") > 0, stage


def test_padded_lds_layout_from_v03(ladder):
    for stage in stages_before("v03"):
        assert "padded_shared" not in ladder[stage][1].asm["ttgir"], stage
    for stage in stages_from("v03"):
        assert "padded_shared" in ladder[stage][1].asm["ttgir"], stage


def test_lds_is_double_buffered_from_v04(ladder):
    alloc = re.compile(r"ttg\.local_alloc\s*:\s*\(\)\s*->\s*!ttg\.memdesc<(\d+)x")
    for stage in stages_before("v04"):
        leading = [int(d) for d in alloc.findall(ladder[stage][1].asm["ttgir"])]
        assert all(d != 2 for d in leading), f"{stage}: {leading}"
    for stage in stages_from("v04"):
        leading = [int(d) for d in alloc.findall(ladder[stage][1].asm["ttgir"])]
        assert leading and all(d == 2 for d in leading), f"{stage}: allocations {leading}"
        single = 2 * (256 * 64 + 256 * 64)  # one buffer of A and B, fp16 bytes
        assert ladder[stage][1].shared_bytes >= 2 * single, stage


def test_copies_into_a_buffer_follow_a_barrier_in_the_hot_loop(ladder):
    # A copy into a buffer other waves may still read must come after an s_barrier in the loop body.
    for stage in stages_from("v04"):
        loop = ladder[stage][2]
        first_copy = next(i for i, ins in enumerate(loop) if is_lds_dma(ins))
        assert any(ins.startswith("s_barrier") for ins in loop[:first_copy]), stage


def loop_body(ttgir: str) -> list[str]:
    """The lines of the first scf.for body of the TTGIR (by indentation), in program order."""
    lines = ttgir.splitlines()
    start = next(i for i, line in enumerate(lines) if "scf.for" in line)
    indent = len(lines[start]) - len(lines[start].lstrip())
    body = []
    for line in lines[start + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        body.append(line)
    return body


def loop_body_ops(ttgir: str, op: str) -> int:
    """How many `op` operations the first scf.for body of the TTGIR holds."""
    return sum(op in line for line in loop_body(ttgir))


def test_every_wait_in_the_hot_loop_is_followed_by_a_barrier(ladder):
    # The pipelined stages rely on the s_barrier after each wait_group both for visibility of the other
    # waves' copies and to free the buffer the next copy overwrites.
    for stage in stages_from("v04"):
        _, kernel, loop = ladder[stage]
        waits = loop_body_ops(kernel.asm["ttgir"], "ttg.async_wait")
        assert waits > 0, stage
        assert count(loop, r"s_barrier") >= waits, f"{stage}: {waits} waits, {count(loop, r's_barrier')} barriers"


@pytest.mark.parametrize("stage", ["v07_sliceN", "v08_sliceMN", "v09_beyond_hotloop"])
def test_sliced_loops_wait_after_mfmas_never_right_after_an_lds_read(ladder, stage):
    # The compiler drains every LDS read (lgkmcnt(0)) before the s_barrier after a wait: a wait that follows
    # a read in program order stalls on it for the full LDS latency (v08 before its rewrite: 1020 cycles of
    # LDS-read waiting per iteration in the static model, against 768 after).
    ops = [op for line in loop_body(ladder[stage][1].asm["ttgir"])
           for op in ("tt.dot", "ttg.local_load", "ttg.async_wait") if op in line]
    waits = [i for i, op in enumerate(ops) if op == "ttg.async_wait"]
    assert waits, stage
    assert all(i > 0 and ops[i - 1] == "tt.dot" for i in waits), f"{stage}: {ops}"


def test_slicing_splits_the_accumulator(ladder):
    for stage, pieces in (("v07_sliceN", 3), ("v08_sliceMN", 4), ("v09_beyond_hotloop", 4)):
        allocs = re.findall(r"ttg\.local_alloc", ladder[stage][1].asm["ttgir"])
        assert len(allocs) == pieces, f"{stage}: {len(allocs)} LDS allocations"


@pytest.mark.parametrize("stage", ["v07_sliceN", "v08_sliceMN", "v09_beyond_hotloop"])
def test_no_spills_in_the_hot_loop(ladder, stage):
    loop = ladder[stage][2]
    assert count(loop, r"v_mfma_") > 0
    spills = [ins for ins in loop if is_scratch(ins)]
    assert not spills, f"{stage}: {len(spills)} scratch accesses in the hot loop, e.g. {spills[0]}"


def test_stock_compiler_spills_in_the_hot_loop_before_slicing(ladder):
    # The contrast the ladder teaches: the x2-unrolled full-tile loop spills, the sliced one does not.
    asm = ladder["v06_loop_unroll"][1].asm["amdgcn"]
    assert metadata(asm, "vgpr_spill_count") > 0
    assert any(is_scratch(i) for i in ladder["v06_loop_unroll"][2])


def _v09():
    module, _ = load_candidate(LADDER / "v09_beyond_hotloop.py")
    return module


@pytest.mark.parametrize("num_pid_m, num_pid_n", [(16, 16), (5, 7), (3, 9), (1, 1)])
def test_tile_order_visits_every_tile_once(num_pid_m, num_pid_n):
    order = _v09().tile_order(num_pid_m, num_pid_n, 4, 8)
    assert sorted(order) == [(m, n) for m in range(num_pid_m) for n in range(num_pid_n)]


@pytest.mark.parametrize("num_pid_m, num_pid_n", [(16, 16), (5, 7)])
def test_tile_order_gives_each_xcd_a_contiguous_grouped_range(num_pid_m, num_pid_n):
    v09, xcds, group = _v09(), 8, 4
    order = v09.tile_order(num_pid_m, num_pid_n, group, xcds)
    grouped = v09.tile_order(num_pid_m, num_pid_n, group, 1)  # one XCD: logical id == program id
    total = num_pid_m * num_pid_n
    start = 0
    for xcd in range(xcds):
        tiles = order[xcd::xcds]  # what the round-robin dispatcher sends to this XCD, in launch order
        assert tiles == grouped[start:start + len(tiles)], f"XCD {xcd}"
        start += len(tiles)
    assert start == total
    # Grouped order: each run of group * num_pid_n logical ids stays within `group` tile rows.
    width = group * num_pid_n
    for first in range(0, total, width):
        rows = {m for m, _ in grouped[first:first + width]}
        assert max(rows) - min(rows) < group


@pytest.mark.gpu
@pytest.mark.parametrize("stage", STAGES)
def test_stage_matches_torch_on_gfx950(stage):
    torch = pytest.importorskip("torch")
    if not (torch.cuda.is_available() and getattr(torch.version, "hip", None)
            and "gfx950" in torch.cuda.get_device_properties(0).gcnArchName):
        pytest.skip("needs a gfx950 GPU")
    module, spec = load_candidate(LADDER / f"{stage}.py")
    m, n, k = spec.shapes[-1]
    a = torch.randn(m, k, device="cuda", dtype=torch.float16)
    b = torch.randn(n, k, device="cuda", dtype=torch.float16)
    c = torch.empty(m, n, device="cuda", dtype=torch.float16)
    module.launch(a, b, c, **spec.knobs)
    torch.testing.assert_close(c.float(), a.float() @ b.float().T, atol=0.5, rtol=1e-2)
