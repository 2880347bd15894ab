"""Static record of one SASS kernel: registers and spills from ptxas, the tensor-core and copy mix from the
disassembly, occupancy, and the hot loop's static efficiency estimate."""
from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ...isa.common import hot_loop
from ...isa.loop_view import loop_view
from ...records import StaticRecord
from . import sass
from .model import NvCosts, estimate_sass

if TYPE_CHECKING:
    from ...compile import CompiledKernel
    from ..base import Target

EXCERPT_LINES = 60
STATIC_FIELDS = ("spill_store_bytes", "spill_load_bytes", "stack_frame_bytes", "wgmma_count", "hmma_count",
                 "tma_load_count", "tma_store_count", "cp_async_count", "matrix_shape", "occupancy_blocks_per_sm",
                 "occupancy_warps_per_sm")  # docs/eval-schema.md
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


def analyze_kernel(kernel: CompiledKernel, target: Target, costs: NvCosts) -> StaticRecord:
    """The static record of one kernel compiled for an NVIDIA target (docs/eval-schema.md)."""
    res = sass.ptxas_resource_usage(kernel.asm["ptx"], ptxas_arch(target))
    text = sass_text(kernel)
    instructions = [ins for _, ins in sass.parse_instructions(text)]
    mix_all = sass.instruction_mix(instructions)
    threads = kernel.num_warps * target.warp_size
    blocks_by_regs = target.register_file // max(1, res.registers * threads) if res.registers else NO_LIMIT_BLOCKS
    blocks_by_smem = target.shared_bytes_per_cu // kernel.shared_bytes if kernel.shared_bytes else NO_LIMIT_BLOCKS
    blocks = max(0, min(blocks_by_regs, blocks_by_smem, MAX_WARPS_PER_SM // max(1, kernel.num_warps)))
    details = {
        "spill_store_bytes": res.spill_store_bytes, "spill_load_bytes": res.spill_load_bytes,
        "stack_frame_bytes": res.stack_frame_bytes,
        "wgmma_count": mix_all["wgmma"], "hmma_count": mix_all["mma_sync"],
        "tma_load_count": mix_all["tma_load"], "tma_store_count": mix_all["tma_store"],
        "cp_async_count": mix_all["cp_async"],
        "matrix_shape": sorted({i.mnemonic for i in instructions if sass.is_matrix(i.mnemonic)}),
        "occupancy_blocks_per_sm": blocks, "occupancy_warps_per_sm": blocks * kernel.num_warps,
    }
    record = StaticRecord(
        kernel=kernel.name, grid=list(kernel.grid), num_warps=kernel.num_warps, registers=res.registers,
        spills=res.spill_store_bytes + res.spill_load_bytes, shared_bytes=kernel.shared_bytes, occupancy=blocks,
        matrix_instructions=mix_all["wgmma"] + mix_all["mma_sync"],
        hot_loop=None, hot_loop_spills=0, estimated_efficiency=None, estimate=None, details=details)
    loop = hot_loop(sass.find_loops(text), sass.is_matrix)
    if loop is None:
        return record
    mix = sass.instruction_mix(loop.instructions)
    first = loop.instructions[0].line if loop.instructions else 0
    prologue_tma = sum(1 for i in instructions if i.line < first and i.mnemonic.startswith("UTMALDG"))
    estimate = estimate_sass(loop.instructions, target.matrix_cycles, prologue_tma, costs)
    return replace(
        record,
        hot_loop={**mix, "header": loop.header, "excerpt": loop.excerpt(EXCERPT_LINES),
                  "view": loop_view(loop.instructions, sass.in_loop_view)},
        hot_loop_spills=mix["spill_store"] + mix["spill_load"],
        estimated_efficiency=round(estimate.estimated_efficiency, 4),
        estimate=estimate.to_dict(),
    )
