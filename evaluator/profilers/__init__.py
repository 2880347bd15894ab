"""Hardware-counter profilers run around a candidate; each target family brings its own (Nsight Compute in
evaluator/targets/nvidia/ncu.py, rocprofv3 in evaluator/targets/amd/rocprof.py).

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
    return target.toolchain.profile(path, names, shape, knobs, seed, target, timeout_s)
