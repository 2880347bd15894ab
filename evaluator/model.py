"""Static efficiency estimate of a hot loop: an in-order issue model over the compiled loop body.

One instruction stream (a wave on gfx950, a warp or warpgroup on sm90) is replayed for several
iterations. Each instruction costs its issue cycles; matrix instructions occupy the matrix unit for
their table cycles (issue continues underneath, as on the hardware); memory instructions complete after
a latency, and the waits the compiler emitted (`s_waitcnt`, wgmma/TMA barriers) stall until the data is
there. The steady-state iteration time T gives

    estimated_efficiency = matrix-unit cycles per iteration / T

the counterpart of the seed's MFMA efficiency. Every figure this module produces is a static estimate.
The constants are public figures (vendor ISA guides, microbenchmark literature), not fits to any
measured efficiency; docs/static-model.md lists them and what the model leaves out.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from .isa import amdgcn, sass
from .isa.common import Instruction

ITERATIONS = 8          # replayed iterations; the last half gives the steady state


@dataclass(frozen=True)
class AmdCosts:
    """gfx950 issue model for one wave64 on one SIMD."""

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


@dataclass(frozen=True)
class NvCosts:
    """sm90 issue model for one warp (mma.sync) or warpgroup (wgmma) stream."""

    alu_issue: int = 1
    wgmma_issue: int = 2
    gmem_latency: int = 800        # ~450 ns HBM3e load latency at 1.8 GHz
    tma_latency: int = 800
    smem_latency: int = 30
    barrier: int = 20
    hmma_16816_busy: int = 6       # per warp; mma.sync reaches ~2/3 of the wgmma rate on Hopper
    hmma_16816_matrix: int = 4     # the same work at the full tensor rate: 2048 FMA / 512 per sub-core clock


@dataclass(frozen=True)
class LoopEstimate:
    matrix_cycles: int
    iteration_cycles: float
    estimated_efficiency: float
    bound: str                      # what the model says limits the loop
    stall_cycles: dict

    def to_dict(self) -> dict:
        return {"kind": "static_estimate", "matrix_cycles_per_iteration": self.matrix_cycles,
                "estimated_iteration_cycles": round(self.iteration_cycles, 1),
                "estimated_efficiency": round(self.estimated_efficiency, 4), "bound": self.bound,
                "stall_cycles": {k: round(v, 1) for k, v in self.stall_cycles.items()}}


def _finish(matrix: int, times: list[float], stalls: dict) -> LoopEstimate:
    half = len(times) // 2
    per_iter = (times[-1] - times[half]) / max(1, len(times) - 1 - half)
    per_iter = max(per_iter, 1.0)
    eff = min(1.0, matrix / per_iter) if matrix else 0.0
    steady = {k: v / ITERATIONS for k, v in stalls.items()}
    bound = "matrix" if eff > 0.9 else max(steady, key=steady.get) if any(steady.values()) else "issue"
    return LoopEstimate(matrix, per_iter, eff, bound, steady)


# ----------------------------------------------------------------------------------------------- gfx950

_WAIT = re.compile(r"(vmcnt|lgkmcnt)\((\d+)\)")
_LDS_WIDTH = re.compile(r"_[bui](\d+)")  # ds_read_b128, ds_read_u8, ds_write_b64 ...
# f8f6f4 MFMAs run at the fp8 rate when either operand is 8-bit, else at the fp4 rate (fp6 = fp4 on CDNA4).
_RATE_CLASS = {"fp8": "fp8", "bf8": "fp8", "fp6": "fp4", "bf6": "fp4", "fp4": "fp4"}


def _lds_bytes(mnemonic: str) -> int:
    width = _LDS_WIDTH.search(mnemonic)
    return max(1, int(width.group(1)) // 8) if width else 4


def mfma_cycles(ins: Instruction, table: dict[str, int]) -> int:
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
    t = 0.0
    matrix_free = lds_free = 0.0
    vm: list[float] = []      # completion times of outstanding vector-memory operations, in issue order
    lgkm: list[float] = []
    stalls = {"matrix": 0.0, "vmem_wait": 0.0, "lds_wait": 0.0, "lds_pipe": 0.0, "barrier": 0.0}
    matrix = sum(mfma_cycles(i, mfma_table) for i in body if amdgcn.is_mfma(i.mnemonic))
    starts = []
    for _ in range(ITERATIONS):
        starts.append(t)
        for ins in body:
            kind = amdgcn.classify(ins)
            if kind == "mfma":
                start = max(t, matrix_free)
                stalls["matrix"] += start - t
                matrix_free = start + mfma_cycles(ins, mfma_table)
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
            elif kind == "valu":
                t += costs.valu_issue
            else:
                t += costs.salu_issue
    starts.append(t)
    return _finish(matrix, starts, stalls)


# ------------------------------------------------------------------------------------------------- sm90


def estimate_sass(body: list[Instruction], prologue_tma: int = 0, costs: NvCosts = NvCosts()) -> LoopEstimate:
    t = 0.0
    tensor_free = 0.0
    groups: list[float] = []                 # completion of committed wgmma groups
    tma: list[float] = [costs.tma_latency] * prologue_tma
    ldg: list[float] = []
    stalls = {"matrix": 0.0, "gmem_wait": 0.0, "tma_wait": 0.0, "wgmma_wait": 0.0, "barrier": 0.0}
    matrix = 0
    for ins in body:
        if ins.mnemonic.startswith(("HGMMA", "QGMMA")):
            matrix += sass.hgmma_cycles(ins)
        elif ins.mnemonic.startswith("HMMA"):
            matrix += costs.hmma_16816_matrix if ".16816" in ins.mnemonic else costs.hmma_16816_matrix // 2
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
                busy = costs.hmma_16816_busy if ".16816" in m else costs.hmma_16816_busy // 2
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
    return _finish(matrix, starts, stalls)
