"""The AMD CDNA toolchain (gfx942, gfx950): AMDGCN parsing, the wave64 issue model, rocprofv3.

Its runtime path (ROCm PyTorch, rocprofv3, rocm-smi) is written against documented interfaces and has not yet run
on an AMD GPU; every target using it says so (`Target.verified_on_hardware`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..base import smi_device_id
from . import smi, static
from .model import AmdCosts

if TYPE_CHECKING:
    from ...compile import CompiledKernel
    from ...records import StaticRecord
    from ..base import SmiReading, Target


def _kib(value) -> float | None:
    return None if value is None else round(value / 1024, 1)


@dataclass(frozen=True)
class AmdToolchain:
    costs: AmdCosts = field(default_factory=AmdCosts)

    static_fields = static.STATIC_FIELDS
    visible_devices = "HIP_VISIBLE_DEVICES"
    device_files = "/dev/kfd"  # the ROCm kernel driver's device file: present only where a GPU of the family is
    isa = "amdgcn"
    artifact_parts = ("ttgir", "llir", "amdgcn")
    loop_matrix_keys = ("mfma",)
    report_fields = (
        ("kernel", "kernel", ""), ("grid", "grid", ""), ("arch_vgprs", "arch VGPRs", ""), ("agprs", "AGPRs", ""),
        ("total_vgprs", "total VGPRs",
         "(what a wave allocates: arch VGPRs, rounded up to 4 when AGPRs follow, + AGPRs)"),
        ("sgprs", "SGPRs", ""), ("vgpr_spill_count", "VGPR spills", ""),
        ("sgpr_spill_count", "SGPR spills", ""), ("scratch_bytes", "scratch", "B"), ("lds_bytes", "LDS", "B"),
        ("occupancy_waves_per_simd", "occupancy", "waves/SIMD"), ("mfma_count", "MFMA instructions", ""),
        ("mfma_shape", "MFMA shape", ""), ("shared_layouts", "shared layouts", ""),
    )
    ladder_columns = (
        ("VGPR", lambda r: r.get("arch_vgprs")), ("AGPR", lambda r: r.get("agprs")), ("SGPR", lambda r: r.get("sgprs")),
        ("spills", lambda r: r.get("spills")), ("loop spills", lambda r: r.get("hot_loop_spills")),
        ("LDS KiB", lambda r: _kib(r.get("lds_bytes"))), ("occ", lambda r: r.get("occupancy")),
        ("MFMA/iter", lambda r: r.get("matrix_per_k_iteration")),
    )
    ladder_legend = ("VGPR = arch VGPRs, AGPR = accumulation VGPRs (MFMA results), SGPR = scalar registers; a wave "
                     "allocates VGPR (rounded up to 4 when AGPRs are used) + AGPR, the total VGPRs of nearpeak eval "
                     "and the regs of nearpeak history. spills = VGPR spill instructions, loop spills = spill "
                     "instructions in the hot loop; occ = waves per SIMD; MFMA/iter = MFMA instructions per hot-loop "
                     "iteration.")
    history_legend = ("regs = total VGPRs per lane (arch VGPRs, rounded up to 4 when AGPRs follow, + AGPRs); "
                      "spills = VGPR spill instructions")

    def analyze_kernel(self, kernel: CompiledKernel, target: Target) -> StaticRecord:
        return static.analyze_kernel(kernel, target, self.costs)

    def artifact_text(self, kernel: CompiledKernel, part: str):
        return kernel.asm.get(part)

    def profile(self, path: str, names: list[str], shape, knobs: dict, seed: int, target: Target,
                timeout_s: float) -> dict:
        from .rocprof import run_rocprof

        return run_rocprof(path, names, shape, knobs, seed, target, timeout_s=timeout_s)

    def matches_device(self, target: Target, backend: str, arch: str) -> bool:
        # ROCm reports gcnArchName, e.g. "gfx950:sramecc+:xnack-"; the features after ':' do not change the target.
        return backend == target.backend and arch.split(":")[0].strip() == target.arch

    def smi_query(self, index: int) -> list[str]:
        return smi.smi_query(index)

    def parse_smi(self, text: str, index: int) -> SmiReading:
        # rocm-smi's documented JSON; not yet run on hardware.
        return smi.parse_smi(text, smi_device_id(index, os.environ.get(self.visible_devices)))
