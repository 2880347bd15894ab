"""Control-flow graphs, dominators and natural loops (evaluator.isa.cfg) on small synthetic programs.

A toy instruction set keeps the graphs readable: `br L` jumps, `cbr L` may jump, `exit` ends the kernel,
`wait` spins on a barrier, `mma` is matrix work, anything else is plain work.
"""
from __future__ import annotations

from evaluator.isa import cfg
from evaluator.isa.common import Instruction


class ToyRules:
    def targets(self, ins: Instruction) -> list[str]:
        return [ins.operands] if ins.mnemonic in ("br", "cbr") else []

    def ends_block(self, ins: Instruction) -> bool:
        return ins.mnemonic in ("br", "cbr", "exit")

    def falls_through(self, ins: Instruction) -> bool:
        return ins.mnemonic == "cbr"


def program(text: str) -> list[tuple[str | None, Instruction]]:
    """`L:` lines are labels, other lines instructions."""
    out, label = [], None
    for no, line in enumerate(text.strip().splitlines(), 1):
        line = line.strip()
        if line.endswith(":"):
            label = line[:-1]
            continue
        mnemonic, _, operands = line.partition(" ")
        out.append((label, Instruction(mnemonic, operands, no)))
    return out


def spin(ins: Instruction) -> bool:
    return ins.mnemonic in ("wait", "br", "cbr")


def flow(text: str) -> cfg.ControlFlow:
    return cfg.analyze(program(text), ToyRules(), spin)


def is_mma(m: str) -> bool:
    return m == "mma"


def test_straight_line_code_has_one_block_and_no_loop():
    f = flow("a\nb\nexit")
    assert [b.name for b in f.blocks] == ["entry"]
    assert f.loops == []


def test_blocks_split_after_branches_and_at_labels():
    f = flow("""
        a
        cbr L2
        b
        L2:
        c
        exit
    """)
    assert [b.name for b in f.blocks] == ["entry", "entry+1", "L2"]
    assert f.block("entry").successors == ("L2", "entry+1")
    assert f.block("entry+1").successors == ("L2",)
    assert f.block("L2").successors == ()


def test_dominators_of_a_diamond():
    blocks = cfg.build_blocks(program("""
        cbr R
        L:
        a
        br J
        R:
        b
        J:
        exit
    """), ToyRules())
    idom = cfg.immediate_dominators(blocks)
    assert idom == {"entry": None, "L": "entry", "R": "entry", "J": "entry"}
    assert cfg.dominates(idom, "entry", "J") and not cfg.dominates(idom, "L", "J")


def test_a_counted_loop_is_one_natural_loop():
    f = flow("""
        init
        H:
        mma
        add
        cbr H
        exit
    """)
    assert len(f.loops) == 1
    loop = f.loops[0]
    assert loop.header == "H" and loop.blocks == {"H"} and loop.latches == ("H",) and loop.depth == 1
    assert [i.mnemonic for i in f.loop_instructions(loop)] == ["mma", "add", "cbr"]


def test_two_back_edges_to_one_header_make_one_loop():
    f = flow("""
        H:
        a
        cbr C
        b
        br H
        C:
        c
        cbr H
        exit
    """)
    assert [lp.header for lp in f.loops] == ["H"]
    assert set(f.loops[0].latches) == {"H+1", "C"}
    assert f.loops[0].blocks == {"H", "H+1", "C"}


def test_nested_loops_have_depth_and_parent_and_the_inner_one_carries_the_matrix_work():
    f = flow("""
        T:
        tile_setup
        K:
        mma
        cbr K
        epilogue
        cbr T
        exit
    """)
    by_header = {lp.header: lp for lp in f.loops}
    assert by_header["T"].depth == 1 and by_header["T"].parent is None
    assert by_header["K"].depth == 2 and by_header["K"].parent == "T"
    assert by_header["K"].blocks < by_header["T"].blocks
    assert f.innermost_carrying(is_mma).header == "K"
    assert f.own_blocks(by_header["T"]) == {"T", "K+1"}


def test_a_peeled_mma_in_the_tile_loop_does_not_make_it_the_hot_loop():
    # A pipelined persistent kernel drains its last wgmma after the K loop, inside the tile loop: the tile
    # loop then holds more matrix instructions than the K loop, but the K loop is the innermost carrier.
    f = flow("""
        T:
        mma
        K:
        mma
        cbr K
        mma
        mma
        cbr T
        exit
    """)
    assert f.innermost_carrying(is_mma).header == "K"


def test_a_loop_without_matrix_work_is_never_the_hot_loop():
    f = flow("""
        P:
        load
        cbr P
        K:
        mma
        cbr K
        exit
    """)
    assert f.innermost_carrying(is_mma).header == "K"
    assert flow("P:\nload\ncbr P\nexit").innermost_carrying(is_mma) is None


def test_an_out_of_line_retry_stub_belongs_to_the_block_it_serves():
    # The Hopper pattern: an inline try-wait whose failure branches to a spin loop after EXIT, which jumps
    # back into the K loop when the barrier flips.
    f = flow("""
        H:
        load
        wait
        cbr STUB
        BODY:
        mma
        mma
        cbr H
        epilogue
        exit
        STUB:
        wait
        cbr STUB
        br BODY
    """)
    assert [lp.header for lp in f.loops] == ["H"]
    loop = f.loops[0]
    assert {"STUB", "STUB+1"} <= loop.blocks  # the natural loop reaches through the stub ...
    assert [s.serves for s in f.stubs] == ["H"]
    assert f.stubs[0].blocks == {"STUB", "STUB+1"}
    # ... but the modelled iteration is the inline path: one wait, the stub's spin left out.
    assert [i.mnemonic for i in f.loop_instructions(loop)] == ["load", "wait", "cbr", "mma", "mma", "cbr"]


def test_an_inline_spin_loop_runs_every_iteration_and_stays_in_the_body():
    f = flow("""
        H:
        load
        S:
        wait
        cbr S
        mma
        cbr H
        exit
    """)
    assert f.stubs == []
    by_header = {lp.header: lp for lp in f.loops}
    assert by_header["S"].parent == "H"
    assert f.innermost_carrying(is_mma).header == "H"
    assert [i.mnemonic for i in f.loop_instructions(by_header["H"])] == ["load", "wait", "cbr", "mma", "cbr"]


def test_a_backward_jump_into_code_it_does_not_dominate_closes_no_loop():
    # What fooled a textual loop finder: a stub's branch back to an earlier label spans a region with more
    # matrix instructions than the real loop, yet that label does not dominate the branch.
    f = flow("""
        K:
        mma
        cbr K
        EPI:
        wait
        cbr STUB
        AFTER:
        mma
        mma
        mma
        exit
        STUB:
        wait
        cbr STUB
        br AFTER
    """)
    assert f.innermost_carrying(is_mma).header == "K"
    assert [lp.header for lp in f.loops] == ["K"]
    assert [(s.header, s.serves) for s in f.stubs] == [("STUB", "EPI")]


def test_an_irreducible_cycle_is_reported_not_taken_for_a_loop():
    f = flow("""
        cbr B
        A:
        mma
        br B
        B:
        mma
        cbr A
        exit
    """)
    assert f.loops == []
    assert f.irreducible_edges
    assert f.innermost_carrying(is_mma) is None


def test_unreachable_code_is_ignored():
    f = flow("""
        H:
        mma
        cbr H
        exit
        DEAD:
        br DEAD
    """)
    assert [lp.header for lp in f.loops] == ["H"]
