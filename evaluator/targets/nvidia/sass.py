"""Parse Hopper SASS (from `nvdisasm -c` on Triton's cubin) and ptxas's resource report.

Registers, stack frame and spill bytes come from `ptxas -v` (the one Triton assembles the arch with) run on the
kernel's PTX with the target's `--gpu-name`; the instruction mix and loops from the control-flow graph of the
disassembly (evaluator.isa.cfg).
"""
from __future__ import annotations

import functools
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ...errors import CompileFailure
from ...isa import cfg
from ...isa.common import Instruction

_LABEL = re.compile(r"^(\.L_x_\d+):")
_INSTR = re.compile(r"^\s+/\*[0-9a-f]+\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)\s*(.*?)\s*;")
_TARGET = re.compile(r"`\((\.L_x_\d+)\)")
_OPERAND_PREDICATE = re.compile(r"^!?(U?P\w+)\s*,")
_HGMMA_SHAPE = re.compile(r"[HQ]GMMA\.(\d+)x(\d+)x(\d+)")


@dataclass(frozen=True)
class ResourceUsage:
    registers: int
    stack_frame_bytes: int
    spill_store_bytes: int
    spill_load_bytes: int
    barriers: int


def _tool(name: str) -> str:
    from triton import knobs

    return getattr(knobs.nvidia, name).path


def ptxas_for(arch: str) -> str:
    """The ptxas Triton itself assembles `arch` ("sm_90a") with: which of its two bundled ones that is moved
    between releases (up to 3.8 the Blackwell one from sm_100 on; from 3.9, whose PTX for sm_90a is of a newer
    ISA, from sm_90 on), so the choice is Triton's own `get_ptxas`."""
    from triton.backends.nvidia.compiler import get_ptxas

    return get_ptxas(int(re.match(r"sm_(\d+)", arch).group(1))).path


@functools.lru_cache(maxsize=64)  # a kernel is analysed again for each model variant (fits, ladders)
def ptxas_resource_usage(ptx: str, arch: str) -> ResourceUsage:
    """ptxas -v's register, stack and spill report for `ptx` compiled for `arch` ("sm_90a").

    A ptxas that fails, or answers without a register count, raises CompileFailure with its message: a record
    of 0 registers and 0 spills would read as a perfect kernel."""
    ptxas = ptxas_for(arch)
    with tempfile.TemporaryDirectory() as tmp:
        src = Path(tmp, "k.ptx")
        src.write_text(ptx)
        result = subprocess.run([ptxas, "-v", "--gpu-name", arch, str(src), "-o", str(Path(tmp, "k.o"))],
                                capture_output=True, text=True, timeout=300, check=False)
    report = result.stdout + result.stderr
    if result.returncode != 0 or not re.search(r"Used \d+ registers", report):
        said = next((ln.strip() for ln in report.splitlines() if "error" in ln.lower()), None) \
            or _last_nonblank(report) or f"exit code {result.returncode}"
        raise CompileFailure(f"ptxas ({Path(ptxas).name}, --gpu-name {arch}) failed on the kernel's PTX: {said[:300]}")
    return parse_ptxas_report(report)


def _last_nonblank(text: str) -> str | None:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[-1] if lines else None


def parse_ptxas_report(text: str) -> ResourceUsage:
    def num(pattern: str) -> int:
        m = re.search(pattern, text)
        return int(m.group(1)) if m else 0

    return ResourceUsage(
        registers=num(r"Used (\d+) registers"),
        stack_frame_bytes=num(r"(\d+) bytes stack frame"),
        spill_store_bytes=num(r"(\d+) bytes spill stores"),
        spill_load_bytes=num(r"(\d+) bytes spill loads"),
        barriers=num(r"used (\d+) barriers"),
    )


def disassemble(cubin: bytes) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "k.cubin")
        path.write_bytes(cubin)
        result = subprocess.run([_tool("nvdisasm"), "-c", str(path)], capture_output=True, text=True, timeout=300, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"nvdisasm failed: {result.stderr.strip()}")
    return result.stdout


def parse_instructions(text: str) -> list[tuple[str | None, Instruction]]:
    out: list[tuple[str | None, Instruction]] = []
    label: str | None = None
    for no, raw in enumerate(text.splitlines(), 1):
        if (m := _LABEL.match(raw)):
            label = m.group(1)
            continue
        if (m := _INSTR.match(raw)):
            guard = (m.group(1) or "").strip()
            out.append((label, Instruction(m.group(2), m.group(3), no, "" if guard == "@PT" else guard)))
    return out


class BranchRules:
    """Control flow of SASS for `evaluator.isa.cfg`: BRA/JMP to a label, EXIT/RET/trap ending a path; a guarded
    instruction (`@P0 BRA`) may not run, so control can fall through it."""

    def targets(self, ins: Instruction) -> list[str]:
        if ins.mnemonic.startswith(("BRA", "JMP")):
            return _TARGET.findall(ins.operands)
        if ins.mnemonic.startswith(("BRX", "JMX")):  # indirect: nvdisasm lists the targets in a comment
            listed = re.search(r"BRANCH_TARGETS ([^\"]*)", ins.operands)
            return re.findall(r"\.L_x_\d+", listed.group(1)) if listed else []
        return []

    def ends_block(self, ins: Instruction) -> bool:
        return ins.mnemonic.startswith(("BRA", "BRX", "JMP", "JMX", "EXIT", "RET", "BPT.TRAP"))

    def falls_through(self, ins: Instruction) -> bool:
        if ins.guard:
            return ins.guard != "@!PT"
        # A uniform branch can carry its condition as the first operand: `BRA.U !UP0, `(.L_x_13)`.
        condition = _OPERAND_PREDICATE.match(ins.operands)
        return bool(condition) and condition.group(1) not in ("PT", "UPT")


def is_spin(ins: Instruction) -> bool:
    """Instructions an mbarrier wait loop is made of: the try-wait itself, a back-off, the branches."""
    return ins.mnemonic.startswith(("SYNCS.PHASECHK", "NANOSLEEP", "YIELD", "NOP", "BRA"))


def control_flow(text: str) -> cfg.ControlFlow:
    """Blocks, natural loops and mbarrier retry stubs of one kernel's disassembly."""
    return cfg.analyze(parse_instructions(text), BranchRules(), is_spin)


def is_tcgen05(m: str) -> bool:
    """A Blackwell tcgen05 MMA (UTCHMMA, UTCQMMA, ...): issued by one thread, accumulating in tensor memory."""
    return m.startswith("UTC") and m.split(".")[0].endswith("MMA")


def is_matrix(m: str) -> bool:
    return m.startswith(("HGMMA", "HMMA", "IMMA", "QGMMA")) or is_tcgen05(m)


def is_spill(m: str) -> bool:
    return m.startswith(("STL", "LDL"))


def hgmma_cycles(ins: Instruction) -> int:
    """Tensor-pipe cycles of one warpgroup MMA: an SM retires 2048 dense 16-bit (4096 8-bit) FMA per clock."""
    m = _HGMMA_SHAPE.match(ins.mnemonic)
    if not m:
        return 0
    rows, cols, depth = (int(g) for g in m.groups())
    eight_bit = any(t in ins.mnemonic for t in (".E4M3", ".E5M2", ".S8", ".U8"))
    return rows * cols * depth // (4096 if eight_bit else 2048)


def classify(ins: Instruction) -> str:
    m = ins.mnemonic
    if m.startswith(("HGMMA", "QGMMA")):
        return "wgmma"
    if m.startswith(("HMMA", "IMMA")):
        return "mma_sync"
    if is_tcgen05(m):
        return "tcgen05"
    if m.startswith("UTMALDG"):
        return "tma_load"
    if m.startswith("UTMASTG"):
        return "tma_store"
    if m.startswith("LDGSTS"):
        return "cp_async"
    if m.startswith("LDG"):
        return "global_load"
    if m.startswith(("STG", "RED", "ATOMG")):
        return "global_store"
    if m.startswith("LDS"):  # LDS, LDSM
        return "shared_load"
    if m.startswith("STS"):
        return "shared_store"
    if is_spill(m):
        return "spill_store" if m.startswith("STL") else "spill_load"
    if m.startswith(("SYNCS", "BAR", "WARPGROUP", "DEPBAR", "WARPSYNC")):
        return "sync"
    if m.startswith(("BRA", "EXIT", "RET", "CALL", "BSYNC", "BSSY")):
        return "branch"
    if m.startswith("U"):
        return "uniform"
    return "alu"


# What a compressed view of the hot loop keeps in order (evaluator.isa.loop_view): the schedule of matrix
# instructions, synchronisation (barriers, mbarrier waits, wgmma fences) and shared-memory / TMA traffic.
VIEW_CLASSES = frozenset({"wgmma", "mma_sync", "tcgen05", "sync", "shared_load", "shared_store", "tma_load", "tma_store",
                          "cp_async"})


def in_loop_view(ins: Instruction) -> bool:
    return classify(ins) in VIEW_CLASSES


def instruction_mix(instructions: list[Instruction]) -> dict:
    classes = Counter(classify(i) for i in instructions)
    keys = ("wgmma", "mma_sync", "tcgen05", "tma_load", "tma_store", "cp_async", "global_load", "global_store",
            "shared_load", "shared_store", "sync", "branch", "uniform", "alu", "spill_store", "spill_load")
    return {"instructions": len(instructions), **{k: classes[k] for k in keys}}
