"""Static efficiency estimate of a Hopper SASS hot loop: an in-order issue model of one warp (mma.sync) or
warpgroup (wgmma) instruction stream.

wgmma (HGMMA/QGMMA) keeps the tensor pipe busy for the cycles its shape implies; HMMA costs come from the
target's `matrix_cycles` table; `WARPGROUP.DEPBAR` waits for committed wgmma groups and mbarrier try-waits
for the TMA loads of the stage they guard (the prologue's loads count as in flight at loop entry).
A global load's data is waited for by the first instruction that reads one of its destination registers; so
is a spill reload's (`LDL`), after the latency of the level its local memory is served from
(evaluator.local_memory; a wgmma reads its whole accumulator range).
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
    # Where spilled registers live (evaluator.local_memory; docs/static-model.md, "Spills"). None is fitted:
    # L1 and shared memory are one 256 KiB array per SM (H100 whitepaper), split at one of the shared-memory
    # capacities the CUDA C++ Programming Guide lists for compute capability 9.0; an L1 hit takes about 30-40
    # cycles in published Hopper microbenchmarks and the L1 moves one 128-byte line per clock. Past the L1 a
    # reload waits the loaded copy latency above, and its bytes cross the operand feed; past the L2 they also
    # share HBM: 4.8 TB/s on an H200 (datasheet) over 132 SMs at 1.83 GHz.
    unified_l1_shared_bytes: int = 256 * 1024
    shared_carveouts_kib: tuple[int, ...] = (0, 8, 16, 32, 64, 100, 132, 164, 196, 228)
    l1_latency: int = 32
    l1_bytes_per_clock: float = 128.0
    hbm_bytes_per_clock: float = 4.8e12 / 132 / 1.83e9


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
_WGMMA_SHAPE = re.compile(r"GMMA\.(\d+)x(\d+)x\d+\.(F16|F32|S32)")


def access_bytes(ins: Instruction) -> int:
    """Bytes one thread moves with a load or store: 8 or 16 for .64 / .128, else 4."""
    width = _WIDTH.search(ins.mnemonic)
    return int(width.group(1)) // 8 if width else 4


def _accumulator_registers(ins: Instruction) -> set[int]:
    """The registers a wgmma's accumulator spans: rows x cols over a warpgroup's 128 threads (two 16-bit values
    per register for an F16 accumulator); the SASS names only the first."""
    first = _REGISTER.search(ins.operands.split(",")[0])
    shape = _WGMMA_SHAPE.search(ins.mnemonic)
    if not first or not shape:
        return set()
    rows, cols, kind = int(shape.group(1)), int(shape.group(2)), shape.group(3)
    count = rows * cols // 128 // (2 if kind == "F16" else 1)
    return set(range(int(first.group(1)), int(first.group(1)) + count))


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
    named = {int(r) for r in _REGISTER.findall(operands)}
    return named | _accumulator_registers(ins) if ins.mnemonic.startswith(("HGMMA", "QGMMA")) else named


def estimate_sass(body: list[Instruction], table: dict[str, int], prologue_tma: int = 0,
                  costs: NvCosts = NvCosts(), producer_lead: int = 0,
                  spill_latency: float | None = None) -> LoopEstimate:
    """Steady-state estimate of the loop `body`; `prologue_tma` TMA loads are in flight when it starts.

    A spill reload's registers are ready `spill_latency` cycles after it issues (the level serving the kernel's
    local memory; None: no spills were placed, a reload costs its issue only).

    A consumer loop that waits on mbarriers but issues no TMA itself is fed by a producer partition
    (`producer_lead` > 0): the producer refills a slot as soon as the consumer frees it, so the copies for
    iteration i + lead - 1 start when iteration i starts, and the first `lead` iterations' copies are in
    flight at entry."""
    t = 0.0
    tensor_free = 0.0
    groups: list[float] = []                 # completion of committed wgmma groups
    ldg: list[tuple[set[int], float, bool]] = []   # an outstanding load's registers, completion, is a reload
    stalls = {"matrix": 0.0, "gmem_wait": 0.0, "tma_wait": 0.0, "wgmma_wait": 0.0, "barrier": 0.0,
              "spill_wait": 0.0}
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
            if ldg and kind not in ("global_load", "spill_load"):  # wait for the loads this instruction reads
                reads = _registers_read(ins)
                pending = [(done, local) for regs, done, local in ldg if regs & reads]
                if pending:
                    ready = max(t, *(done for done, _ in pending))
                    # the last load to complete names the wait
                    last_local = max(pending)[1]
                    stalls["spill_wait" if last_local else "gmem_wait"] += ready - t
                    t = ready
                    ldg = [(regs, done, local) for regs, done, local in ldg if not regs & reads]
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
                ldg.append((_registers_written(ins), t + costs.gmem_latency, False))
            elif kind == "spill_load" and spill_latency is not None:
                t += costs.alu_issue
                ldg.append((_registers_written(ins), t + spill_latency, True))
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
