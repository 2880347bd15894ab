"""Shared fixtures: paths of the test kernels, and a cached static evaluation per kernel."""
from __future__ import annotations

import functools
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TEST_KERNELS = ROOT / "tests" / "kernels"


def gpu_target_present() -> str | None:
    try:
        from evaluator.runtime.device import detect_target
    except ImportError:
        return None
    return detect_target()


def pytest_collection_modifyitems(config, items):
    if gpu_target_present():
        return
    skip = pytest.mark.skip(reason="needs a GPU of the kernel's target; none here")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@functools.cache
def _static(path: str, target: str | None = None, shape: tuple | None = None, knobs: tuple = ()) -> dict:
    from evaluator.api import evaluate_static

    return evaluate_static(path, target=target, shape=shape, knobs=dict(knobs) or None)


@pytest.fixture(scope="session")
def static_eval():
    """evaluate_static(path, target, shape, knobs as ((name, value), ...)), memoised so each kernel compiles once
    per test process."""
    return _static
