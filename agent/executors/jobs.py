"""The work of one evaluation, the same in a local worker process and in a Ray task.

A job carries sources, not paths, so it can run on another host; it writes them into a scratch directory of
its own, evaluates them through `evaluator` (every stage in a fresh sandboxed process) and returns plain data.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from evaluator import api
from evaluator.isolated import evaluate_runtime_isolated
from evaluator.request import EvalRequest, Problem

from ..evaluation import screen

KERNEL = "kernel.py"
CACHE_ENV = "TRITON_CACHE_DIR"
# Each evaluation's scratch directory: <tmp>/nearpeak-<kind><number>-<random>/{candidate,parent}/kernel.py
# (agent.loop.in_run_paths names these paths by the kernels' places in the run before the ledger keeps them).
SCRATCH_PREFIX = "nearpeak-"
CANDIDATE_DIR, PARENT_DIR = "candidate", "parent"


@dataclass(frozen=True)
class Job:
    """One candidate to evaluate against its parent."""

    number: int              # the candidate's number in its step: the order results are committed in
    source: str
    parent_source: str
    target: str
    min_gain: float
    max_spills: int
    timeout_s: float = 600.0  # per phase (static; runtime; comparison): past it the sandbox is killed
    profile: bool = True     # also profile the matrix-unit efficiency of a measured candidate
    problem: Problem | None = None   # the run's shapes and timing (None: each kernel's own declarations)

    def request(self, **fields) -> EvalRequest:
        return EvalRequest(target=self.target, problem=self.problem, timeout_s=self.timeout_s,
                           min_gain=self.min_gain, **fields)


@dataclass(frozen=True)
class MeasuredResult:
    record: dict                     # the static record with the runtime section merged in
    comparison: dict | None          # interleaved A/B against the parent; None when the runtime stage failed
    seconds: dict                    # wall seconds by phase: runtime, compare


def configure_worker(cache_dir: str | None, env: dict[str, str] | None = None) -> None:
    """Set up a worker process: the Triton cache its sandboxed stages share (so the runtime stage and the
    comparison load what the static stage compiled) and, for a GPU worker, the device it is pinned to."""
    if cache_dir:
        Path(cache_dir).mkdir(parents=True, exist_ok=True)
        os.environ[CACHE_ENV] = str(cache_dir)
    os.environ.update(env or {})


def _write(directory: Path, name: str, source: str) -> Path:
    path = directory / name / KERNEL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source)
    return path


def static_job(job: Job) -> dict:
    """Policy check and static stage of the candidate; its record (never raises for the candidate's faults)."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}job{job.number}-"))
    try:
        path = _write(scratch, CANDIDATE_DIR, job.source)
        started = time.monotonic()
        record = api.evaluate(str(path), job.request(run=False))
        record["job_seconds"] = round(time.monotonic() - started, 3)
        return record
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def measured_job(job: Job, static_record: dict) -> MeasuredResult:
    """Runtime stage (correctness and timing) of a candidate that passed its static screen, then the
    interleaved A/B comparison against its parent when it is correct. Each draws its own inputs (no seed), as
    every evaluation does."""
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}job{job.number}-"))
    try:
        path = _write(scratch, CANDIDATE_DIR, job.source)
        started = time.monotonic()
        record = evaluate_runtime_isolated(path, static_record, job.request(run=True, profile=job.profile))
        seconds = {"runtime": round(time.monotonic() - started, 3)}
        if screen(record, job.max_spills) is not None or (record.get("runtime") or {}).get("correct") is not True:
            return MeasuredResult(record, None, seconds)
        parent = _write(scratch, PARENT_DIR, job.parent_source)
        started = time.monotonic()
        comparison = api.compare(path, parent, job.request())
        seconds["compare"] = round(time.monotonic() - started, 3)
        return MeasuredResult(record, comparison, seconds)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
