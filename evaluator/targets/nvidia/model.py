"""Static efficiency estimate of a Hopper SASS hot loop: an in-order issue model of one warp (mma.sync) or
warpgroup (wgmma) instruction stream.

wgmma (HGMMA/QGMMA) keeps the tensor pipe busy for the cycles its shape implies; HMMA costs come from the
target's `matrix_cycles` table; `WARPGROUP.DEPBAR` waits for committed wgmma groups and mbarrier try-waits
for the TMA loads of the stage they guard (the prologue's loads count as in flight at loop entry).
Constants are public figures, not fits (docs/static-model.md). Every figure is a static estimate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...isa.common import Instruction
from ..loop_estimate import ITERATIONS, LoopEstimate, steady_state
from . import sass


@dataclass(frozen=True)
class NvCosts:
    """Issue model for one warp (mma.sync) or warpgroup (wgmma) stream."""

    alu_issue: int = 1
    wgmma_issue: int = 2
    gmem_latency: int = 800        # ~450 ns HBM3e load latency at 1.8 GHz
    tma_latency: int = 800
    smem_latency: int = 30
    barrier: int = 20
    # mma.sync reaches ~2/3 of the wgmma rate on Hopper (public microbenchmarks): an HMMA keeps its
    # sub-core's tensor unit busy 1.5x its full-rate table cycles.
    hmma_busy_factor: float = 1.5


def hmma_cycles(ins: Instruction, table: dict[str, int]) -> int:
    """Full-rate tensor cycles of one warp-level HMMA from the target's table (the longest matching prefix)."""
    keys = [k for k in table if ins.mnemonic.startswith(k)]
    return table[max(keys, key=len)] if keys else 0


def matrix_cycles(ins: Instruction, table: dict[str, int]) -> int:
    """Tensor-pipe cycles of one matrix instruction: wgmma from its shape, HMMA from the table."""
    if ins.mnemonic.startswith(("HGMMA", "QGMMA")):
        return sass.hgmma_cycles(ins)
    return hmma_cycles(ins, table)


def estimate_sass(body: list[Instruction], table: dict[str, int], prologue_tma: int = 0,
                  costs: NvCosts = NvCosts()) -> LoopEstimate:
    """Steady-state estimate of the loop `body`; `prologue_tma` TMA loads are in flight when it starts."""
    t = 0.0
    tensor_free = 0.0
    groups: list[float] = []                 # completion of committed wgmma groups
    tma: list[float] = [costs.tma_latency] * prologue_tma
    ldg: list[float] = []
    stalls = {"matrix": 0.0, "gmem_wait": 0.0, "tma_wait": 0.0, "wgmma_wait": 0.0, "barrier": 0.0}
    matrix = sum(matrix_cycles(i, table) for i in body if sass.is_matrix(i.mnemonic))
    tma_per_wait = max(1, sum(1 for i in body if i.mnemonic.startswith("UTMALDG")) //
                       max(1, sum(1 for i in body if "TRYWAIT" in i.mnemonic or i.mnemonic.startswith("SYNCS.PHASECHK"))))
    starts = []
    for _ in range(ITERATIONS):
        starts.append(t)
        for ins in body:
            m = ins.mnemonic
            kind = sass.classify(ins)
            if kind == "wgmma":
                start = max(t, tensor_free)
                stalls["matrix"] += start - t
                tensor_free = start + sass.hgmma_cycles(ins)
                t = start + costs.wgmma_issue
                if "gsb0" in ins.operands:
                    groups.append(tensor_free)
            elif kind == "mma_sync":
                if ldg:  # operands come straight from global loads of this iteration
                    ready = max(t, *ldg)
                    stalls["gmem_wait"] += ready - t
                    t, ldg = ready, []
                busy = hmma_cycles(ins, table) * costs.hmma_busy_factor
                start = max(t, tensor_free)
                stalls["matrix"] += start - t
                tensor_free = start + busy
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
                ldg.append(t + costs.gmem_latency)
            elif kind in ("shared_store", "shared_load") and ldg:
                ready = max(t, *ldg)
                stalls["gmem_wait"] += ready - t
                t, ldg = ready + costs.alu_issue, []
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
            else:
                t += costs.alu_issue
    starts.append(t)
    return steady_state(matrix, starts, stalls)
