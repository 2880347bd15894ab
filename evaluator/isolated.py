"""The hardened evaluation path: policy check, then each stage in its own sandboxed process.

`evaluate_isolated` gives the same record as `evaluator.api.evaluate`, but nothing the candidate does can
take the caller down or quietly improve its own score:

1. the static policy (`evaluator.policy`) reads the file before any of it runs;
2. the static stage (compile for the target, read the ISA) runs in a fresh process with an address-space
   limit; the runtime stage (correctness and timing on the GPU) in another, without one (GPU runtimes
   reserve huge virtual ranges), both under one wall-clock budget;
3. the evaluator's sources are hashed before and after each stage, in this process, after the stage's
   whole process group is dead;
4. after a runtime stage that crashed, faulted or hung, a tiny computation in yet another fresh process
   says whether the GPU is fit for the next candidate.

Sandbox verdicts become record statuses ("timeout", "crashed", "runtime_fault", "output_flood", "error"),
with "policy_violation" and "tampered" from steps 1 and 3. The function never raises for anything the
candidate does.
"""
from __future__ import annotations

import glob
import time
from dataclasses import dataclass
from pathlib import Path

from . import integrity
from .errors import CandidateNotFound, NearpeakError, NoDeviceError
from .policy import check_policy, record_fields
from .sandbox import IsolatedResult, run_isolated
from .targets import UnknownTargetError, get_target

STATIC_MEMORY_MB = 8192        # address-space cap of the static stage: torch + triton + a compile fit in 2 GiB
HEALTH_TIMEOUT_S = 120.0
MIN_STAGE_S = 1.0              # a stage is never started with less than this left of the budget
GPU_DEVICE_NODES = {"cuda": "/dev/nvidia*", "hip": "/dev/kfd"}  # by the target's backend


@dataclass(frozen=True)
class GuardedRun:
    """A sandboxed call and the evaluator files it changed (empty when none)."""

    result: IsolatedResult
    tampered: tuple[str, ...]


def run_guarded(func: str, kwargs: dict, *, timeout_s: float, memory_mb: int | None = None,
                watch_root: str | Path | None = None) -> GuardedRun:
    """`run_isolated` with the evaluator tree (or `watch_root`) hashed before and after."""
    before = integrity.snapshot(watch_root)
    result = run_isolated(func, kwargs, timeout_s=timeout_s, memory_mb=memory_mb)
    return GuardedRun(result, before.changes(integrity.snapshot(watch_root)))


# ---------------------------------------------------------------------------------------------
# Stage entry points: these run inside the sandboxed child


def static_stage(path: str, target: str | None, shape: list | None, knobs: dict | None) -> dict:
    from .api import evaluate_static

    return evaluate_static(path, target, tuple(shape) if shape else None, knobs)


def runtime_stage(path: str, target: str, shape: list | None, knobs: dict | None, seed: int | None,
                  profile: bool, required: bool) -> dict | None:
    """The runtime section, or None when no GPU of `target` is here and none was required."""
    from .runtime.device import require_device

    try:
        require_device(target, with_smi=False)  # runtime_evaluate reads driver and clocks itself
    except NoDeviceError as err:
        return {"status": NoDeviceError.status, "verdict": err.message} if required else None
    from .runtime.evaluate import runtime_evaluate

    try:
        return runtime_evaluate(path, target, tuple(shape) if shape else None, knobs, seed, profile)
    except NearpeakError as err:  # the candidate's contract or import failing on this side too
        return {"status": err.status, "verdict": err.message}


# ---------------------------------------------------------------------------------------------
# The parent side


def _record(path: str, target: str | None, status: str, message: str, **extra) -> dict:
    from .api import error_record

    record = error_record(path, target, NearpeakError(message))
    record.update(status=status, **extra)
    return record


def _stage_summary(stage: str, result: IsolatedResult) -> dict:
    summary = {"stage": stage, "verdict": result.verdict, "wall_s": result.wall_s, "exit_code": result.exit_code,
               "signal": result.signal, "message": result.message}
    if not result.ok:
        summary.update(stdout_tail=result.stdout_tail[-4000:], stderr_tail=result.stderr_tail[-4000:])
    return summary


def _gpu_nodes_present(target: str) -> bool:
    """Cheap look for the GPU's device files, so a CPU-only machine never starts a runtime stage."""
    try:
        pattern = GPU_DEVICE_NODES.get(get_target(target).backend)
    except UnknownTargetError:
        return False
    return bool(pattern and glob.glob(pattern))


def gpu_health(timeout_s: float = HEALTH_TIMEOUT_S) -> dict:
    """Run the runtime's health check in a fresh process: does the GPU still compute a small product right?"""
    result = run_isolated("evaluator.runtime.device:health_check", {"device": "cuda"}, timeout_s=timeout_s)
    if result.ok and isinstance(result.value, dict):
        return {**result.value, "verdict": result.verdict, "wall_s": result.wall_s}
    return {"healthy": False, "verdict": result.verdict, "wall_s": result.wall_s,
            "message": result.message or "health check returned no result"}


def _runtime_failed(runtime: dict) -> str | None:
    """The status a runtime section imposes on the record, or None when it passed.

    The runtime section's `status` is a reason code ("ok", "unwritten", "cached_result", ...) and its
    `verdict` the sentence explaining it; a section without `status` speaks by `verdict`.
    """
    if "status" in runtime:
        return None if runtime["status"] == "ok" else str(runtime["status"])
    verdict = runtime.get("verdict")
    return None if verdict in (None, "ok", "correct") else str(verdict)


def _tampered(changed: tuple[str, ...]) -> dict:
    """The record fields for evaluator files that changed while a stage ran."""
    return {"status": "tampered", "message": "evaluator files changed while the candidate ran: " + ", ".join(changed),
            "integrity": {"changed": list(changed)}}


def _sandbox_failure(record_path: str, target: str | None, stage: str, result: IsolatedResult, timeout_s: float,
                     stages: list[dict]) -> dict:
    """A record for a stage that ended without a value; its status is the sandbox verdict itself."""
    messages = {
        "timeout": f"{stage} stage did not finish within {timeout_s:.0f} s; its process group was killed",
        "crashed": f"{stage} stage crashed: {result.message}",
        "runtime_fault": f"{stage} stage hit a GPU fault: {result.message}",
        "output_flood": f"{stage} stage flooded its output; its process group was killed",
        "error": f"{stage} stage raised {result.message}",
    }
    return _record(record_path, target, result.verdict, messages[result.verdict], sandbox=stages)


def evaluate_isolated(path: str | Path, target: str | None = None, shape=None, knobs: dict | None = None,
                      run: bool | None = None, seed: int | None = None, timeout_s: float = 600.0,
                      profile: bool = False, memory_mb: int | None = STATIC_MEMORY_MB) -> dict:
    """Policy, then the static stage and (when `run`, or None and a GPU of the target is here) the runtime
    stage, each in its own sandbox under one `timeout_s` budget. Returns the evaluation record."""
    started = time.monotonic()
    path = str(Path(path).resolve())
    if not Path(path).is_file():
        return _record(path, target, CandidateNotFound.status, "no such kernel file")
    violations = check_policy(path)
    if violations:
        return _record(path, target, **record_fields(violations))

    stages: list[dict] = []
    before = integrity.snapshot()
    static = run_isolated("evaluator.isolated:static_stage",
                          {"path": path, "target": target, "shape": list(shape) if shape else None, "knobs": knobs},
                          timeout_s=timeout_s, memory_mb=memory_mb)
    stages.append(_stage_summary("static", static))
    changed = before.changes(integrity.snapshot())
    if changed:
        return _record(path, target, **_tampered(changed), sandbox=stages)
    if not static.ok:
        return _sandbox_failure(path, target, "static", static, timeout_s, stages)
    record = static.value
    record.update(policy={"violations": []}, sandbox=stages)
    if record.get("status") != "ok" or run is False:
        return record

    target = record.get("target") or target
    if not _gpu_nodes_present(target):
        if run:
            record.update(status=NoDeviceError.status, message=f"--run needs a {target} GPU; none is present")
        return record
    remaining = timeout_s - (time.monotonic() - started)
    if remaining < MIN_STAGE_S:
        record.update(status="timeout", message=f"static stage used the whole {timeout_s:.0f} s budget")
        return record
    runtime = run_isolated("evaluator.isolated:runtime_stage",
                           {"path": path, "target": target, "shape": list(shape) if shape else None, "knobs": knobs,
                            "seed": seed, "profile": profile, "required": bool(run)},
                           timeout_s=remaining)
    stages.append(_stage_summary("runtime", runtime))
    changed = before.changes(integrity.snapshot())
    if changed:
        record.update(_tampered(changed))
        return record
    if not runtime.ok:
        failure = _sandbox_failure(path, target, "runtime", runtime, remaining, stages)
        record.update(status=failure["status"], message=failure["message"])
        if runtime.verdict in ("crashed", "runtime_fault", "timeout"):
            record["gpu_health"] = gpu_health()
        return record
    if runtime.value is None:
        return record
    record["runtime"] = runtime.value
    status = _runtime_failed(runtime.value)
    if status:
        record.update(status=status, message=runtime.value.get("message") or runtime.value.get("verdict")
                      or f"runtime stage: {status}")
    if status == "runtime_fault":  # caught in-process, but the context is gone: ask a fresh process
        record["gpu_health"] = gpu_health()
    return record
