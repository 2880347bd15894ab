"""What a GPU target is: its facts (a frozen dataclass) and the hooks of its toolchain (a protocol).

Every number in a `Target` is a vendor datasheet figure or an ISA-manual constant (leads, not
measurements). Everything that differs between instruction sets (how the compiler output is parsed, the
static cost model, which fields a report shows, which profiler runs) is a `Toolchain`; targets of one
vendor family share one (`evaluator.targets.amd`, `evaluator.targets.nvidia`). Code outside
`evaluator/targets/` asks the target, never its name.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..clock import ClockModel, datasheet_clock
from ..static_error import StaticErrorModel, unvalidated_error

if TYPE_CHECKING:
    from triton.backends.compiler import GPUTarget

    from ..compile import CompiledKernel
    from ..records import StaticRecord

ReportField = tuple[str, str, str]  # (static-record key, label, unit)


class SmiReading(NamedTuple):
    """What the vendor's SMI tool says about one GPU: context for a reader, never input to a verdict."""

    driver: str | None
    clocks_mhz: dict[str, float]  # "sm", "mem", "max_sm", "max_mem": those the tool reports


class Toolchain(Protocol):
    """The hooks one instruction-set family implements (Triton's `BaseBackend` is the model)."""

    isa: str                                   # name of the assembly part Triton emits: "amdgcn", "sass"
    device_files: str                          # glob of the driver's device files: a cheap "is a GPU here?"
    visible_devices: str                       # the driver's variable that limits a process to some GPUs
    static_fields: tuple[str, ...]             # the static-record fields only this family reports
    artifact_parts: tuple[str, ...]            # compiler outputs `nearpeak eval --dump` writes, in order
    report_fields: tuple[ReportField, ...]     # what `format_record` shows of the static record
    loop_matrix_keys: tuple[str, ...]          # hot-loop mix keys counting matrix instructions
    ladder_columns: tuple[tuple[str, Callable[[dict], Any]], ...]   # target-specific ladder-table columns
    ladder_legend: str                         # what those columns count, one line under the ladder table
    history_legend: str                        # what a run's `regs` and `spills` columns count on this family

    def analyze_kernel(self, kernel: CompiledKernel, target: Target) -> StaticRecord:
        """The static record of one compiled kernel (docs/eval-schema.md)."""

    def artifact_text(self, kernel: CompiledKernel, part: str) -> str | bytes | None:
        """One compiler output of `kernel` (disassembling on demand)."""

    def profile(self, path: str, names: list[str], shape, knobs: dict, seed: int, target: Target,
                timeout_s: float) -> dict:
        """Hardware counters around the candidate's kernels; failures come back as `ok: False`."""

    def matches_device(self, target: Target, backend: str, arch: str) -> bool:
        """Is a GPU PyTorch reports as (`backend`, `arch`) a device of `target`?"""

    def smi_query(self, index: int) -> list[str]:
        """The vendor SMI tool's command line that reads GPU `index`'s driver version and clocks."""

    def parse_smi(self, text: str, index: int) -> SmiReading:
        """GPU `index`'s driver version and clocks from what `smi_query(index)` printed; (None, {}) when
        the text cannot be read."""


def smi_device_id(index: int, visible: str | None) -> str:
    """How a vendor SMI tool names the GPU PyTorch calls `index`.

    SMI tools number the host's GPUs and ignore *_VISIBLE_DEVICES, while PyTorch numbers only the visible
    ones: with CUDA_VISIBLE_DEVICES=1 (a pinned loop worker), PyTorch's device 0 is the host's GPU 1. The
    variable's entry for `index` (a number or a UUID) names it; without the variable, `index` does.
    """
    listed = [entry.strip() for entry in (visible or "").split(",") if entry.strip()]
    return listed[index] if index < len(listed) else str(index)


@dataclass(frozen=True)
class Ladder:
    """A target's reference stages: kernel folders under kernels/<target>/ and the figures published for them."""

    folders: tuple[str, ...]                                   # "fp16", "bf8": the first is the main ladder
    published: dict[str, dict] = field(default_factory=dict)   # stage -> {"tflops", "mfma_efficiency"}
    published_by: str = ""                                     # who measured `published`, where
    correlation_stages: tuple[str, ...] = ()                   # stages the static estimate is ranked against


@dataclass(frozen=True)
class Target:
    name: str                      # what users type: "gfx950", "sm90"
    backend: str                   # triton backend: "hip" or "cuda"
    arch: str | int                # GPUTarget arch: "gfx950" or 90
    warp_size: int
    compute_units: int             # CUs (AMD) or SMs (NVIDIA)
    clock_ghz: float               # peak engine clock, datasheet
    simds_per_cu: int              # AMD SIMDs per CU; NVIDIA SM sub-partitions
    max_waves_per_simd: int
    register_file: int             # 32-bit registers: AMD per lane (VGPR+AGPR), NVIDIA per SM
    register_file_unit: str        # what register_file counts per: "lane" or "SM"
    max_registers_per_thread: int
    shared_bytes_per_cu: int       # LDS per CU / shared memory per SM usable by blocks
    shared_bytes_per_block: int    # the most one workgroup / CTA may allocate
    last_level_cache_bytes: int    # NVIDIA L2; AMD Infinity Cache (MALL), the last level before HBM
    toolchain: Toolchain = field(repr=False, compare=False)
    ladder: Ladder = field(default_factory=lambda: Ladder(folders=()))
    peak_tflops: dict[str, float] = field(default_factory=dict)  # dense, by operand dtype
    peak_memory_tbps: float | None = None  # HBM, datasheet: with peak_tflops, where a shape turns memory-bound
    # The one matrix-instruction cost table (the static model and the LLM prompt both read it):
    # mnemonic (or mnemonic:operand-rate-class) -> cycles one instruction keeps its matrix unit busy.
    matrix_cycles: dict[str, int] = field(default_factory=dict)
    matrix_cycles_note: str = ""   # how instructions missing from the table are costed
    devices: tuple[str, ...] = ()  # device names this target covers
    verified_on_hardware: bool = False  # has nearpeak's runtime path run on one of `devices`?
    # The clock the static estimate converts cycles with, as a function of matrix load (evaluator.clock);
    # None: the datasheet clock at every load, not validated.
    clock_model: ClockModel | None = None
    # The static model's error for the ratio of two kernels' estimates, from this target's validation sets
    # (evaluator.static_error); None: no validation set, the widest error and every mechanism unvalidated.
    static_error: StaticErrorModel | None = None

    @property
    def clock(self) -> ClockModel:
        return self.clock_model or datasheet_clock(self.clock_ghz)

    @property
    def ratio_error(self) -> StaticErrorModel:
        return self.static_error or unvalidated_error()

    @property
    def gpu_target(self) -> GPUTarget:
        """Triton's description of the target, what `triton.compile` is asked to compile for."""
        from triton.backends.compiler import GPUTarget

        return GPUTarget(self.backend, self.arch, self.warp_size)

    def analyze_kernel(self, kernel: CompiledKernel) -> StaticRecord:
        return self.toolchain.analyze_kernel(kernel, self)

    def published(self, stage: str) -> dict:
        """Published figures for a reference stage ("v03", or "bf8"), {} when there are none."""
        return self.ladder.published.get(stage) or self.ladder.published.get(stage.split("-")[0]) or {}
