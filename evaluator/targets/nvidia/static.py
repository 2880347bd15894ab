"""Static record of one SASS kernel: registers and spills from ptxas, the tensor-core and copy mix from the
disassembly, occupancy, and the hot loop's static efficiency estimate."""
from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING

from ...isa.common import Instruction, Loop
from ...isa.loop_view import loop_view
from ...local_memory import CacheLevel, SpillPlacement, place_spills
from ...records import StaticRecord
from ...throughput import ModelInputs, Residency
from ...work import MatrixWork, matrix_work
from . import sass
from .model import NvCosts, access_bytes, estimate_sass

if TYPE_CHECKING:
    from ...compile import CompiledKernel
    from ..base import Target

EXCERPT_LINES = 60
STATIC_FIELDS = ("spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "wgmma_count", "hmma_count",
                 "tcgen05_count", "tma_load_count", "tma_store_count", "cp_async_count", "matrix_shape",
                 "occupancy_blocks_per_sm", "occupancy_warps_per_sm")  # docs/eval-schema.md
MAX_WARPS_PER_SM = 64
NO_LIMIT_BLOCKS = 32     # Hopper's resident-block limit per SM: what a kernel using no registers/smem gets


def ptxas_arch(target: Target) -> str:
    """ptxas's --gpu-name for the target: the arch-specific variant ("sm_90a"), which wgmma and TMA need."""
    return f"sm_{target.arch}a"


def sass_text(kernel: CompiledKernel) -> str:
    """The kernel's SASS, disassembled from its cubin on first use and kept in `kernel.asm`."""
    if "sass" not in kernel.asm:
        kernel.asm["sass"] = sass.disassemble(kernel.asm["cubin"])
    return kernel.asm["sass"]


def residency(registers: int, shared_bytes: int, warps: int, target: Target) -> Residency:
    """CTAs one SM holds at once, by each limit: registers, shared memory, warp slots, block slots."""
    threads = warps * target.warp_size
    limits = {
        "registers": target.register_file // (registers * threads) if registers else NO_LIMIT_BLOCKS,
        "shared": target.shared_bytes_per_cu // shared_bytes if shared_bytes else NO_LIMIT_BLOCKS,
        "warp_slots": MAX_WARPS_PER_SM // max(1, warps),
        "block_slots": NO_LIMIT_BLOCKS,
    }
    return Residency(max(0, min(limits.values())), limits)


_LOADS = ("tma_load", "global_load", "cp_async")


def spill_levels(shared_per_sm: int, target: Target, costs: NvCosts) -> tuple[CacheLevel, ...]:
    """Where local memory can be served from, nearest first: the L1 beside the shared-memory carveout the
    resident CTAs need (the smallest listed capacity that holds them), the L2, HBM."""
    carveout = next((kib * 1024 for kib in costs.shared_carveouts_kib if kib * 1024 >= shared_per_sm),
                    costs.shared_carveouts_kib[-1] * 1024)
    return (
        CacheLevel("L1", max(0, costs.unified_l1_shared_bytes - carveout), True, costs.l1_latency,
                   costs.l1_bytes_per_clock, False),
        CacheLevel("L2", target.last_level_cache_bytes, False, costs.gmem_latency, None, True),
        CacheLevel("HBM", float("inf"), False, costs.gmem_latency, costs.hbm_bytes_per_clock, True),
    )


def spill_placement(stack_bytes: int, work: MatrixWork, warps: int, shared_bytes: int, ctas_per_sm: int,
                    grid_ctas: int, target: Target, costs: NvCosts) -> SpillPlacement | None:
    """The level serving the kernel's local memory: the stack frame ptxas reports, for every thread of the
    partition that runs the K loop (the one that spills its accumulator), in every resident CTA."""
    threads = (work.consumer_warps or warps) * target.warp_size
    resident = max(1, min(ctas_per_sm, math.ceil(grid_ctas / target.compute_units)))   # the grid may hold fewer
    busy_sms = min(target.compute_units, max(1, math.ceil(grid_ctas / resident)))   # SMs the grid fills at once
    return place_spills(stack_bytes, threads, resident, busy_sms, spill_levels(shared_bytes * resident, target, costs))


def spill_bytes(body: list[Instruction], threads: int) -> float:
    """Bytes one CTA's spill stores and reloads move per hot-loop iteration."""
    return float(sum(access_bytes(i) for i in body if sass.is_spill(i.mnemonic)) * threads)


def model_inputs(flow, loop, estimate, work: MatrixWork, registers: int, shared_bytes: int, target: Target,
                 costs: NvCosts, spills: SpillPlacement | None = None, loop_spill_bytes: float = 0.0) -> ModelInputs:
    """The hot-loop estimate, residency and per-tile overheads the kernel-level estimate needs."""
    after = flow.after(loop)
    epilogue = estimate_sass(after, target.matrix_cycles, 0, costs).iteration_cycles if after else 0.0
    tile_loads = any(sass.classify(i) in _LOADS for i in after)
    tma = any(sass.classify(i) == "tma_load" for b in flow.blocks for i in b.instructions)
    return ModelInputs.for_loop(work, estimate, residency(registers, shared_bytes, work.total_warps, target),
                                target.simds_per_cu, costs.operand_bytes_per_clock,
                                float(costs.tma_latency if tma else costs.gmem_latency), tile_loads, epilogue,
                                spill_bytes_per_iteration=loop_spill_bytes if spills else 0.0, spills=spills)


def analyze_kernel(kernel: CompiledKernel, target: Target, costs: NvCosts) -> StaticRecord:
    """The static record of one kernel compiled for an NVIDIA target (docs/eval-schema.md)."""
    res = sass.ptxas_resource_usage(kernel.asm["ptx"], ptxas_arch(target))
    text = sass_text(kernel)
    instructions = [ins for _, ins in sass.parse_instructions(text)]
    mix_all = sass.instruction_mix(instructions)
    work = matrix_work(kernel.asm.get("ttgir", ""))  # before the loop estimate: it says who feeds the K loop
    blocks = residency(res.registers, kernel.shared_bytes, max(kernel.num_warps, work.total_warps), target).ctas_per_unit
    details = {
        "spill_store_bytes": res.spill_store_bytes, "spill_load_bytes": res.spill_load_bytes,
        "stack_frame_bytes": res.stack_frame_bytes,
        "wgmma_count": mix_all["wgmma"], "hmma_count": mix_all["mma_sync"], "tcgen05_count": mix_all["tcgen05"],
        "tma_load_count": mix_all["tma_load"], "tma_store_count": mix_all["tma_store"],
        "cp_async_count": mix_all["cp_async"],
        "matrix_shape": sorted({i.mnemonic for i in instructions if sass.is_matrix(i.mnemonic)}),
        "occupancy_blocks_per_sm": blocks, "occupancy_warps_per_sm": blocks * kernel.num_warps,
    }
    record = StaticRecord(
        kernel=kernel.name, grid=list(kernel.grid), num_warps=kernel.num_warps, registers=res.registers,
        spills=res.spill_store_bytes + res.spill_load_bytes, shared_bytes=kernel.shared_bytes, occupancy=blocks,
        matrix_instructions=mix_all["wgmma"] + mix_all["mma_sync"] + mix_all["tcgen05"],
        hot_loop=None, hot_loop_spills=0, estimated_efficiency=None, estimate=None, details=details)
    flow = sass.control_flow(text)
    loop = flow.innermost_carrying(sass.is_matrix)
    if loop is None:
        return record
    body = flow.loop_instructions(loop)
    mix = sass.instruction_mix(body)
    hot = {**mix, "header": loop.header, "depth": loop.depth,
           "excerpt": Loop(loop.header, loop.depth, body).excerpt(EXCERPT_LINES),
           "view": loop_view(body, sass.in_loop_view)}
    if mix["tcgen05"]:
        # A tcgen05 MMA's shape is in its instruction descriptor, not in the SASS text: the model cannot cost
        # it, so it gives no estimate rather than a wrong one.
        return replace(record, hot_loop=hot, hot_loop_spills=mix["spill_store"] + mix["spill_load"])
    first = body[0].line if body else 0
    prologue_tma = sum(1 for i in instructions if i.line < first and i.mnemonic.startswith("UTMALDG"))
    spills = spill_placement(res.stack_frame_bytes, work, kernel.num_warps, kernel.shared_bytes, blocks,
                             math.prod(kernel.grid), target, costs)
    estimate = estimate_sass(body, target.matrix_cycles, prologue_tma, costs,
                             producer_lead=max(1, work.ring_depth - 1) if work.warp_specialized else 0,
                             spill_latency=spills.latency_cycles if spills else None)
    loop_spill_bytes = spill_bytes(body, (work.consumer_warps or kernel.num_warps) * target.warp_size)
    return replace(
        record,
        hot_loop=hot,
        hot_loop_spills=mix["spill_store"] + mix["spill_load"],
        estimated_efficiency=round(estimate.estimated_efficiency, 4),
        estimate=estimate.to_dict(),
        model=model_inputs(flow, loop, estimate, work, res.registers, kernel.shared_bytes, target, costs, spills,
                           loop_spill_bytes).to_dict()
        if work.k_loop_line is not None else None,
    )
