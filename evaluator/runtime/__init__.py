"""Runtime evaluation on a real GPU: correctness, timing against the vendor library, defenses, profilers.

Entry points: `runtime_evaluate` (one candidate, the record's "runtime" section) and `compare` (candidate
against incumbent, interleaved, with a confidence interval). Both need a GPU of the kernel's target and
raise `evaluator.errors.NoDeviceError` without one; the checking and statistics modules below them also
run on CPU tensors, which is how CI tests them.
"""
from __future__ import annotations


def runtime_evaluate(*args, **kwargs) -> dict:
    from .evaluate import runtime_evaluate as _runtime_evaluate

    return _runtime_evaluate(*args, **kwargs)


def compare(*args, **kwargs) -> dict:
    from .evaluate import compare as _compare

    return _compare(*args, **kwargs)


__all__ = ["compare", "runtime_evaluate"]
