"""Static record of one AMDGCN kernel: registers, spills, LDS and occupancy from the compiler's metadata, the
MFMA mix, and the hot loop's static efficiency estimate."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from ...isa.common import Loop
from ...isa.loop_view import loop_view
from ...isa.ttgir import shared_layout_kinds
from ...records import StaticRecord
from ...throughput import ModelInputs, Residency
from ...work import MatrixWork, matrix_work
from . import amdgcn
from .model import AmdCosts, estimate_amdgcn

if TYPE_CHECKING:
    from ...compile import CompiledKernel
    from ..base import Target

EXCERPT_LINES = 60
STATIC_FIELDS = ("arch_vgprs", "agprs", "total_vgprs", "sgprs", "vgpr_spill_count", "sgpr_spill_count",
                 "scratch_bytes", "lds_bytes", "occupancy_waves_per_simd", "occupancy_limit_vgpr",
                 "occupancy_limit_lds", "mfma_count", "mfma_shape", "shared_layouts")  # docs/eval-schema.md
LDS_CONFLICT_WAYS = 4   # an unpadded, unswizzled operand tile (the seed's 64- vs 16-cycle ds_read_b128)
VGPR_GRANULE = 8
MAX_WORKGROUPS_PER_CU = 32   # CDNA3/CDNA4 ISA guides: workgroup slots per CU


def occupancy(total_vgprs: int, lds_bytes: int, num_warps: int, target: Target) -> dict:
    """Waves per SIMD allowed by the register file and by LDS; the smaller one wins."""
    vgpr_alloc = max(VGPR_GRANULE, math.ceil(total_vgprs / VGPR_GRANULE) * VGPR_GRANULE)
    by_vgpr = min(target.max_waves_per_simd, target.register_file // vgpr_alloc)
    waves_per_wg_per_simd = max(1, math.ceil(num_warps / target.simds_per_cu))
    if lds_bytes:
        wgs = target.shared_bytes_per_cu // lds_bytes
        by_lds = min(target.max_waves_per_simd, wgs * num_warps // target.simds_per_cu)
    else:
        by_lds = target.max_waves_per_simd
    waves = min(by_vgpr, by_lds)
    waves = (waves // waves_per_wg_per_simd) * waves_per_wg_per_simd
    return {"occupancy_waves_per_simd": waves, "occupancy_limit_vgpr": by_vgpr, "occupancy_limit_lds": by_lds}


def residency(total_vgprs: int, lds_bytes: int, warps: int, target: Target) -> Residency:
    """Workgroups one CU holds at once, by each limit: registers, LDS, wave slots, workgroup slots."""
    waves_per_simd = max(1, math.ceil(warps / target.simds_per_cu))
    vgpr_alloc = max(VGPR_GRANULE, math.ceil(total_vgprs / VGPR_GRANULE) * VGPR_GRANULE)
    limits = {
        "registers": (target.register_file // vgpr_alloc) // waves_per_simd,
        "lds": target.shared_bytes_per_cu // lds_bytes if lds_bytes else MAX_WORKGROUPS_PER_CU,
        "wave_slots": target.max_waves_per_simd // waves_per_simd,
        "workgroup_slots": MAX_WORKGROUPS_PER_CU,
    }
    return Residency(max(0, min(limits.values())), limits)


def model_inputs(flow, loop, estimate, work: MatrixWork, total_vgprs: int, lds: int, target: Target,
                 costs: AmdCosts) -> ModelInputs:
    """The hot-loop estimate, residency and per-tile overheads the kernel-level estimate needs."""
    after = flow.after(loop)
    epilogue = estimate_amdgcn(after, target.matrix_cycles, costs).iteration_cycles if after else 0.0
    tile_loads = any(amdgcn.classify(i) in ("global_load", "buffer_load", "direct_to_lds_load") for i in after)
    return ModelInputs.for_loop(work, estimate, residency(total_vgprs, lds, work.total_warps, target),
                                target.simds_per_cu, costs.operand_bytes_per_clock, float(costs.vmem_latency),
                                tile_loads, epilogue, lds_share=costs.lds_bytes_per_cycle / costs.cu_lds_bytes_per_clock)


def analyze_kernel(kernel: CompiledKernel, target: Target, costs: AmdCosts) -> StaticRecord:
    """The static record of one kernel compiled for an AMD target (docs/eval-schema.md)."""
    text = kernel.asm["amdgcn"]
    res = amdgcn.parse_resource_usage(text)
    instructions = [ins for _, ins in amdgcn.parse_instructions(text)]
    mfmas = [i for i in instructions if amdgcn.is_mfma(i.mnemonic)]
    layouts = shared_layout_kinds(kernel.asm.get("ttgir", ""))
    lds = kernel.shared_bytes
    details = {
        "arch_vgprs": res.arch_vgprs, "agprs": res.agprs, "total_vgprs": res.total_vgprs, "sgprs": res.sgprs,
        "vgpr_spill_count": res.vgpr_spill_count, "sgpr_spill_count": res.sgpr_spill_count,
        "scratch_bytes": res.scratch_bytes, "lds_bytes": lds,
        **occupancy(res.total_vgprs, lds, kernel.num_warps, target),
        "mfma_count": len(mfmas),
        "mfma_shape": sorted({i.mnemonic + (f":{amdgcn.mfma_format(i)}" if amdgcn.mfma_format(i) else "")
                              for i in mfmas}),
        "shared_layouts": layouts,
    }
    record = StaticRecord(
        kernel=kernel.name, grid=list(kernel.grid), num_warps=kernel.num_warps, registers=res.total_vgprs,
        spills=res.vgpr_spill_count + res.sgpr_spill_count, shared_bytes=lds,
        occupancy=details["occupancy_waves_per_simd"], matrix_instructions=len(mfmas),
        hot_loop=None, hot_loop_spills=0, estimated_efficiency=None, estimate=None, details=details)
    flow = amdgcn.control_flow(text)
    loop = flow.innermost_carrying(amdgcn.is_mfma)
    if loop is None:
        return record
    body = flow.loop_instructions(loop)
    mix = amdgcn.instruction_mix(body)
    conflict = LDS_CONFLICT_WAYS if "unswizzled_shared" in layouts and "padded_shared" not in layouts else 1
    loop_costs = replace(costs, bank_conflict_ways=conflict)
    estimate = estimate_amdgcn(body, target.matrix_cycles, loop_costs)
    work = matrix_work(kernel.asm.get("ttgir", ""))
    return replace(
        record,
        hot_loop={**mix, "header": loop.header, "depth": loop.depth, "mfma_cycles": estimate.matrix_cycles,
                  "excerpt": Loop(loop.header, loop.depth, body).excerpt(EXCERPT_LINES),
                  "view": loop_view(body, amdgcn.in_loop_view)},
        hot_loop_spills=mix["scratch_load"] + mix["scratch_store"],
        estimated_efficiency=round(estimate.estimated_efficiency, 4),
        estimate=estimate.to_dict(),
        model=model_inputs(flow, loop, estimate, work, res.total_vgprs, lds, target, loop_costs).to_dict()
        if work.k_loop_line is not None else None,
    )
