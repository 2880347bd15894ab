"""The hardened evaluation path: policy check, then each stage in its own sandboxed process.

Every evaluation of a file someone handed in (`evaluate_isolated`, `compare_isolated`, and `static_isolated`,
the static stage alone, which the scorer of `nearpeak eval` runs for contract and foreign files alike) goes
through the same steps, and nothing the candidate does can take the caller down or quietly improve its own score:

1. the static policy (`evaluator.policy`) reads the file before any of it runs;
2. each stage (compile for the target and read the ISA; correctness and timing on the GPU; the interleaved
   comparison) runs in a fresh process forked by the sandbox worker (`evaluator.sandbox`), the static stage
   under an address-space limit, the GPU stages without one (GPU runtimes reserve huge virtual ranges), all
   under one wall-clock budget;
3. the evaluator's sources are hashed before and after each stage, in this process, after the stage's
   whole process group is dead;
4. after a GPU stage that crashed, faulted or hung, a tiny computation in yet another fresh process says
   whether the GPU is fit for the next candidate.

Sandbox verdicts become record statuses ("timeout", "crashed", "runtime_fault", "output_flood", "error"),
with "policy_violation" and "tampered" from steps 1 and 3. The stage bodies live in `evaluator.stages`.
None of these functions raises for anything the candidate does.
"""
from __future__ import annotations

import glob
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from . import integrity
from .compile import compiler_diagnostic, last_compiler_message
from .errors import CandidateNotFound, NearpeakError, NoDeviceError, UsageError
from .foreign import layout_hint
from .policy import check_policy, record_fields
from .request import EvalRequest
from .sandbox import IsolatedResult, SandboxWorker, run_isolated
from .stages import error_record
from .targets import UnknownTargetError, get_target

STATIC_MEMORY_MB = 8192        # address-space cap of the static stage: torch + triton + a compile fit in 2 GiB
STATIC_TIMEOUT_S = 120.0       # default wall-clock budget of static work (a cold compile of a large kernel: ~30 s)
RUNTIME_TIMEOUT_S = 600.0      # default budget when a GPU stage runs too
HEALTH_TIMEOUT_S = 120.0
MIN_STAGE_S = 1.0              # a stage is never started with less than this left of the budget
GPU_FAILURES = ("crashed", "runtime_fault", "timeout")


@dataclass(frozen=True)
class GuardedRun:
    """A sandboxed call and the evaluator files it changed (empty when none)."""

    result: IsolatedResult
    tampered: tuple[str, ...]


def run_guarded(func: str, kwargs: dict, *, timeout_s: float, memory_mb: int | None = None,
                watch_root: str | Path | None = None, worker: SandboxWorker | None = None) -> GuardedRun:
    """`run_isolated` with the evaluator tree (or `watch_root`) hashed before and after."""
    before = integrity.snapshot(watch_root)
    result = run_isolated(func, kwargs, timeout_s=timeout_s, memory_mb=memory_mb, worker=worker)
    return GuardedRun(result, before.changes(integrity.snapshot(watch_root)))


def _record(path: str, target: str | None, status: str, message: str, **extra) -> dict:
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
        pattern = get_target(target).toolchain.device_files
    except UnknownTargetError:
        return False
    return bool(glob.glob(pattern))


def gpu_health(timeout_s: float = HEALTH_TIMEOUT_S, worker: SandboxWorker | None = None) -> dict:
    """Run the runtime's health check in a fresh process: does the GPU still compute a small product right?"""
    result = run_isolated("evaluator.runtime.device:health_check", {"device": "cuda"}, timeout_s=timeout_s,
                          worker=worker)
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


def _failure_message(stage: str, result: IsolatedResult, timeout_s: float) -> str:
    said = last_compiler_message(result.stderr_tail)
    return {
        "timeout": f"{stage} stage did not finish within {round(timeout_s, 1):g} s; its process group was killed",
        "crashed": f"{stage} stage crashed: {result.message}"
                   + (f"; the compiler's last message: {said}" if said else ""),
        "runtime_fault": f"{stage} stage hit a GPU fault: {result.message}",
        "output_flood": f"{stage} stage flooded its output; its process group was killed",
        "error": f"{stage} stage raised {result.message}",
    }[result.verdict]


class _Stages:
    """One evaluation's sandboxed stages, with the integrity snapshot taken before the first.

    With a `timeout_s`, all stages share that one budget; without, each stage gets its own default limit.
    """

    def __init__(self, timeout_s: float | None, worker: SandboxWorker | None):
        self.before = integrity.snapshot()
        self.started = time.monotonic()  # after the snapshot: the budget is the candidate's time
        self.timeout_s = timeout_s
        self.worker = worker
        self.summaries: list[dict] = []

    def remaining(self, default_s: float) -> float:
        if self.timeout_s is None:
            return default_s
        return self.timeout_s - (time.monotonic() - self.started)

    def run(self, stage: str, func: str, kwargs: dict, default_s: float, memory_mb: int | None = None
            ) -> tuple[IsolatedResult, tuple[str, ...], float]:
        """(result, evaluator files changed so far, the time limit it ran under)."""
        limit = self.remaining(default_s)
        result = run_isolated(func, kwargs, timeout_s=limit, memory_mb=memory_mb, worker=self.worker)
        self.summaries.append(_stage_summary(stage, result))
        return result, self.before.changes(integrity.snapshot()), limit


def _refused(path: str, target: str | None, entry: str | None = None) -> dict | None:
    """The record for a file that must not run at all (missing, a foreign file without a target, or against
    the policy: the foreign-file policy when it is called through its own `entry`), else None."""
    if not Path(path).is_file():
        return _record(path, target, CandidateNotFound.status, "no such kernel file")
    if entry and not target:
        return _record(path, None, UsageError.status, "--entry needs --target: the file declares no TARGET")
    violations = check_policy(path, foreign=bool(entry))
    if violations:
        return _record(path, target, **record_fields(violations))
    return None


def _refine_compile_error(record: dict, stderr: str, candidate: str) -> None:
    """Triton's passes print the located reason to stderr and raise only "error encountered during parsing":
    take the line and reason from the diagnostic when it names the candidate file."""
    found = compiler_diagnostic(stderr, candidate)
    if found:  # the child's message (and its hint on the arguments' storage) gave way to the located reason
        record["line"], reason = found
        record["message"] = f"compile error: {reason}" + layout_hint(reason, record.get("argument_layouts", []))
    elif "error" in (said := last_compiler_message(stderr) or "").lower() and said not in record["message"]:
        record["message"] += f" (the compiler said: {said}; it names no line of the file)"


def _static_records(path: str, target: str | None, stages: _Stages, entry: str | None, kwargs: dict,
                    memory_mb: int | None) -> list[dict]:
    """Run the static stage (through the file's own `entry` when given); the records it returned (one per
    autotune config of a foreign file), or one saying how the stage failed."""
    func = "evaluator.stages:foreign_stage" if entry else "evaluator.stages:static_stage"
    result, changed, limit = stages.run("static", func, kwargs, STATIC_TIMEOUT_S, memory_mb)
    if changed:
        return [_record(path, target, **_tampered(changed), sandbox=stages.summaries)]
    if not result.ok:
        return [_record(path, target, result.verdict, _failure_message("static", result, limit),
                        sandbox=stages.summaries)]
    records = result.value if entry else [result.value]
    for record in records:
        if record.get("status") == "compile_error":
            _refine_compile_error(record, result.stderr_tail, path)
        record.setdefault("policy", {"violations": []})  # a foreign file's run-time refusal keeps its own
        record["sandbox"] = stages.summaries
    return records


def static_isolated(path: str | Path, target: str | None, *, entry: str | None = None, args: Sequence[str] = (),
                    config: int | None = None, shape=None, knobs: dict | None = None,
                    dump_dir: str | Path | None = None, timeout_s: float | None = None,
                    memory_mb: int | None = STATIC_MEMORY_MB, worker: SandboxWorker | None = None,
                    import_paths: Sequence[str] = (), env: dict[str, str] | None = None) -> list[dict]:
    """Policy, then the static stage alone in its own sandbox under `timeout_s` (default STATIC_TIMEOUT_S):
    a contract file's one record, or with `entry` (the host function of a foreign file, which needs `target`
    and is held only to the policy's containment rules) one record per autotune config (only `config` when
    given; `import_paths` and `env` for what the file imports and reads). A failure is a single record whose
    status says what failed."""
    path = str(Path(path).resolve())
    refused = _refused(path, target, entry)
    if refused:
        return [refused]
    dump = str(Path(dump_dir).resolve()) if dump_dir else None
    if entry:
        kwargs = {"path": path, "entry": entry, "args": list(args), "target": target, "config": config,
                  "dump_dir": dump, "import_paths": [str(Path(p).resolve()) for p in import_paths],
                  "env": dict(env or {})}
    else:
        request = EvalRequest(target=target, shape=tuple(shape) if shape else None, knobs=dict(knobs or {}),
                              dump_dir=dump)
        kwargs = {"path": path, "request": request.to_dict()}
    return _static_records(path, target, _Stages(timeout_s, worker), entry, kwargs, memory_mb)


def evaluate_isolated(path: str | Path, request: EvalRequest, worker: SandboxWorker | None = None,
                      memory_mb: int | None = STATIC_MEMORY_MB) -> dict:
    """Policy, then the static stage and (when `request.run`, or None and a GPU of the target is here) the
    runtime stage, each in its own sandbox: all under `request.timeout_s` when given, else STATIC_TIMEOUT_S for
    the static stage and RUNTIME_TIMEOUT_S for the runtime stage. A seed not given is drawn fresh for this
    evaluation. Returns the evaluation record."""
    path = str(Path(path).resolve())
    refused = _refused(path, request.target)
    if refused:
        return refused
    if request.dump_dir:
        request = request.with_(dump_dir=str(Path(request.dump_dir).resolve()))
    stages = _Stages(request.timeout_s, worker)
    [record] = _static_records(path, request.target, stages, None, {"path": path, "request": request.to_dict()},
                               memory_mb)
    if record.get("status") != "ok" or request.run is False:
        return record
    return evaluate_runtime_isolated(path, record, request, worker=worker, stages=stages)


def evaluate_runtime_isolated(path: str | Path, record: dict, request: EvalRequest,
                              worker: SandboxWorker | None = None, stages: _Stages | None = None) -> dict:
    """The runtime stage alone, in its own sandbox, for a kernel whose static `record` (status ok, from
    `evaluate_isolated` with run=False) is already in hand: the static stage is not repeated, and the compile
    is loaded from Triton's cache when the key matches. Returns `record` with the runtime section (or the
    failure) merged in. `stages` continues an evaluation's budget and stage list (from `evaluate_isolated`)."""
    path = str(Path(path).resolve())
    if stages is None:
        stages = _Stages(request.timeout_s, worker)
        stages.summaries.extend(record.get("sandbox") or [])
    record = {**record, "sandbox": stages.summaries}
    target = record.get("target")
    if not _gpu_nodes_present(target):
        if request.run:
            record.update(status=NoDeviceError.status, message=f"--run needs a {target} GPU; none is present")
        return record
    if stages.remaining(RUNTIME_TIMEOUT_S) < MIN_STAGE_S:
        record.update(status="timeout", message=f"static stage used the whole {stages.timeout_s:.0f} s budget")
        return record
    request = request.with_(target=target, seed=int(request.seed) if request.seed is not None
                            else secrets.randbits(31))
    runtime, changed, limit = stages.run("runtime", "evaluator.stages:runtime_stage",
                                         {"path": path, "request": request.to_dict()}, RUNTIME_TIMEOUT_S)
    if changed:
        record.update(_tampered(changed))
        return record
    if not runtime.ok:
        record.update(status=runtime.verdict, message=_failure_message("runtime", runtime, limit))
        if runtime.verdict in GPU_FAILURES:
            record["gpu_health"] = gpu_health(worker=worker)
        return record
    if runtime.value is None:
        return record
    record["runtime"] = runtime.value
    status = _runtime_failed(runtime.value)
    if status:
        record.update(status=status, message=runtime.value.get("message") or runtime.value.get("verdict")
                      or f"runtime stage: {status}")
    if status == "runtime_fault":  # caught in-process, but the context is gone: ask a fresh process
        record["gpu_health"] = gpu_health(worker=worker)
    return record


def _comparison_failed(error: str, message: str, **extra) -> dict:
    return {"accepted": False, "error": error, "message": message, "speedup": None, "ci_low": None, "ci_high": None,
            "method": "interleaved A/B in a sandboxed process (failed)", **extra}


def compare_isolated(candidate_path: str | Path, incumbent_path: str | Path, request: EvalRequest,
                     worker: SandboxWorker | None = None) -> dict:
    """Interleaved A/B timing of candidate against incumbent on this machine's GPU, hardened like
    `evaluate_isolated`: policy on both files, a fresh sandboxed process, integrity hashes, the health check
    after a GPU failure. The candidate side gets the runtime defenses of `eval --run` (evaluator.runtime).

    Returns the comparison (speedup, ci_low, ci_high, accepted, method, samples, seed, candidate_defenses);
    on any failure `accepted` is False and `error` says why.
    """
    paths = [str(Path(p).resolve()) for p in (candidate_path, incumbent_path)]
    for which, path in zip(("candidate", "incumbent"), paths):
        refused = _refused(path, request.target)
        if refused:
            return _comparison_failed(refused["status"], f"{which}: {refused['message']}", line=refused.get("line"),
                                      policy=refused.get("policy"))
    seed = int(request.seed) if request.seed is not None else secrets.randbits(31)
    stages = _Stages(request.timeout_s, worker)
    result, changed, limit = stages.run(
        "compare", "evaluator.stages:compare_stage",
        {"candidate_path": paths[0], "incumbent_path": paths[1], "request": request.with_(seed=seed).to_dict()},
        RUNTIME_TIMEOUT_S)
    if changed:
        return _comparison_failed("tampered", _tampered(changed)["message"], sandbox=stages.summaries, seed=seed)
    if not result.ok:
        failed = _comparison_failed(result.verdict, _failure_message("compare", result, limit),
                                    sandbox=stages.summaries, seed=seed)
        if result.verdict in GPU_FAILURES:
            failed["gpu_health"] = gpu_health(worker=worker)
        return failed
    value = dict(result.value)
    value.update(sandbox=stages.summaries, seed=value.get("seed", seed))
    if value.get("error") == "runtime_fault":
        value["gpu_health"] = gpu_health(worker=worker)
    return value
