"""Static report: what the compiler produced for each kernel a launch compiled, read off its output.

Everything here is read from real compiler output for the target (registers, spills, LDS/shared,
instruction counts); the one modelled figure, `estimated_efficiency`, is labelled a static estimate.
How a kernel is read is the target's business (`Target.analyze_kernel`); this module picks the headline.
"""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from .compile import CompiledKernel
from .targets import Target
from .throughput import ModelInputs, kernel_estimate

_HEADLINE_ONLY = ("hot_loop", "kernels", "primary_kernel", "estimate_kind", "model", "estimated_tflops",
                  "useful_fraction", "throughput")


def analyze(kernels: list[CompiledKernel], target: Target, shape: tuple[int, int, int] | None = None) -> dict:
    """Report every compiled kernel; the headline is the one doing the matrix work (a StaticRecord as JSON).
    With the GEMM `shape`, the headline also carries the work-normalised objective `estimated_tflops` and
    `useful_fraction` (evaluator.throughput; None without a shape or a K loop)."""
    records = [target.analyze_kernel(k) for k in kernels]
    primary = max(range(len(records)), key=lambda i: records[i].matrix_instructions)
    per_kernel = [{k: v for k, v in r.to_dict().items() if k not in _HEADLINE_ONLY} for r in records]
    headline = replace(records[primary], kernels=per_kernel, primary_kernel=primary)
    if shape is not None and headline.model:
        estimate = kernel_estimate(ModelInputs.from_dict(headline.model), tuple(shape), kernels[primary].grid,
                                   target.compute_units, target.clock_ghz, target.clock)
        throughput = {**estimate.to_dict(), "ratio_error": target.ratio_error.to_dict()}
        headline = replace(headline, estimated_tflops=round(estimate.estimated_tflops, 1),
                           useful_fraction=round(estimate.useful_fraction, 4), throughput=throughput)
    return headline.to_dict()


def dump_artifacts(kernels: list[CompiledKernel], target: Target, directory) -> list[str]:
    """Write the target's compiler outputs (ttgir, llir, then amdgcn or ptx and sass) for each kernel."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for n, kernel in enumerate(kernels):
        stem = f"{kernel.name}" if len(kernels) == 1 else f"{n}_{kernel.name}"
        for part in target.toolchain.artifact_parts:
            text = target.toolchain.artifact_text(kernel, part)
            if text is None:
                continue
            path = out / f"{stem}.{part}"
            path.write_text(text if isinstance(text, str) else text.decode())
            written.append(str(path))
    return written
