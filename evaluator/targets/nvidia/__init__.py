"""The NVIDIA toolchain (sm90, sm100): ptxas resource report, SASS parsing, the warp/warpgroup issue model, Nsight
Compute. Blackwell's tcgen05 MMAs are counted and located but not costed by the model."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..base import smi_device_id
from . import smi, static
from .model import NvCosts

if TYPE_CHECKING:
    from ...compile import CompiledKernel
    from ...records import StaticRecord
    from ..base import SmiReading, Target


def _kib(value) -> float | None:
    return None if value is None else round(value / 1024, 1)


@dataclass(frozen=True)
class NvidiaToolchain:
    costs: NvCosts = field(default_factory=NvCosts)

    static_fields = static.STATIC_FIELDS
    visible_devices = "CUDA_VISIBLE_DEVICES"
    device_files = "/dev/nvidia*"  # the NVIDIA driver's device files: present only where a GPU of the family is
    isa = "sass"
    artifact_parts = ("ttgir", "llir", "ptx", "sass")
    loop_matrix_keys = ("wgmma", "mma_sync", "tcgen05")
    report_fields = (
        ("kernel", "kernel", ""), ("grid", "grid", ""), ("registers", "registers/thread", ""),
        ("spill_store_bytes", "spill stores", "B"), ("spill_load_bytes", "spill loads", "B"),
        ("stack_frame_bytes", "stack frame", "B"), ("shared_bytes", "shared memory", "B"),
        ("occupancy_blocks_per_sm", "occupancy", "blocks/SM"), ("wgmma_count", "wgmma (HGMMA)", ""),
        ("hmma_count", "mma.sync (HMMA)", ""), ("tcgen05_count", "tcgen05 (UTC*MMA)", ""),
        ("tma_load_count", "TMA loads (UTMALDG)", ""),
        ("tma_store_count", "TMA stores (UTMASTG)", ""), ("cp_async_count", "cp.async (LDGSTS)", ""),
        ("matrix_shape", "matrix shape", ""),
    )
    ladder_columns = (
        ("regs", lambda r: r.get("registers")), ("spill B", lambda r: r.get("spills")),
        ("loop spills", lambda r: r.get("hot_loop_spills")), ("smem KiB", lambda r: _kib(r.get("shared_bytes"))),
        ("MMA/iter", lambda r: r.get("matrix_per_k_iteration")),
    )
    ladder_legend = ("regs = registers per thread; spill B = bytes spilled to local memory (stores + loads); loop "
                     "spills = spill instructions in the hot loop; smem KiB = shared memory per CTA; MMA/iter = "
                     "tensor-core instructions per hot-loop iteration.")
    history_legend = "regs = registers per thread; spills = bytes spilled to local memory"

    def analyze_kernel(self, kernel: CompiledKernel, target: Target) -> StaticRecord:
        return static.analyze_kernel(kernel, target, self.costs)

    def artifact_text(self, kernel: CompiledKernel, part: str):
        if part == "sass":
            return static.sass_text(kernel)
        return kernel.asm.get(part)

    def profile(self, path: str, names: list[str], shape, knobs: dict, seed: int, target: Target,
                timeout_s: float) -> dict:
        from .ncu import run_ncu

        return run_ncu(path, names, shape, knobs, seed, timeout_s=timeout_s)

    def matches_device(self, target: Target, backend: str, arch: str) -> bool:
        # CUDA reports the compute capability "major.minor"; GPUTarget's arch is 10 * major + minor.
        major, _, minor = arch.partition(".")
        return backend == target.backend and major.isdigit() and minor.isdigit() \
            and 10 * int(major) + int(minor) == target.arch

    def smi_query(self, index: int) -> list[str]:
        return smi.smi_query(smi_device_id(index, os.environ.get(self.visible_devices)))

    def parse_smi(self, text: str, index: int) -> SmiReading:
        return smi.parse_smi(text)
