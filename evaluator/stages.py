"""The bodies of the evaluation stages: what runs inside a sandboxed child, one fresh process per stage.

`evaluator.isolated` (the parent side) runs the `*_stage` functions through `evaluator.sandbox`; their
arguments and results are JSON. `evaluate_static` and `evaluate_foreign` are the same work in this process,
for trusted files only (the project's own reference kernels in tests); everything a user or an agent hands
in goes through `evaluator.api`, which sandboxes it.
"""
from __future__ import annotations

import time
from importlib import metadata
from pathlib import Path

from . import SCHEMA_VERSION
from .errors import NearpeakError, NoDeviceError, UsageError
from .targets import get_target


def _triton_version() -> str | None:
    try:
        return metadata.version("triton")
    except metadata.PackageNotFoundError:
        return None


def base_record(path: str, target: str | None) -> dict:
    """The fields every evaluation record starts with (docs/eval-schema.md)."""
    return {"schema": SCHEMA_VERSION, "status": "ok", "message": None, "file": str(path), "line": None,
            "target": target, "triton_version": _triton_version()}


def error_record(path: str, target: str | None, err: NearpeakError) -> dict:
    """A record for an evaluation that failed with `err`: its status, message and line."""
    record = base_record(path, target)
    record.update(status=err.status, message=err.message, line=err.line)
    if err.file:
        record["file"] = err.file
    return record


def _target(name: str):
    try:
        return get_target(name)
    except ValueError as exc:  # UnknownTargetError is one, and already a UsageError
        raise UsageError(str(exc)) from None


def _compile_traced(path: str, compile_call):
    """Run a compile-only launch under a provenance trace; foreign compute raises ForeignComputeError."""
    from .provenance import Trace, recording

    trace = Trace(path)
    with recording(trace):
        kernels = compile_call()
    if not trace.ok:
        raise trace.error()
    return kernels, trace


def evaluate_static(path: str | Path, target: str | None = None, shape=None, knobs: dict | None = None,
                    dump_dir: str | Path | None = None) -> dict:
    """Compile a contract kernel here (no GPU needed) and analyse what the compiler produced. In-process."""
    from .compile import compile_candidate
    from .contract import load_candidate
    from .static import analyze, dump_artifacts

    path = str(path)
    try:
        module, spec = load_candidate(path)
        target = target or spec.target
        tgt = _target(target)
        shape = tuple(shape or spec.benchmark_shape)
        started = time.perf_counter()
        kernels, trace = _compile_traced(path, lambda: compile_candidate(module, spec, tgt, shape, knobs))
        compile_s = time.perf_counter() - started
        record = base_record(path, target)
        record.update(shape=list(shape), knobs={**spec.knobs, **(knobs or {})}, spec=spec.to_dict(),
                      compile_seconds=round(compile_s, 3), static=analyze(kernels, tgt, shape),
                      kernel_provenance=trace.to_dict())
        if dump_dir:
            record["dumped"] = dump_artifacts(kernels, tgt, dump_dir)
        return record
    except NearpeakError as err:
        return error_record(path, target, err)


def evaluate_foreign(path: str | Path, entry: str, args: list[str], target: str, config: int | None = None,
                     dump_dir: str | Path | None = None, import_paths: list[str] | None = None,
                     env: dict[str, str] | None = None) -> list[dict]:
    """Static evaluation of a non-contract file through its own host function: one record per autotune config
    (only config `config` when given), each reporting every kernel its call compiled. In-process. Never raises:
    a failure, a usage error included, comes back as a single record whose status says what failed.

    A foreign file is scored as its authors wrote it (host-side torch work, kernels in sibling files) and
    earns no measured score: what it does is watched (`evaluator.containment` refuses processes, network and
    native code asked for by its own code) and what computed is recorded (`kernel_provenance`), not refused.
    """
    from .foreign import compile_foreign, gemm_shape, parse_args
    from .provenance import Trace, recording
    from .static import analyze, dump_artifacts

    path = str(path)
    trace = Trace(path)
    try:
        tgt = _target(target)
        specs = parse_args(args)
        with recording(trace):
            launches = compile_foreign(path, entry, specs, tgt, config, import_paths or (), env)
    except NearpeakError as err:
        record = error_record(path, target, err)
        violation = getattr(err, "violation", None)
        if violation is not None:
            record["policy"] = {"violations": [violation.to_dict()]}
        return [record]
    shape = gemm_shape(specs)  # read off the matrix arguments, for the static objective's useful FLOPs
    records = []
    for launch in launches:
        record = base_record(path, target)
        record.update(entry=entry, args=list(args), import_paths=list(import_paths or []), env=dict(env or {}),
                      shape=list(shape) if shape else None, compile_seconds=round(launch.seconds, 3),
                      static=analyze(launch.kernels, tgt, shape),
                      kernel_provenance={**trace.to_dict(), "judged": False,
                                         "kernel_files": sorted({k.source_file for k in launch.kernels})})
        if launch.configs:
            index = launch.configs[0].index
            record["config"] = {"index": index, "count": launch.config_count,
                                "choices": [c.to_dict() for c in launch.configs]}
        if dump_dir:
            folder = Path(dump_dir) / f"config{record['config']['index']}" if len(launches) > 1 else dump_dir
            record["dumped"] = dump_artifacts(launch.kernels, tgt, folder)
        records.append(record)
    return records


# ---------------------------------------------------------------------------------------------
# Entry points of the sandboxed children (JSON in, JSON out)


def static_stage(path: str, target: str | None, shape: list | None, knobs: dict | None,
                 dump_dir: str | None = None) -> dict:
    return evaluate_static(path, target, tuple(shape) if shape else None, knobs, dump_dir)


def foreign_stage(path: str, entry: str, args: list[str], target: str, config: int | None,
                  dump_dir: str | None = None, import_paths: list[str] | None = None,
                  env: dict[str, str] | None = None) -> list[dict]:
    return evaluate_foreign(path, entry, args, target, config, dump_dir=dump_dir, import_paths=import_paths,
                            env=env)


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


def compare_stage(candidate_path: str, incumbent_path: str, target: str | None, shape: list | None,
                  min_gain: float, seed: int | None) -> dict:
    """Interleaved A/B timing with the candidate's runtime defenses; a failure is `accepted` False + `error`."""
    from .runtime.evaluate import compare

    try:
        return compare(candidate_path, incumbent_path, target, tuple(shape) if shape else None, min_gain, seed)
    except NearpeakError as err:
        return {"accepted": False, "error": err.status, "message": err.message, "speedup": None, "ci_low": None,
                "ci_high": None, "method": "interleaved A/B (not run)"}
