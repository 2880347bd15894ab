"""Static report: what the compiler produced for each kernel a launch compiled, read off its output.

Everything here is read from real compiler output for the target (registers, spills, LDS/shared,
instruction counts); the one modelled figure, `estimated_efficiency`, is labelled a static estimate.
How a kernel is read is the target's business (`Target.analyze_kernel`); this module picks the headline.
"""
from __future__ import annotations

from pathlib import Path

from .compile import CompiledKernel
from .targets import Target


def analyze(kernels: list[CompiledKernel], target: Target) -> dict:
    """Report every compiled kernel; the headline is the one doing the matrix work."""
    reports = [target.analyze_kernel(k) for k in kernels]
    primary = max(range(len(reports)), key=lambda i: reports[i]["matrix_instructions"])
    headline = dict(reports[primary])
    headline["kernels"] = [{k: v for k, v in r.items() if k not in ("hot_loop",)} for r in reports]
    headline["primary_kernel"] = primary
    headline["estimate_kind"] = "static_estimate"
    return headline


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
