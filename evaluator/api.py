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
        tgt = get_target(target) if target in ("gfx950", "sm90") else None
        if tgt is None:
            raise UsageError(f"unknown target {target!r}; use gfx950 or sm90")
        shape = tuple(shape or spec.benchmark_shape)
        started = time.perf_counter()
        kernels = compile_candidate(module, spec, tgt, shape, knobs)
        compile_s = time.perf_counter() - started
        record = _base_record(path, target)
        record.update(shape=list(shape), knobs={**spec.knobs, **(knobs or {})}, spec=spec.to_dict(),
                      compile_seconds=round(compile_s, 3), static=analyze(kernels, tgt, shape))
        if dump_dir:
            record["dumped"] = dump_artifacts(kernels, tgt, dump_dir)
        return record
    except NearpeakError as err:
        return error_record(path, target, err)


def evaluate_foreign(path: str | Path, entry: str, args: list[str], target: str,
                     dump_dir: str | Path | None = None) -> dict:
    """Static evaluation of a non-contract file through its own host function; reports every kernel."""
    from .foreign import compile_foreign
    from .static import analyze, dump_artifacts

    path = str(path)
    try:
        tgt = get_target(target)
        started = time.perf_counter()
        kernels = compile_foreign(path, entry, args, tgt)
        record = _base_record(path, target)
        record.update(entry=entry, args=list(args), shape=None, compile_seconds=round(time.perf_counter() - started, 3),
                      static=analyze(kernels, tgt, None))
        if dump_dir:
            record["dumped"] = dump_artifacts(kernels, tgt, dump_dir)
        return record
    except NearpeakError as err:
        if isinstance(err, UsageError):
            raise
        return error_record(path, target, err)
    except ValueError as err:
        raise UsageError(str(err)) from None


def evaluate(path: str | Path, target: str | None = None, shape=None, knobs: dict | None = None,
             run: bool | None = None, seed: int | None = None, profile: bool = False, timeout_s: float = 600.0,
             dump_dir: str | Path | None = None) -> dict:
    """Static evaluation, plus the runtime stage when `run` is true or (None) a GPU of the target is present.

    `run=True` without such a GPU gives a record with status "no_device".
    """
    record = evaluate_static(path, target, shape, knobs, dump_dir)
    if record["status"] != "ok" or run is False:
        return record
    from .errors import NoDeviceError

    try:
        from .runtime.device import detect_target
    except ImportError:
        detect_target = lambda: None  # noqa: E731 - runtime stage not installed
    present = detect_target()
    if present != record["target"]:
        if run:
            err = NoDeviceError(f"--run needs a {record['target']} GPU; this machine has "
                                f"{present or 'none'}", file=str(path))
            record.update(status=err.status, message=err.message)
        return record
    from .runtime.evaluate import runtime_evaluate

    record["runtime"] = runtime_evaluate(str(path), record["target"], shape, knobs, seed, profile)
    if record["runtime"].get("verdict") not in (None, "ok", "correct"):
        record["status"] = record["runtime"]["verdict"]
    return record
