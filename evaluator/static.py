"""Static report: what the compiler produced for each kernel a launch compiled, read off its output.

Everything here is read from real compiler output for the target (registers, spills, LDS/shared,
instruction counts); the one modelled figure, `estimated_efficiency`, is labelled a static estimate.
How a kernel is read is the target's business (`Target.analyze_kernel`); this module picks the headline.

`compiled_sha256` names what the launch compiled, so that two sources compiling to the same kernels are
recognised as one (the loop evaluates such twins once). It hashes each kernel's ISA with what only says
where the source was (debug sections, `.file`/`.loc` directives, comments) left out, with the kernel's
grid and launch metadata: a docstring, comment or whitespace edit, or a renamed local, leaves it unchanged.
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import replace
from pathlib import Path

from .compile import CompiledKernel
from .static_error import regime
from .targets import Target
from .throughput import ModelInputs, kernel_estimate

# Launch metadata that changes how a kernel runs without showing in its instructions.
_LAUNCH_KEYS = ("num_warps", "num_ctas", "shared", "global_scratch_size", "launch_cooperative_grid", "launch_pdl",
                "cluster_dims", "tmem_size")
_BLOCK_COMMENT = re.compile(r"/\*.*?\*/")
_LOCATION_DIRECTIVES = (".loc", ".file", ".loc_label")

_HEADLINE_ONLY = ("hot_loop", "kernels", "primary_kernel", "estimate_kind", "model", "estimated_tflops",
                  "useful_fraction", "throughput")


def analyze(kernels: list[CompiledKernel], target: Target, shape: tuple[int, int, int] | None = None,
            dtype: str | None = None) -> dict:
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
        throughput = {**estimate.to_dict(), "ratio_error": target.ratio_error.to_dict(),
                      "regime": regime(shape, dtype, target.peak_tflops.get(dtype or ""), target.peak_memory_tbps)}
        headline = replace(headline, estimated_tflops=round(estimate.estimated_tflops, 1),
                           useful_fraction=round(estimate.useful_fraction, 4), throughput=throughput)
    return {**headline.to_dict(), "compiled_sha256": compiled_sha256(kernels, target)}


def normalized_isa(text: str) -> str:
    """Assembly text without what depends only on where the source lines are: debug sections, `.file` and
    `.loc` directives, comments (`;`, `//`, `/* */`; a SASS line's `;` ends its instruction), spacing."""
    kept, debug = [], False
    for raw in text.splitlines():
        line = _BLOCK_COMMENT.sub("", raw).split("//", 1)[0].split(";", 1)[0].strip()
        if not line:
            continue
        word = line.split(None, 1)[0]
        if word == ".section":
            debug = line.split(None, 1)[1].split(",")[0].strip().strip('"').startswith(".debug")
        elif word in (".text", ".data", ".amdgpu_metadata"):
            debug = False
        if debug or word in _LOCATION_DIRECTIVES:
            continue
        kept.append(" ".join(line.split()))
    return "\n".join(kept)


def compiled_sha256(kernels: list[CompiledKernel], target: Target) -> str:
    """SHA-256 over every compiled kernel, in launch order: its normalised ISA, grid and launch metadata."""
    parts = []
    for kernel in kernels:
        isa = target.toolchain.artifact_text(kernel, target.toolchain.isa) or ""
        isa = isa.decode(errors="replace") if isinstance(isa, bytes) else isa
        launch = {k: kernel.metadata.get(k) for k in _LAUNCH_KEYS if k in kernel.metadata}
        parts.append({"grid": list(kernel.grid), "launch": launch,
                      "isa": hashlib.sha256(normalized_isa(isa).encode()).hexdigest()})
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


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
