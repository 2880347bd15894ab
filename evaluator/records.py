"""Typed evaluation records: the static, runtime and whole-evaluation records of docs/eval-schema.md.

Records travel as JSON (ledger commits, `nearpeak eval --json`, sandbox pipes), so each dataclass reads
and writes exactly the documented JSON object: `from_dict(d).to_dict() == d` for a record that follows the
schema. A key the schema does not name is kept (in `undocumented`) rather than dropped, so an old or newer
record still round-trips, and tests/test_records.py fails when a producer writes one or a consumer reads a
field no record has.

The static record's common fields are typed here; the fields only one target family reports (VGPRs and
AGPRs, TMA counts) are listed by that family's toolchain (`Toolchain.static_fields`) and kept in `details`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from . import SCHEMA_VERSION


def _split(cls, data: dict, known: set[str]) -> tuple[dict, dict]:
    own = {f.name for f in fields(cls)} - {"undocumented", "details"}
    typed = {k: v for k, v in data.items() if k in own}
    rest = {k: v for k, v in data.items() if k not in own and k not in known}
    return typed, rest


@dataclass(frozen=True)
class StaticRecord:
    """What the compiler produced for the kernel doing the matrix work (the headline), read off its output."""

    kernel: str
    grid: list[int]
    num_warps: int
    registers: int                   # AMD: VGPRs per lane (arch + AGPR); NVIDIA: registers per thread
    spills: int                      # AMD: VGPR + SGPR spill count; NVIDIA: spill store + load bytes
    shared_bytes: int                # LDS / shared memory per workgroup (CTA)
    occupancy: int                   # AMD: waves per SIMD; NVIDIA: blocks per SM
    matrix_instructions: int
    hot_loop: dict | None            # instruction mix of the loop with the most matrix work, header, excerpt
    hot_loop_spills: int
    estimated_efficiency: float | None   # STATIC ESTIMATE (0..1) of the matrix-unit busy fraction
    estimate: dict | None            # the model's breakdown (evaluator.targets.loop_estimate.LoopEstimate)
    model: dict | None = None        # the kernel-level model's inputs (evaluator.throughput.ModelInputs)
    estimated_tflops: float | None = None   # STATIC ESTIMATE: useful TFLOP/s of the whole kernel (the objective)
    useful_fraction: float | None = None    # useful over issued matrix FLOPs
    throughput: dict | None = None   # the kernel-level breakdown (evaluator.throughput.ThroughputEstimate)
    kernels: list[dict] = field(default_factory=list)   # every compiled kernel's record, without hot_loop
    primary_kernel: int = 0
    estimate_kind: str = "static_estimate"
    compiled_sha256: str | None = None   # compiler output: identity of every compiled kernel (evaluator.static)
    details: dict[str, Any] = field(default_factory=dict)        # the target family's own fields
    undocumented: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict, target_fields: tuple[str, ...] = ()) -> StaticRecord:
        """Read a static record; `target_fields` names the keys its target family documents."""
        typed, rest = _split(cls, data, set())
        details = {k: v for k, v in rest.items() if k in target_fields}
        undocumented = {k: v for k, v in rest.items() if k not in target_fields}
        return cls(**typed, details=details, undocumented=undocumented)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("details", "undocumented")}
        return {**out, **self.details, **self.undocumented}


@dataclass(frozen=True)
class RuntimeRecord:
    """The runtime section: every figure measured on `device` (evaluator.runtime.evaluate)."""

    status: str                      # "ok" or a runtime reason code
    verdict: str                     # "correct" or the sentence naming the first failure
    correct: bool
    measured: bool = True
    seed: int | None = None
    held_out_shape: list[int] | None = None  # drawn from `seed`; never shown to a proposer
    shape: list[int] | None = None
    knobs: dict | None = None
    device: str | None = None
    device_info: dict | None = None
    driver: str | None = None
    clocks_mhz: dict | None = None
    torch_version: str | None = None
    triton_version: str | None = None
    cuda_version: str | None = None
    hip_version: str | None = None
    provenance: dict | None = None
    phase_seconds: dict | None = None
    health: dict | None = None
    tolerance: float | None = None
    shapes: list[dict] | None = None
    reference_dtype: str | None = None
    median_ms: float | None = None
    tflops: float | None = None
    spread: dict | None = None
    timing_method: str | None = None
    input_sets: int | None = None
    rotation_bytes: int | None = None
    vendor: str | None = None
    vendor_note: str | None = None
    vendor_median_ms: float | None = None
    vendor_tflops: float | None = None
    ratio_vs_vendor: float | None = None
    peak_tflops: float | None = None
    pct_of_peak: float | None = None
    defenses: list[dict] | None = None
    launch_bound: bool | None = None
    host_us_per_call: float | None = None        # host time one launch call takes to return
    vendor_host_us_per_call: float | None = None
    graph_median_ms: float | None = None         # per-call GPU time under CUDA-graph replay
    graph_tflops: float | None = None
    vendor_graph_median_ms: float | None = None
    ratio_vs_vendor_graph: float | None = None
    graph_method: str | None = None
    graph_note: str | None = None
    launch_note: str | None = None
    summary: str | None = None
    profile: dict | None = None      # the target's profiler result (tool, command, its own figures)
    efficiency: float | None = None  # matrix-unit busy share (0..1) the profiler measured
    undocumented: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> RuntimeRecord:
        typed, rest = _split(cls, data, set())
        return cls(**typed, undocumented=rest)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "undocumented"}
        return {**out, **self.undocumented}


@dataclass(frozen=True)
class EvaluationRecord:
    """One evaluation of one kernel file (`nearpeak eval --json`, `evaluator.api.evaluate`)."""

    status: str
    schema: str = SCHEMA_VERSION
    message: str | None = None
    file: str | None = None
    line: int | None = None
    target: str | None = None
    triton_version: str | None = None
    shape: list[int] | None = None
    knobs: dict | None = None
    spec: dict | None = None
    compile_seconds: float | None = None
    static: dict | None = None       # a StaticRecord as JSON
    runtime: dict | None = None      # a RuntimeRecord as JSON
    policy: dict | None = None
    kernel_provenance: dict | None = None  # who computed, in the static stage (evaluator.provenance)
    sandbox: list[dict] | None = None
    integrity: dict | None = None
    gpu_health: dict | None = None
    dumped: list[str] | None = None
    config: dict | None = None       # an autotuned foreign kernel's config this record compiled
    job_seconds: float | None = None  # wall time of the agent executor's job that produced the record
    entry: str | None = None         # a foreign file's host function (`--entry`)
    args: list[str] | None = None    # its `--arg` texts
    entry_note: str | None = None    # how the entry was chosen (guessed, from a manifest)
    import_paths: list[str] | None = None  # `--path` folders the foreign file's imports were looked up in
    env: dict | None = None          # `--env` variables the foreign file ran with
    skipped_at_import: list[dict] | None = None  # a foreign file's top-level statements left out at import
    #                                  (line, end_line, statement, cause, reason, defines, why: evaluator.foreign_import)
    meta_allocations: list[dict] | None = None  # a foreign entry's GPU allocations by name, made on `meta`
    #                                  (line, call, device, statement, sibling: evaluator.meta_device)
    argument_layouts: list[str] | None = None  # a foreign compile error's matrix arguments as stored
    #                                  (`b 4096x4096 float16 column-major (:T)`: evaluator.foreign.matrix_layouts)
    label: str | None = None         # batch mode: the file's path relative to the batch root
    objective: dict | None = None    # a run's problem: the static estimate at each objective shape and their mean
    undocumented: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, data: dict) -> EvaluationRecord:
        typed, rest = _split(cls, data, set())
        return cls(**typed, undocumented=rest)

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "undocumented"}
        return {**out, **self.undocumented}


def field_names(record_type) -> frozenset[str]:
    """The JSON keys a record type documents (its dataclass fields)."""
    return frozenset(f.name for f in fields(record_type) if f.name not in ("details", "undocumented"))
