"""Static efficiency estimate of a Hopper SASS hot loop: an in-order issue model of one warp (mma.sync) or
warpgroup (wgmma) instruction stream.

wgmma (HGMMA/QGMMA) keeps the tensor pipe busy for the cycles its shape implies; HMMA costs come from the
target's `matrix_cycles` table; `WARPGROUP.DEPBAR` waits for committed wgmma groups and mbarrier try-waits
for the TMA loads of the stage they guard (the prologue's loads count as in flight at loop entry).
A global load's data is waited for by the first instruction that reads one of its destination registers.
Constants are public figures except the two memory figures fitted on the sm90 ladder (docs/static-model.md).
Every figure is a static estimate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...isa.common import Instruction
from ..loop_estimate import ITERATIONS, LoopEstimate, SegmentMarks, steady_state
from . import sass


@dataclass(frozen=True)
class NvCosts:
    """Issue model for one warp (mma.sync) or warpgroup (wgmma) stream."""

    alu_issue: int = 1
    wgmma_issue: int = 2
    # An operand copy's latency under the load of a full GEMM (L2/HBM queueing included), one value for plain
    # loads and TMA: fitted with operand_bytes_per_clock on the sm90 ladder measurements
    # (benchmarks/results/static_model_fit.json), validated on the knob variants. Unloaded it is ~800 cycles.
    gmem_latency: int = 2000
    tma_latency: int = 2000
    barrier: int = 20
    # mma.sync reaches ~2/3 of the wgmma rate on Hopper (public microbenchmarks): an HMMA keeps its
    # sub-core's tensor unit busy 1.5x its full-rate table cycles.
    hmma_busy_factor: float = 1.5
    # Operand bytes per clock into one SM (L2 -> SM), shared by its resident CTAs: fitted with the latency
    # above (40 B/clk/SM x 132 SMs x 1.83 GHz = 9.7 TB/s); None = not modelled.
    operand_bytes_per_clock: float | None = 40.0


def hmma_cycles(ins: Instruction, table: dict[str, int]) -> int:
    """Full-rate tensor cycles of one warp-level HMMA from the target's table (the longest matching prefix)."""
    keys = [k for k in table if ins.mnemonic.startswith(k)]
    return table[max(keys, key=len)] if keys else 0


def matrix_cycles(ins: Instruction, table: dict[str, int]) -> int:
    """Tensor-pipe cycles of one matrix instruction: wgmma from its shape, HMMA from the table."""
    if ins.mnemonic.startswith(("HGMMA", "QGMMA")):
        return sass.hgmma_cycles(ins)
    return hmma_cycles(ins, table)


_REGISTER = re.compile(r"(?<![U\w])R(\d+)\b")
_WIDTH = re.compile(r"\.(64|128)\b")


def _registers_written(ins: Instruction) -> set[int]:
    """General registers a load writes: its first operand and, for .64/.128, the ones after it."""
    first = _REGISTER.search(ins.operands.split(",")[0])
    if not first:
        return set()
    width = _WIDTH.search(ins.mnemonic)
    return set(range(int(first.group(1)), int(first.group(1)) + (int(width.group(1)) // 32 if width else 1)))


def _registers_read(ins: Instruction) -> set[int]:
    """General registers an instruction names as sources (stores read all their operands)."""
    operands = ins.operands if ins.mnemonic.startswith(("ST", "RED", "ATOM")) else ins.operands.partition(",")[2]
    return {int(r) for r in _REGISTER.findall(operands)}


def estimate_sass(body: list[Instruction], table: dict[str, int], prologue_tma: int = 0,
                  costs: NvCosts = NvCosts(), producer_lead: int = 0) -> LoopEstimate:
    """Steady-state estimate of the loop `body`; `prologue_tma` TMA loads are in flight when it starts.

    A consumer loop that waits on mbarriers but issues no TMA itself is fed by a producer partition
    (`producer_lead` > 0): the producer refills a slot as soon as the consumer frees it, so the copies for
    iteration i + lead - 1 start when iteration i starts, and the first `lead` iterations' copies are in
    flight at entry."""
    t = 0.0
    tensor_free = 0.0
    groups: list[float] = []                 # completion of committed wgmma groups
    ldg: list[tuple[set[int], float]] = []   # registers an outstanding global load writes, its completion
    stalls = {"matrix": 0.0, "gmem_wait": 0.0, "tma_wait": 0.0, "wgmma_wait": 0.0, "barrier": 0.0}
    matrix = sum(matrix_cycles(i, table) for i in body if sass.is_matrix(i.mnemonic))
    waits = sum(1 for i in body if "TRYWAIT" in i.mnemonic or i.mnemonic.startswith("SYNCS.PHASECHK"))
    issued = sum(1 for i in body if i.mnemonic.startswith("UTMALDG"))
    tma_per_wait = max(1, issued // max(1, waits))
    fed = producer_lead > 0 and issued == 0 and waits > 0
    tma: list[float] = [costs.tma_latency] * (producer_lead * waits if fed else prologue_tma)
    starts = []
    marks = SegmentMarks()        # the last iteration, cut at its CTA-wide barriers
    issued_matrix = 0.0
    for iteration in range(ITERATIONS):
        starts.append(t)
        last = iteration == ITERATIONS - 1
        if last:
            marks.cut(t, issued_matrix, stalls)
        if fed and iteration > 0:
            tma += [t + costs.tma_latency] * waits
        for ins in body:
            m = ins.mnemonic
            kind = sass.classify(ins)
            if ldg and kind != "global_load":  # wait for the loads whose registers this instruction reads
                reads = _registers_read(ins)
                pending = [done for regs, done in ldg if regs & reads]
                if pending:
                    ready = max(t, *pending)
                    stalls["gmem_wait"] += ready - t
                    t = ready
                    ldg = [(regs, done) for regs, done in ldg if not regs & reads]
            if kind == "wgmma":
                start = max(t, tensor_free)
                stalls["matrix"] += start - t
                tensor_free = start + sass.hgmma_cycles(ins)
                issued_matrix += sass.hgmma_cycles(ins)
                t = start + costs.wgmma_issue
                if "gsb0" in ins.operands:
                    groups.append(tensor_free)
            elif kind == "mma_sync":
                busy = hmma_cycles(ins, table) * costs.hmma_busy_factor
                start = max(t, tensor_free)
                stalls["matrix"] += start - t
                tensor_free = start + busy
                issued_matrix += hmma_cycles(ins, table)
                t = start + 1
            elif m.startswith("WARPGROUP.DEPBAR"):
                keep = int(re.search(r"0x([0-9a-f]+)", ins.operands).group(1), 16) if "0x" in ins.operands else 0
                ready = t
                while len(groups) > keep:
                    ready = max(ready, groups.pop(0))
                ready = max(ready, tensor_free) if keep == 0 else ready
                stalls["wgmma_wait"] += ready - t
                t = ready + 1
            elif kind == "global_load":
                t += costs.alu_issue
                ldg.append((_registers_written(ins), t + costs.gmem_latency))
            elif kind == "tma_load":
                t += costs.alu_issue
                tma.append(t + costs.tma_latency)
            elif "TRYWAIT" in m or m.startswith("SYNCS.PHASECHK"):
                ready = t
                for _ in range(min(tma_per_wait, len(tma))):
                    ready = max(ready, tma.pop(0))
                stalls["tma_wait"] += ready - t
                t = ready + costs.alu_issue
            elif m.startswith(("BAR.SYNC", "BAR.RED")):
                t += costs.barrier
                stalls["barrier"] += costs.barrier
                if last:
                    marks.cut(t, issued_matrix, stalls)
            else:
                t += costs.alu_issue
    starts.append(t)
    marks.cut(t, issued_matrix, stalls)
    return steady_state(matrix, starts, stalls, marks)
