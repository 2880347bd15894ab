"""Shared fixtures: paths of the test kernels, and a cached static evaluation per kernel."""
from __future__ import annotations

import functools
import os
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


def pytest_xdist_auto_num_workers(config):
    """What `-n auto` (pyproject's addopts) means: two workers per core, at most eight. Much of the suite waits
    on sandboxed children, timeouts, kill-and-resume rounds and git rather than computing, so a second worker
    per core fills that time (on two cores: 2:52 instead of 3:55 for the whole suite)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return min(8, 2 * cores)


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
