"""One entry point that turns a kernel file into one evaluation record (a JSON-ready dict).

The record follows docs/eval-schema.md (`schema` = evaluator.SCHEMA_VERSION). Failures never raise
out of `evaluate`: they come back as a record whose `status` says what failed.
"""
from __future__ import annotations

import time
from pathlib import Path

from . import SCHEMA_VERSION
from .errors import NearpeakError, UsageError
from .targets import get_target


def _base_record(path: str, target: str | None) -> dict:
    import triton

    return {"schema": SCHEMA_VERSION, "status": "ok", "message": None, "file": str(path), "line": None,
            "target": target, "triton_version": triton.__version__}


def error_record(path: str, target: str | None, err: NearpeakError) -> dict:
    record = _base_record(path, target)
    record.update(status=err.status, message=err.message, line=err.line)
    if err.file:
        record["file"] = err.file
    return record


def evaluate_static(path: str | Path, target: str | None = None, shape=None, knobs: dict | None = None,
                    dump_dir: str | Path | None = None) -> dict:
    """Compile a contract kernel on this machine (no GPU needed) and analyse what the compiler produced."""
    from .compile import compile_candidate
    from .contract import load_candidate
    from .static import analyze, dump_artifacts

    path = str(path)
    try:
        module, spec = load_candidate(path)
        target = target or spec.target
        try:
            tgt = get_target(target)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        shape = tuple(shape or spec.benchmark_shape)
        started = time.perf_counter()
        kernels = compile_candidate(module, spec, tgt, shape, knobs)
        compile_s = time.perf_counter() - started
        record = _base_record(path, target)
        record.update(shape=list(shape), knobs={**spec.knobs, **(knobs or {})}, spec=spec.to_dict(),
                      compile_seconds=round(compile_s, 3), static=analyze(kernels, tgt))
        if dump_dir:
            record["dumped"] = dump_artifacts(kernels, tgt, dump_dir)
        return record
    except NearpeakError as err:
        return error_record(path, target, err)


def evaluate_foreign(path: str | Path, entry: str, args: list[str], target: str, config: int | None = None,
                     dump_dir: str | Path | None = None) -> list[dict]:
    """Static evaluation of a non-contract file through its own host function: one record per autotune config
    (only config `config` when given), each reporting every kernel its call compiled. Never raises: a
    failure, a usage error included, comes back as a single record whose status says what failed."""
    from .foreign import compile_foreign, parse_args
    from .static import analyze, dump_artifacts

    path = str(path)
    try:
        try:
            tgt = get_target(target)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        launches = compile_foreign(path, entry, parse_args(args), tgt, config)
    except NearpeakError as err:
        return [error_record(path, target, err)]
    records = []
    for launch in launches:
        record = _base_record(path, target)
        record.update(entry=entry, args=list(args), shape=None, compile_seconds=round(launch.seconds, 3),
                      static=analyze(launch.kernels, tgt))
        if launch.configs:
            index = launch.configs[0].index
            record["config"] = {"index": index, "count": launch.config_count,
                                "choices": [c.to_dict() for c in launch.configs]}
        if dump_dir:
            folder = Path(dump_dir) / f"config{record['config']['index']}" if len(launches) > 1 else dump_dir
            record["dumped"] = dump_artifacts(launch.kernels, tgt, folder)
        records.append(record)
    return records


def evaluate(path: str | Path, target: str | None = None, shape=None, knobs: dict | None = None,
             run: bool | None = None, seed: int | None = None, profile: bool = False, timeout_s: float = 600.0,
             dump_dir: str | Path | None = None, isolate: bool | None = None) -> dict:
    """Static evaluation, plus the runtime stage when `run` is true or (None) a GPU of the target is present.

    Whenever the candidate will run on a GPU, or `isolate` is true, every stage goes through the hardened
    path (`evaluator.isolated`: policy check, fresh sandboxed processes, integrity hashes). A static-only
    evaluation runs in this process after the policy check, which keeps the scorer fast. `run=True`
    without such a GPU gives a record with status "no_device".
    """
    wants_gpu = run is True or (run is None and _gpu_of(path, target))
    if isolate or wants_gpu:
        from .isolated import evaluate_isolated  # runs the policy check itself

        record = evaluate_isolated(path, target, shape, knobs, run=run, seed=seed, timeout_s=timeout_s,
                                   profile=profile)
        if dump_dir and record.get("status") == "ok":  # the sandboxed compile kept nothing on disk
            record["dumped"] = evaluate_static(path, target, shape, knobs, dump_dir).get("dumped")
        return record
    from .policy import check_policy, record_fields

    violations = check_policy(str(path)) if Path(path).is_file() else []
    if violations:
        return {**_base_record(str(path), target), **record_fields(violations)}
    return evaluate_static(path, target, shape, knobs, dump_dir)


def _gpu_of(path, target: str | None) -> bool:
    """Is a GPU of the kernel's target (its TARGET when `target` is None) present here?"""
    try:
        from .runtime.device import detect_target
    except ImportError:
        return False
    present = detect_target()
    if present is None:
        return False
    if target is None:
        from .contract import read_constant

        target = read_constant(path, "TARGET") if Path(path).is_file() else None
    return present == target


def compare(candidate_path: str | Path, incumbent_path: str | Path, target: str | None = None, shape=None,
            min_gain: float = 0.0, seed: int | None = None, timeout_s: float = 600.0) -> dict:
    """Interleaved A/B timing of two kernels on this machine's GPU, in a fresh sandboxed process.

    Returns the comparison (speedup, ci_low, ci_high, accepted, method, samples). When the sandboxed
    process fails (timeout, crash, GPU fault, no GPU) the result has `accepted` False and an `error`.
    """
    from .sandbox import run_isolated

    result = run_isolated("evaluator.runtime.evaluate:compare",
                          {"candidate_path": str(Path(candidate_path).resolve()),
                           "incumbent_path": str(Path(incumbent_path).resolve()), "target": target,
                           "shape": list(shape) if shape else None, "min_gain": min_gain, "seed": seed},
                          timeout_s=timeout_s)
    if result.ok:
        return result.value
    return {"accepted": False, "error": result.verdict, "message": result.message, "speedup": None,
            "ci_low": None, "ci_high": None, "method": "interleaved A/B in a sandboxed process (failed)"}
