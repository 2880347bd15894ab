"""Hardware-counter profilers run around a candidate: Nsight Compute (sm90) and rocprofv3 (gfx950).

Both profile the same small driver, `python -m evaluator.profilers.ncu_target FILE ...`, which launches the
candidate a few times on fresh inputs, and both keep only the candidate's own kernels (filtered by the
names of the Gluon/Triton functions its module defines). `profile_candidate` picks the tool for the
target; its result says which tool ran and, for rocprofv3, that the path is unverified on hardware.
"""
from __future__ import annotations

from types import ModuleType


def kernel_names(module: ModuleType) -> list[str]:
    """Names of the JIT kernels a candidate module defines (what the profilers filter launches by)."""
    from triton.runtime.jit import JITFunction

    return sorted({obj.__name__ for obj in vars(module).values() if isinstance(obj, JITFunction)})


def profile_candidate(path: str, module: ModuleType, spec, target, shape, knobs: dict, seed: int,
                      timeout_s: float = 120.0) -> dict:
    """Run the target's profiler on the candidate; never raises for a profiler failure (it is reported)."""
    names = kernel_names(module)
    if not names:
        return {"ok": False, "tool": None, "error": "the candidate module defines no JIT kernel to profile"}
    if target.backend == "cuda":
        from .ncu import run_ncu

        return run_ncu(path, names, shape, knobs, seed, timeout_s=timeout_s)
    from .rocprof import run_rocprof

    return run_rocprof(path, names, shape, knobs, seed, target, timeout_s=timeout_s)
