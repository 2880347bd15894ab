"""Static report: what the compiler produced for each kernel a launch compiled, read off its output.

Everything here is read from real compiler output for the target (registers, spills, LDS/shared,
instruction counts); the one modelled figure, `estimated_efficiency`, is labelled a static estimate.
"""
from __future__ import annotations

import math
import re
from pathlib import Path

from .compile import CompiledKernel
from .isa import amdgcn, sass
from .isa.common import Loop
from .model import AmdCosts, estimate_amdgcn, estimate_sass
from .targets import Target

EXCERPT_LINES = 60


def _hot_loop(loops: list[Loop], is_matrix) -> Loop | None:
    """The loop with the most matrix instructions; on a tie the smaller body, i.e. the innermost loop
    (a persistent or warp-specialized kernel's tile loop contains its K loop)."""
    scored = [(lp.count(is_matrix), len(lp.instructions), lp) for lp in loops]
    scored = [s for s in scored if s[0] > 0]
    return max(scored, key=lambda s: (s[0], -s[1]))[2] if scored else None


def shared_layout_kinds(ttgir: str) -> list[str]:
    """Shared-memory encodings of explicit allocations in the TTGIR (padded, swizzled, nvmma, plain)."""
    kinds = []
    for enc in re.findall(r"#ttg\.(padded_shared|swizzled_shared|nvmma_shared)<\{?([^>]*)>", ttgir):
        name, body = enc
        if name == "swizzled_shared" and re.search(r"maxPhase = 1\b", body):
            name = "unswizzled_shared"
        kinds.append(name)
    return sorted(set(kinds))


def gfx950_occupancy(total_vgprs: int, lds_bytes: int, num_warps: int, target: Target) -> dict:
    """Waves per SIMD allowed by the register file and by LDS; the smaller one wins."""
    granule = 8
    vgpr_alloc = max(granule, math.ceil(total_vgprs / granule) * granule)
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


def analyze_gfx950(kernel: CompiledKernel, target: Target) -> dict:
    text = kernel.asm["amdgcn"]
    res = amdgcn.parse_resource_usage(text)
    instructions = [ins for _, ins in amdgcn.parse_instructions(text)]
    mfmas = [i for i in instructions if amdgcn.is_mfma(i.mnemonic)]
    layouts = shared_layout_kinds(kernel.asm.get("ttgir", ""))
    lds = kernel.shared_bytes
    report = {
        "kernel": kernel.name, "grid": list(kernel.grid), "num_warps": kernel.num_warps,
        "arch_vgprs": res.arch_vgprs, "agprs": res.agprs, "total_vgprs": res.total_vgprs, "sgprs": res.sgprs,
        "vgpr_spill_count": res.vgpr_spill_count, "sgpr_spill_count": res.sgpr_spill_count,
        "scratch_bytes": res.scratch_bytes, "lds_bytes": lds,
        **gfx950_occupancy(res.total_vgprs, lds, kernel.num_warps, target),
        "mfma_count": len(mfmas),
        "mfma_shape": sorted({i.mnemonic + (f":{amdgcn.mfma_format(i)}" if amdgcn.mfma_format(i) else "")
                              for i in mfmas}),
        "shared_layouts": layouts,
    }
    # The common names every target reports (docs/eval-schema.md).
    report.update(registers=res.total_vgprs, spills=res.vgpr_spill_count + res.sgpr_spill_count,
                  shared_bytes=lds, occupancy=report["occupancy_waves_per_simd"], matrix_instructions=len(mfmas))
    loop = _hot_loop(amdgcn.find_loops(text), amdgcn.is_mfma)
    if loop is None:
        report.update(hot_loop=None, hot_loop_spills=0, estimated_efficiency=None, estimate=None)
        return report
    mix = amdgcn.instruction_mix(loop.instructions)
    conflict = 4 if "unswizzled_shared" in layouts and "padded_shared" not in layouts else 1
    estimate = estimate_amdgcn(loop.instructions, target.matrix_cycles, AmdCosts(bank_conflict_ways=conflict))
    report.update(
        hot_loop={**mix, "header": loop.header, "mfma_cycles": estimate.matrix_cycles,
                  "excerpt": loop.excerpt(EXCERPT_LINES)},
        hot_loop_spills=mix["scratch_load"] + mix["scratch_store"],
        estimated_efficiency=round(estimate.estimated_efficiency, 4),
        estimate=estimate.to_dict(),
    )
    return report


def _sass_text(kernel: CompiledKernel) -> str:
    if "sass" not in kernel.asm:
        kernel.asm["sass"] = sass.disassemble(kernel.asm["cubin"])
    return kernel.asm["sass"]


def analyze_sm90(kernel: CompiledKernel, target: Target) -> dict:
    res = sass.ptxas_resource_usage(kernel.asm["ptx"], "sm_90a")
    text = _sass_text(kernel)
    instructions = [ins for _, ins in sass.parse_instructions(text)]
    mix_all = sass.instruction_mix(instructions)
    threads = kernel.num_warps * 32
    blocks_by_regs = target.register_file // max(1, res.registers * threads) if res.registers else 32
    blocks_by_smem = target.shared_bytes_per_cu // kernel.shared_bytes if kernel.shared_bytes else 32
    blocks = max(0, min(blocks_by_regs, blocks_by_smem, 64 // max(1, kernel.num_warps)))
    report = {
        "kernel": kernel.name, "grid": list(kernel.grid), "num_warps": kernel.num_warps,
        "registers": res.registers, "spill_store_bytes": res.spill_store_bytes,
        "spill_load_bytes": res.spill_load_bytes, "stack_frame_bytes": res.stack_frame_bytes,
        "shared_bytes": kernel.shared_bytes,
        "wgmma_count": mix_all["wgmma"], "hmma_count": mix_all["mma_sync"],
        "tma_load_count": mix_all["tma_load"], "tma_store_count": mix_all["tma_store"],
        "cp_async_count": mix_all["cp_async"],
        "matrix_shape": sorted({i.mnemonic for i in instructions if sass.is_matrix(i.mnemonic)}),
        "occupancy_blocks_per_sm": blocks, "occupancy_warps_per_sm": blocks * kernel.num_warps,
    }
    report.update(spills=res.spill_store_bytes + res.spill_load_bytes, occupancy=blocks,
                  matrix_instructions=mix_all["wgmma"] + mix_all["mma_sync"])
    loops = sass.find_loops(text)
    loop = _hot_loop(loops, sass.is_matrix)
    if loop is None:
        report.update(hot_loop=None, hot_loop_spills=0, estimated_efficiency=None, estimate=None)
        return report
    mix = sass.instruction_mix(loop.instructions)
    first = loop.instructions[0].line if loop.instructions else 0
    prologue_tma = sum(1 for i in instructions if i.line < first and i.mnemonic.startswith("UTMALDG"))
    estimate = estimate_sass(loop.instructions, prologue_tma)
    report.update(
        hot_loop={**mix, "header": loop.header, "excerpt": loop.excerpt(EXCERPT_LINES)},
        hot_loop_spills=mix["spill_store"] + mix["spill_load"],
        estimated_efficiency=round(estimate.estimated_efficiency, 4),
        estimate=estimate.to_dict(),
    )
    return report


def analyze(kernels: list[CompiledKernel], target: Target) -> dict:
    """Report every compiled kernel; the headline is the one doing the matrix work."""
    analyse = analyze_gfx950 if target.backend == "hip" else analyze_sm90
    reports = [analyse(k, target) for k in kernels]
    primary = max(range(len(reports)), key=lambda i: reports[i]["matrix_instructions"])
    headline = dict(reports[primary])
    headline["kernels"] = [{k: v for k, v in r.items() if k not in ("hot_loop",)} for r in reports]
    headline["primary_kernel"] = primary
    headline["estimate_kind"] = "static_estimate"
    return headline


def dump_artifacts(kernels: list[CompiledKernel], target: Target, directory) -> list[str]:
    """Write ttgir, llir, amdgcn/ptx and sass for each kernel; return the paths written."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n, kernel in enumerate(kernels):
        stem = f"{kernel.name}" if len(kernels) == 1 else f"{n}_{kernel.name}"
        parts = ["ttgir", "llir", "amdgcn"] if target.backend == "hip" else ["ttgir", "llir", "ptx", "sass"]
        for part in parts:
            text = _sass_text(kernel) if part == "sass" else kernel.asm.get(part)
            if text is None:
                continue
            path = out / f"{stem}.{part}"
            path.write_text(text if isinstance(text, str) else text.decode())
            written.append(str(path))
    return written
