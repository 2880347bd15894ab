"""Parse AMDGPU assembly (.amdgcn) from Triton's compile for a CDNA target (gfx942, gfx950).

Register and spill counts come from the HSA metadata the assembler emits (`.vgpr_count`,
`.agpr_count`, ...) and from LLVM's resource-usage comments (`; NumVgprs:`). Loops come from the
control-flow graph of the branches (evaluator.isa.cfg), not from LLVM's loop comments.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass

from ...errors import CompileFailure
from ...isa import cfg
from ...isa.common import Instruction

# A block starts at a label (`.LBB0_3:`) or, when it has none, at LLVM's `; %bb.6:` comment.
_LABEL = re.compile(r"^(?:; %)?(\.?L?BB\d+_\d+|\.LBB\d+_\d+|bb\.\d+):(.*)$")
_INSTR = re.compile(r"^\s+([a-z][a-z0-9_.]*)\b\s*(.*?)\s*(?:;.*)?$")


@dataclass(frozen=True)
class ResourceUsage:
    arch_vgprs: int
    agprs: int
    total_vgprs: int
    sgprs: int
    vgpr_spill_count: int
    sgpr_spill_count: int
    scratch_bytes: int
    lds_bytes_static: int       # the .amdgcn LDS fields: 0 for Triton, whose LDS is dynamic
    compiler_occupancy: int | None


def _meta_int(text: str, key: str, default: int = 0) -> int:
    m = re.search(rf"^\s*(?:-\s+)?\.{key}:\s+(\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else default


def _comment_int(text: str, key: str) -> int | None:
    m = re.search(rf"^; {key}: (\d+)", text, re.MULTILINE)
    return int(m.group(1)) if m else None


def parse_resource_usage(text: str) -> ResourceUsage:
    """The kernel's register, spill and scratch report. Assembly without the `.vgpr_count` metadata (the backend
    stopped before emitting it) raises CompileFailure: zeros would read as a kernel that needs no registers."""
    if not re.search(r"^\s*(?:-\s+)?\.vgpr_count:\s+\d+", text, re.MULTILINE):
        raise CompileFailure("the AMDGPU assembly carries no .vgpr_count metadata: no register report to read")
    total = _meta_int(text, "vgpr_count")
    agprs = _meta_int(text, "agpr_count")
    arch = _comment_int(text, "NumVgprs")
    return ResourceUsage(
        arch_vgprs=arch if arch is not None else total - agprs,
        agprs=agprs,
        total_vgprs=total,
        sgprs=_meta_int(text, "sgpr_count"),
        vgpr_spill_count=_meta_int(text, "vgpr_spill_count"),
        sgpr_spill_count=_meta_int(text, "sgpr_spill_count"),
        scratch_bytes=_meta_int(text, "private_segment_fixed_size"),
        lds_bytes_static=_meta_int(text, "group_segment_fixed_size"),
        compiler_occupancy=_comment_int(text, "Occupancy"),
    )


def parse_instructions(text: str) -> list[tuple[str | None, Instruction]]:
    """Instructions of the kernel body with the label of the block each lies in."""
    out: list[tuple[str | None, Instruction]] = []
    block: str | None = None
    in_text = False
    for no, raw in enumerate(text.splitlines(), 1):
        if raw.startswith(("\t.text", "\t.section\t.text")):
            in_text = True
        if raw.startswith("\t.section") and ".text" not in raw:
            in_text = False
        label = _LABEL.match(raw)
        if label:
            block = label.group(1).lstrip(".")
            continue
        if not in_text or raw.lstrip().startswith((";", ".")):
            continue
        m = _INSTR.match(raw)
        if m:
            out.append((block, Instruction(m.group(1), m.group(2), no)))
    return out


class BranchRules:
    """Control flow of AMDGCN for `evaluator.isa.cfg`: s_branch always jumps, s_cbranch_* may; s_endpgm and
    s_setpc end a path."""

    def targets(self, ins: Instruction) -> list[str]:
        if ins.mnemonic == "s_branch" or ins.mnemonic.startswith("s_cbranch"):
            return [ins.operands.split()[0].lstrip(".")] if ins.operands else []
        return []

    def ends_block(self, ins: Instruction) -> bool:
        return ins.mnemonic.startswith(("s_branch", "s_cbranch", "s_endpgm", "s_setpc"))

    def falls_through(self, ins: Instruction) -> bool:
        return ins.mnemonic.startswith("s_cbranch")


def is_spin(ins: Instruction) -> bool:
    """Instructions a wait loop is made of: waits, sleeps, branches."""
    return ins.mnemonic.startswith(("s_sleep", "s_waitcnt", "s_nop", "s_branch", "s_cbranch"))


def control_flow(text: str) -> cfg.ControlFlow:
    """Blocks and natural loops of one kernel's assembly (evaluator.isa.cfg)."""
    return cfg.analyze(parse_instructions(text), BranchRules(), is_spin)


def is_mfma(m: str) -> bool:
    return m.startswith(("v_mfma", "v_smfmac"))


def is_scratch(m: str) -> bool:
    return m.startswith("scratch_")


def is_direct_to_lds(ins: Instruction) -> bool:
    return (ins.mnemonic.startswith(("buffer_load", "global_load")) and re.search(r"\blds\b", ins.operands) is not None) \
        or ins.mnemonic.startswith("global_load_lds")


def classify(ins: Instruction) -> str:
    """Coarse class of one instruction, for the hot-loop mix."""
    m = ins.mnemonic
    if is_mfma(m):
        return "mfma"
    if is_scratch(m):
        return "scratch_load" if "load" in m else "scratch_store"
    if is_direct_to_lds(ins):
        return "direct_to_lds_load"
    if m.startswith("buffer_load"):
        return "buffer_load"
    if m.startswith("global_load"):
        return "global_load"
    if m.startswith(("buffer_store", "global_store")):
        return "global_store"
    if m.startswith(("ds_read", "ds_load")):
        return "ds_read"
    if m.startswith(("ds_write", "ds_store")):
        return "ds_write"
    if m.startswith("s_waitcnt"):
        return "s_waitcnt"
    if m.startswith(("s_cbranch", "s_branch", "s_setpc")):
        return "branch"
    if m.startswith("s_barrier"):
        return "barrier"
    if m.startswith(("s_load", "s_buffer_load")):
        return "scalar_load"
    if m.startswith("v_"):
        return "valu"
    if m.startswith("s_"):
        return "salu"
    return "other"


def mfma_format(ins: Instruction) -> str | None:
    """Operand format of an f8f6f4 MFMA from its cbsz/blgp modifiers (0 fp8, 1 bf8, 2 fp6, 3 bf6, 4 fp4)."""
    if "f8f6f4" not in ins.mnemonic:
        return None
    names = {0: "fp8", 1: "bf8", 2: "fp6", 3: "bf6", 4: "fp4"}
    cbsz = re.search(r"cbsz:(\d+)", ins.operands)
    blgp = re.search(r"blgp:(\d+)", ins.operands)
    a = names.get(int(cbsz.group(1)) if cbsz else 0, "fp8")
    b = names.get(int(blgp.group(1)) if blgp else 0, "fp8")
    return a if a == b else f"{a}x{b}"


# What a compressed view of the hot loop keeps in order (evaluator.isa.loop_view): the schedule of MFMAs,
# waits, barriers and LDS traffic.
VIEW_CLASSES = frozenset({"mfma", "s_waitcnt", "barrier", "ds_read", "ds_write", "direct_to_lds_load"})


def in_loop_view(ins: Instruction) -> bool:
    return classify(ins) in VIEW_CLASSES


def is_accumulator_move(m: str) -> bool:
    """v_accvgpr_read/write/mov: moves between arch VGPRs and AGPRs (VALU issue, no arithmetic)."""
    return m.startswith("v_accvgpr_")


def instruction_mix(instructions: list[Instruction]) -> dict:
    classes = Counter(classify(i) for i in instructions)
    accumulator_moves = sum(1 for i in instructions if is_accumulator_move(i.mnemonic))
    by_width = lambda prefix: dict(sorted(Counter(
        i.mnemonic for i in instructions if classify(i) == prefix).items()))
    return {
        "instructions": len(instructions),
        "mfma": classes["mfma"],
        "global_load": classes["global_load"],
        "buffer_load": classes["buffer_load"],
        "direct_to_lds_load": classes["direct_to_lds_load"],
        "global_store": classes["global_store"],
        "ds_read": classes["ds_read"],
        "ds_write": classes["ds_write"],
        "ds_read_by_width": by_width("ds_read"),
        "ds_write_by_width": by_width("ds_write"),
        "s_waitcnt": classes["s_waitcnt"],
        "valu": classes["valu"] - accumulator_moves,
        "accumulator_moves": accumulator_moves,
        "salu": classes["salu"],
        "branch": classes["branch"],
        "barrier": classes["barrier"],
        "scratch_load": classes["scratch_load"],
        "scratch_store": classes["scratch_store"],
    }
