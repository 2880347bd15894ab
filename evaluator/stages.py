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
from .errors import NearpeakError, NoDeviceError, ShapeUnsupported, UsageError
from .request import EvalRequest, ObjectiveShape, weighted_geomean
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


def _require_shapes(spec, request: EvalRequest) -> None:
    """The kernel must run every shape the request's problem names (its own SHAPES are its business)."""
    missing = [s for s in request.required_shapes() if not spec.supports(s)]
    if missing and request.problem is None:  # a shape asked for by hand (`eval --shape`): the caller's mistake
        raise UsageError(f"shape {missing[0]} is not a multiple of SHAPE_MULTIPLE {spec.shape_multiple}",
                         file=spec.path)
    if missing:
        listed = ", ".join("x".join(map(str, s)) for s in missing)
        raise ShapeUnsupported(f"the kernel's SHAPE_MULTIPLE {spec.shape_multiple} cannot run the requested "
                               f"shape(s) {listed}", file=spec.path)


def objective_section(objective: tuple[ObjectiveShape, ...], timing: str, statics: list[dict]) -> dict:
    """The record's `objective`: the static estimate at each objective shape and their weighted geometric mean.

    `statics[i]` is the static section at `objective[i]`; the first is the record's own `static` and is not
    repeated here (`extra_static` holds the others, in order).
    """
    estimates = [s.get("estimated_tflops") for s in statics]
    geomean = (round(weighted_geomean(estimates, [o.weight for o in objective]), 1)
               if all(e is not None and e > 0 for e in estimates) else None)
    return {"shapes": [list(o.shape) for o in objective], "weights": [o.weight for o in objective],
            "timing": timing, "estimated_tflops": estimates, "geomean_estimated_tflops": geomean,
            "extra_static": statics[1:], "kind": "static estimate at each objective shape"}


def evaluate_static(path: str | Path, request: EvalRequest | None = None, **fields) -> dict:
    """Compile a contract kernel here (no GPU needed) and analyse what the compiler produced. In-process.

    With a problem in the request the kernel is compiled at every objective shape (the record's `shape` and
    `static` are the first; `objective` holds all of them) and must support every shape of the problem.
    `fields` are `EvalRequest` fields for callers that build no request (target, shape, knobs, dump_dir).
    """
    from .compile import compile_candidate
    from .contract import load_candidate
    from .static import analyze, dump_artifacts

    request = EvalRequest.build(request, fields)
    path = str(path)
    target = request.target
    try:
        module, spec = load_candidate(path)
        target = target or spec.target
        tgt = _target(target)
        _require_shapes(spec, request)
        objective = request.shapes_for(spec.benchmark_shape)
        knobs = dict(request.knobs or {})
        statics, first_kernels, first_trace, compile_s = [], None, None, 0.0
        for goal in objective:
            started = time.perf_counter()
            kernels, trace = _compile_traced(
                path, lambda shape=goal.shape: compile_candidate(module, spec, tgt, shape, knobs or None))
            compile_s += time.perf_counter() - started
            statics.append({**analyze(kernels, tgt, goal.shape, spec.dtype), "shape": list(goal.shape)})
            if first_kernels is None:
                first_kernels, first_trace = kernels, trace
        shape = objective[0].shape
        record = base_record(path, target)
        record.update(shape=list(shape), knobs={**spec.knobs, **knobs}, spec=spec.to_dict(),
                      compile_seconds=round(compile_s, 3), static={k: v for k, v in statics[0].items()
                                                                    if k != "shape"},
                      kernel_provenance=first_trace.to_dict())
        if request.problem is not None or len(objective) > 1:
            record["objective"] = objective_section(objective, request.timing, statics)
        if request.dump_dir:
            record["dumped"] = dump_artifacts(first_kernels, tgt, request.dump_dir)
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
    from .foreign import compile_foreign, gemm_shape, layout_hint, matrix_layouts, parse_args
    from .provenance import Trace, recording
    from .static import analyze, dump_artifacts

    path = str(path)
    trace = Trace(path)
    specs = []
    try:
        tgt = _target(target)
        specs = parse_args(args)
        with recording(trace):
            run = compile_foreign(path, entry, specs, tgt, config, import_paths or (), env)
    except NearpeakError as err:
        record = error_record(path, target, err)
        # how the file was called, so a failure can be reproduced from its record alone
        record.update(entry=entry, args=list(args), import_paths=list(import_paths or []), env=dict(env or {}))
        layouts = matrix_layouts(specs)
        if record["status"] == "compile_error" and layouts:
            record["argument_layouts"] = layouts
            record["message"] += layout_hint(record["message"], layouts)
        violation = getattr(err, "violation", None)
        if violation is not None:
            record["policy"] = {"violations": [violation.to_dict()]}
        if getattr(err, "meta_allocations", None):
            record["meta_allocations"] = err.meta_allocations
        return [record]
    shape = gemm_shape(specs)  # read off the matrix arguments, for the static objective's useful FLOPs
    records = []
    for launch in run.launches:
        record = base_record(path, target)
        record.update(entry=entry, args=list(args), import_paths=list(import_paths or []), env=dict(env or {}),
                      skipped_at_import=[s.to_dict() for s in run.skipped_at_import],
                      meta_allocations=[a.to_dict() for a in run.meta_allocations],
                      shape=list(shape) if shape else None, compile_seconds=round(launch.seconds, 3),
                      static=analyze(launch.kernels, tgt, shape),
                      kernel_provenance={**trace.to_dict(), "judged": False,
                                         "kernel_files": sorted({k.source_file for k in launch.kernels})})
        if launch.configs:
            index = launch.configs[0].index
            record["config"] = {"index": index, "count": launch.config_count,
                                "choices": [c.to_dict() for c in launch.configs]}
        if dump_dir:
            folder = Path(dump_dir) / f"config{record['config']['index']}" if len(run.launches) > 1 else dump_dir
            record["dumped"] = dump_artifacts(launch.kernels, tgt, folder)
        records.append(record)
    return records


# ---------------------------------------------------------------------------------------------
# Entry points of the sandboxed children (JSON in, JSON out)


def static_stage(path: str, request: dict) -> dict:
    return evaluate_static(path, EvalRequest.from_dict(request))


def foreign_stage(path: str, entry: str, args: list[str], target: str, config: int | None,
                  dump_dir: str | None = None, import_paths: list[str] | None = None,
                  env: dict[str, str] | None = None) -> list[dict]:
    return evaluate_foreign(path, entry, args, target, config, dump_dir=dump_dir, import_paths=import_paths,
                            env=env)


def runtime_stage(path: str, request: dict) -> dict | None:
    """The runtime section, or None when no GPU of the request's target is here and none was required."""
    from .runtime.device import require_device

    req = EvalRequest.from_dict(request)
    try:
        require_device(req.target, with_smi=False)  # runtime_evaluate reads driver and clocks itself
    except NoDeviceError as err:
        return {"status": NoDeviceError.status, "verdict": err.message} if req.run else None
    from .runtime.evaluate import runtime_evaluate

    try:
        return runtime_evaluate(path, req)
    except NearpeakError as err:  # the candidate's contract or import failing on this side too
        return {"status": err.status, "verdict": err.message}


def compare_stage(candidate_path: str, incumbent_path: str, request: dict) -> dict:
    """Interleaved A/B timing with the candidate's runtime defenses; a failure is `accepted` False + `error`."""
    from .runtime.evaluate import compare

    try:
        return compare(candidate_path, incumbent_path, EvalRequest.from_dict(request))
    except NearpeakError as err:
        return {"accepted": False, "error": err.status, "message": err.message, "speedup": None, "ci_low": None,
                "ci_high": None, "method": "interleaved A/B (not run)"}
