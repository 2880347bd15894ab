"""Static efficiency estimate of an AMDGCN hot loop: an in-order issue model of one wave64 on its SIMD.

Each instruction costs its issue cycles; MFMAs occupy the matrix unit for their cycles in the target's
`matrix_cycles` table (issue continues underneath, as on the hardware); memory instructions complete after
a latency, and the `s_waitcnt` the compiler emitted stall until the data is there; LDS instructions also
occupy the LDS pipe for bytes / bandwidth cycles times the bank-conflict ways. The constants are public
figures (vendor ISA guides, microbenchmark literature), not fits to any measured efficiency;
docs/static-model.md lists them and what the model leaves out. Every figure is a static estimate.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from ...isa.common import Instruction
from ..loop_estimate import ITERATIONS, LoopEstimate, SegmentMarks, steady_state
from . import amdgcn


@dataclass(frozen=True)
class AmdCosts:
    """Issue model for one wave64 on one SIMD (CDNA3/CDNA4)."""

    valu_issue: int = 4            # 16-lane SIMD, 64 lanes: 4 passes
    salu_issue: int = 1
    mfma_issue: int = 4
    vmem_issue: int = 4
    lds_issue: int = 4
    vmem_latency: int = 1000       # L2/MALL hit under load, ~420 ns at 2.4 GHz
    scratch_latency: int = 500     # spill traffic stays in L2
    lds_latency: int = 128
    scalar_load_latency: int = 200
    barrier: int = 16
    # LDS pipe cycles per instruction without bank conflicts (the seed: ds_read_b128 issues in 16 cycles).
    lds_bytes_per_cycle: int = 64
    bank_conflict_ways: int = 1    # 4 for an unpadded, unswizzled operand tile (the seed's measurement)
    # The CU's LDS bandwidth, shared by every wave of every resident workgroup: the CDNA3 ISA guide's 128 bytes
    # per clock per CU, assumed unchanged on CDNA4 (not validated: no AMD measurement here).
    cu_lds_bytes_per_clock: int = 128
    # Operand bytes per clock into one CU from the cache hierarchy, shared by its resident workgroups:
    # not modelled on gfx950 (no AMD measurement to fit it on; docs/static-model.md).
    operand_bytes_per_clock: float | None = None


_WAIT = re.compile(r"(vmcnt|lgkmcnt)\((\d+)\)")
_LDS_WIDTH = re.compile(r"_[bui](\d+)")  # ds_read_b128, ds_read_u8, ds_write_b64 ...
# f8f6f4 MFMAs run at the fp8 rate when either operand is 8-bit, else at the fp4 rate (fp6 = fp4 on CDNA4).
_RATE_CLASS = {"fp8": "fp8", "bf8": "fp8", "fp6": "fp4", "bf6": "fp4", "fp4": "fp4"}


def _lds_bytes(mnemonic: str) -> int:
    width = _LDS_WIDTH.search(mnemonic)
    return max(1, int(width.group(1)) // 8) if width else 4


def mfma_cycles(ins: Instruction, table: dict[str, int]) -> int:
    """Matrix-unit cycles of one MFMA: the table entry, else 32 for a 32x32 shape and 16 otherwise."""
    fmt = amdgcn.mfma_format(ins)
    key = ins.mnemonic
    if fmt:
        classes = {_RATE_CLASS.get(f, "fp8") for f in fmt.split("x")}
        key = f"{ins.mnemonic}:{'fp8' if 'fp8' in classes else 'fp4'}"
    if key in table:
        return table[key]
    shape = re.search(r"(\d+)x(\d+)x(\d+)", ins.mnemonic)
    return 32 if shape and shape.group(1) == "32" else 16


def estimate_amdgcn(body: list[Instruction], mfma_table: dict[str, int], costs: AmdCosts = AmdCosts()) -> LoopEstimate:
    """Steady-state estimate of the loop `body`, MFMA costs from `mfma_table` (the target's matrix_cycles)."""
    t = 0.0
    matrix_free = lds_free = 0.0
    vm: list[float] = []      # completion times of outstanding vector-memory operations, in issue order
    lgkm: list[float] = []
    stalls = {"matrix": 0.0, "vmem_wait": 0.0, "lds_wait": 0.0, "lds_pipe": 0.0, "barrier": 0.0}
    matrix = sum(mfma_cycles(i, mfma_table) for i in body if amdgcn.is_mfma(i.mnemonic))
    starts = []
    marks = SegmentMarks()        # the last iteration, cut at its barriers
    issued_matrix = lds_busy = 0.0
    for iteration in range(ITERATIONS):
        starts.append(t)
        last = iteration == ITERATIONS - 1
        if last:
            marks.cut(t, issued_matrix, stalls)
        for ins in body:
            kind = amdgcn.classify(ins)
            if kind == "mfma":
                start = max(t, matrix_free)
                stalls["matrix"] += start - t
                cycles = mfma_cycles(ins, mfma_table)
                matrix_free = start + cycles
                issued_matrix += cycles
                t = start + costs.mfma_issue
            elif kind in ("global_load", "buffer_load", "direct_to_lds_load", "global_store"):
                t += costs.vmem_issue
                vm.append(t + costs.vmem_latency)
            elif kind in ("scratch_load", "scratch_store"):
                t += costs.vmem_issue
                vm.append(t + costs.scratch_latency)
            elif kind in ("ds_read", "ds_write"):
                busy = _lds_bytes(ins.mnemonic) * 64 / costs.lds_bytes_per_cycle
                if kind == "ds_read":
                    busy *= costs.bank_conflict_ways
                start = max(t, lds_free)
                stalls["lds_pipe"] += start - t
                lds_free = start + busy
                lds_busy += busy
                t = start + costs.lds_issue
                lgkm.append(lds_free + costs.lds_latency)
            elif kind == "scalar_load":
                t += costs.salu_issue
                lgkm.append(t + costs.scalar_load_latency)
            elif kind == "s_waitcnt":
                t += costs.salu_issue
                for counter, n in _WAIT.findall(ins.operands):
                    queue, key = (vm, "vmem_wait") if counter == "vmcnt" else (lgkm, "lds_wait")
                    ready = t
                    while len(queue) > int(n):
                        ready = max(ready, queue.pop(0))
                    stalls[key] += ready - t
                    t = ready
            elif kind == "barrier":
                t += costs.barrier
                stalls["barrier"] += costs.barrier
                if last:
                    marks.cut(t, issued_matrix, stalls)
            elif kind == "valu":
                t += costs.valu_issue
            else:
                t += costs.salu_issue
    starts.append(t)
    marks.cut(t, issued_matrix, stalls)
    return steady_state(matrix, starts, stalls, marks, lds_busy)
