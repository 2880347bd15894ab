"""The runtime stage: correctness, timing against the vendor library, defenses, optional profiler.

`runtime_evaluate` is a pure function of its arguments that returns a JSON-ready dict (the record's
"runtime" section), so `evaluator.sandbox` can run it in a fresh child process per candidate. What the
candidate does wrong comes back in the dict: `status` is a reason code ("ok", "unwritten", "wrong_result",
"inputs_modified", "non_finite", "cached_result", "untimed_work", "impossible_speed", "tampered",
"foreign_compute", "compile_error", "launch_error", "runtime_fault") and `verdict` is "correct" or the sentence naming the first
failing shape and where its error is largest; `summary` adds the headline figures of a passing kernel. Only
"no GPU of this target here" (`NoDeviceError`) and malformed requests (`UsageError`, contract errors) raise.
"""
from __future__ import annotations

import secrets
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

from .. import provenance
from ..contract import load_candidate
from ..errors import UsageError
from ..records import RuntimeRecord
from ..request import EvalRequest
from ..sandbox import GPU_FAULT_PATTERN
from ..targets import Target, get_target
from . import correctness as corr
from . import defenses, timing
from .device import DeviceInfo, health_check, read_driver_and_clocks, require_device, synchronize

_clock = time.perf_counter  # bound before any candidate is imported
TIMING_BUDGET_S = 1.0       # seconds of timed calls per side (candidate, vendor)
UNTIMED_CHECK_CALLS = 50


def _versions() -> dict:
    import torch
    import triton

    return {"torch_version": torch.__version__, "triton_version": triton.__version__,
            "cuda_version": torch.version.cuda, "hip_version": torch.version.hip}


def _fault_status(exc: BaseException) -> str:
    from triton.compiler.errors import CompilationError

    if isinstance(exc, CompilationError):
        return "compile_error"
    return "runtime_fault" if GPU_FAULT_PATTERN.search(str(exc)) else "launch_error"


def _last_line(exc: BaseException) -> str:
    """The exception's type and the last non-empty line of its message (where tracebacks put the cause)."""
    lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
    return f"{type(exc).__name__}: {lines[-1].strip() if lines else ''}"


def _resolve(path, request: EvalRequest, benchmark_from=None):
    """(module, spec, target, objective shapes) of a kernel file for `request`; the objective shapes are the
    request's problem (or shape), else the benchmark shape of `benchmark_from` (a spec) or the kernel's own."""
    module, spec = load_candidate(str(path))
    target = request.target or spec.target
    if target != spec.target:
        raise UsageError(f"the kernel declares TARGET {spec.target!r}, asked to run it as {target!r}", file=str(path))
    objective = request.shapes_for((benchmark_from or spec).benchmark_shape)
    for shape in [o.shape for o in objective] + list(request.required_shapes()):
        if not spec.supports(tuple(shape)):
            raise UsageError(f"shape {tuple(shape)} is not a multiple of SHAPE_MULTIPLE {spec.shape_multiple}",
                             file=str(path))
    return module, spec, get_target(target), objective


def _trace_launches(module, path) -> provenance.Trace:
    """Route every call of the candidate's `launch` (also its own calls of it) through a provenance trace."""
    trace = provenance.Trace(str(path))
    trace.declare_module(module)
    module.launch = provenance.guard(module.launch, trace)
    return trace


def _provenance_check(trace: provenance.Trace, launch_once: Callable[[], object]) -> dict:
    """The device kernels a few more launches run (torch.profiler), judged with everything traced so far."""
    return provenance.kernel_check(trace, provenance.profiled_kernel_names(launch_once))


def _device(info: DeviceInfo):
    import torch

    torch.cuda.set_device(info.index)
    return torch.device("cuda", info.index)


def _base_record(info: DeviceInfo, seed: int, shape, knobs: dict) -> dict:
    return {"measured": True, "correct": False, "status": "ok", "verdict": "", "seed": seed, "shape": list(shape),
            "knobs": knobs, "device": info.name, "device_info": info.to_dict(), "driver": info.driver,
            "clocks_mhz": {"before": info.clocks_mhz}, **_versions()}


def _provenance() -> dict:
    return {
        "correct": "measured: fresh random inputs, float64 reference, poisoned output, operands compared bitwise",
        "tflops": "measured: 2*M*N*K over the median of per-call device-event times",
        "vendor_tflops": "measured the same way, interleaved call by call with the candidate",
        "host_us_per_call": "measured: host clock around 50 back-to-back launch calls, the device idle at the start",
        "graph_median_ms": "measured: device events around CUDA-graph replays of 10 calls, interleaved with the vendor's",
        "peak_tflops": "datasheet figure (evaluator.targets), not measured",
        "pct_of_peak": "measured TFLOP/s over the datasheet peak",
        "clocks_mhz": "read from the vendor SMI tool before and after timing, not controlled",
        "profile": "measured by the named profiler on separate launches (not the timed ones)",
    }


def _cache_bytes(info: DeviceInfo, target: Target) -> int:
    """The last-level cache the rotation must defeat: the datasheet figure, or more if the device reports more."""
    return max(info.l2_bytes or 0, target.last_level_cache_bytes)


def _rotating_sets(spec, shape, device, seed: int, cache_bytes: int,
                   outputs_per_set: int = 1) -> tuple[list[dict], int]:
    """Launch-argument sets drawn from `seed`, enough that together they exceed twice the cache.

    `outputs_per_set` counts the output buffers the calls on one set write (`compare` gives the incumbent its
    own), since they pass through the cache too. Returns the sets and the bytes one set occupies.
    """
    def draw(i: int) -> dict:
        return corr.make_arguments(spec, shape, device, corr.generator_for(device, corr.shape_seed(seed, shape, 1 + i)))

    first = draw(0)
    output_bytes = first["c"].numel() * first["c"].element_size()
    bytes_per_set = sum(t.numel() * t.element_size() for t in first.values()) + (outputs_per_set - 1) * output_bytes
    count = timing.input_set_count(bytes_per_set, cache_bytes)
    return [first] + [draw(i) for i in range(1, count)], bytes_per_set


def _timing_phase(module, spec, target, info: DeviceInfo, device, shape, knobs: dict, seed: int,
                  budget_s: float) -> tuple[dict, list, list, timing.Timer, dict[str, Callable[[int], object]]]:
    """Rotate input sets over the cache, time candidate and vendor interleaved; returns results + state."""
    cache = _cache_bytes(info, target)
    sets, bytes_per_set = _rotating_sets(spec, shape, device, seed, cache)
    count = len(sets)
    snapshots = [corr.snapshot_inputs(s) for s in sets]

    def candidate(i: int):
        return module.launch(**sets[i % count], **knobs)

    calls: dict[str, Callable[[int], object]] = {"candidate": candidate}
    vendors = [timing.vendor_call(spec, s) for s in sets]
    vendor_name, vendor_note = vendors[0][1], None
    if vendors[0][0] is None:
        vendor_name, vendor_note = None, vendors[0][1]
    else:
        try:
            vendors[0][0]()
            synchronize(device)
            # The vendor side goes through a guard too (its trace is not judged): the same host instrumentation.
            calls["vendor"] = provenance.guard(lambda i: vendors[i % count][0](), provenance.Trace("<vendor>"))
        except Exception as exc:  # noqa: BLE001 - e.g. torch._scaled_mm refusing a layout or dtype pair
            vendor_name, vendor_note = None, f"vendor call failed: {_last_line(exc)}"
    timer = timing.Timer(device)
    reps = timing.reps_for_budget(timer, candidate, budget_s)
    times = timing.time_calls(timer, calls, reps=reps, warmup=5)
    cand = timing.summarize(times["candidate"])
    result = {
        "median_ms": cand.median_ms, "tflops": timing.tflops(shape, cand.median_ms),
        "spread": {"candidate": cand.to_dict()},
        "timing_method": (f"device events per call on the evaluator's stream, median of {reps} calls after 5 "
                          f"warm-up calls, {count} rotating input sets ({count * bytes_per_set / 2 ** 20:.0f} MiB, "
                          f"cache {cache / 2 ** 20:.0f} MiB), candidate and vendor interleaved call by call"),
        "input_sets": count, "rotation_bytes": count * bytes_per_set,
        "vendor": vendor_name, "vendor_note": vendor_note, "vendor_median_ms": None, "vendor_tflops": None,
        "ratio_vs_vendor": None,
    }
    if "vendor" in times:
        vend = timing.summarize(times["vendor"])
        result["spread"]["vendor"] = vend.to_dict()
        result.update(vendor_median_ms=vend.median_ms, vendor_tflops=timing.tflops(shape, vend.median_ms),
                      ratio_vs_vendor=vend.median_ms / cand.median_ms)
    peak = target.peak_tflops.get(spec.dtype)
    result.update(peak_tflops=peak, pct_of_peak=100 * result["tflops"] / peak if peak else None)
    return result, sets, snapshots, timer, calls


GRAPH_CALLS = 10          # launches captured per CUDA graph
GRAPH_BUDGET_S = 0.25     # seconds of graph replays per side


def _launch_costs(timer: timing.Timer, calls: dict, device, shape, timed: dict) -> dict:
    """Host time per launch call and per-call GPU time under CUDA-graph replay, candidate and vendor.

    `launch_note` is one sentence for a reader (or an LLM prompt) saying what the launch path costs; the
    accept rule keeps using the per-call (eager) `median_ms`.
    """
    host = {name: timing.host_us_per_call(timer, call) for name, call in calls.items()}
    replays = int(max(5, min(50, GRAPH_BUDGET_S / max(GRAPH_CALLS * timed["median_ms"] * 1e-3, 1e-6))))
    graphs = timing.graph_times(calls, device, GRAPH_CALLS, replays)
    out = {"host_us_per_call": host["candidate"], "vendor_host_us_per_call": host.get("vendor"),
           "graph_median_ms": None, "graph_tflops": None, "vendor_graph_median_ms": None,
           "ratio_vs_vendor_graph": None, "graph_note": None,
           "graph_method": f"CUDA graph of {GRAPH_CALLS} calls over the rotating sets, {replays} replays per side "
                           "interleaved, device events per replay / calls, median"}
    failed = {name: g for name, g in graphs.items() if isinstance(g, str)}
    if failed:
        out["graph_note"] = "; ".join(f"{name} not capturable: {why}" for name, why in failed.items())
    cand = graphs.get("candidate")
    if isinstance(cand, timing.Summary):
        timed["spread"]["candidate_graph"] = cand.to_dict()
        out.update(graph_median_ms=cand.median_ms, graph_tflops=timing.tflops(shape, cand.median_ms))
        vend = graphs.get("vendor")
        if isinstance(vend, timing.Summary):
            timed["spread"]["vendor_graph"] = vend.to_dict()
            out.update(vendor_graph_median_ms=vend.median_ms, ratio_vs_vendor_graph=vend.median_ms / cand.median_ms)
    vendor_host = f" ({out['vendor_host_us_per_call']:.1f} us for {timed['vendor']})" if host.get("vendor") else ""
    graph = (f"; GPU time alone (CUDA-graph replay) {out['graph_median_ms'] * 1e3:.1f} us per call"
             if out["graph_median_ms"] else "")
    ratio = f", {out['ratio_vs_vendor_graph']:.3f}x the vendor" if out["ratio_vs_vendor_graph"] else ""
    out["launch_note"] = (f"host time per launch() call {host['candidate']:.1f} us{vendor_host}; per-call (eager) "
                          f"time {timed['median_ms'] * 1e3:.1f} us{graph}{ratio}")
    return out


def runtime_evaluate(path, request: EvalRequest | None = None, *, timing_budget_s: float = TIMING_BUDGET_S,
                     **fields) -> dict:
    """Check and time one candidate on this machine's GPU; returns the record's "runtime" section.

    Correctness covers the kernel's benchmark shape, a small and a held-out shape and every shape of the
    request's problem; the timed figures are at the first objective shape. Raises NoDeviceError when no GPU
    of the kernel's target is present.
    """
    import torch

    integrity = defenses.Integrity.capture()  # before the candidate's module runs any code
    started = _clock()
    request = EvalRequest.build(request, fields)
    module, spec, tgt, objective = _resolve(path, request)
    shape = objective[0].shape
    trace = _trace_launches(module, path)
    info = require_device(tgt.name)
    device = _device(info)
    seed = int(request.seed) if request.seed is not None else secrets.randbits(31)
    profile = request.profile
    knobs = {**spec.knobs, **(request.knobs or {})}
    record = _base_record(info, seed, shape, knobs)
    record["held_out_shape"] = list(corr.held_out_shape(spec.shape_multiple, seed))  # never shown to a proposer
    record["provenance"] = _provenance()
    phases: dict[str, float] = {"load_s": _clock() - started}
    record["phase_seconds"] = phases

    def sync():
        synchronize(device)

    def finish(status: str, verdict: str) -> dict:
        record.update(status=status, verdict=verdict, correct=status == "ok")
        record["health"] = health_check(device)
        phases["total_s"] = _clock() - started
        return RuntimeRecord.from_dict(record).to_dict()  # every documented field, None where it did not apply

    # Correctness (includes the JIT compile of the first launch).
    t0 = _clock()
    shapes = corr.correctness_shapes(spec, seed, shape)
    shapes += [s for s in request.required_shapes() if tuple(s) not in shapes]
    record["tolerance"] = corr.tolerance_for(spec.dtype, spec.out_dtype)
    try:
        report = corr.check_correctness(module.launch, spec, shapes, knobs, device, seed, sync,
                                        held_out=record["held_out_shape"])
    except Exception as exc:  # noqa: BLE001 - whatever the candidate's launch raised is its verdict
        phases["correctness_s"] = _clock() - t0
        return finish(_fault_status(exc), _last_line(exc))
    phases["correctness_s"] = _clock() - t0
    record.update(shapes=[c.to_dict() for c in report.checks], reference_dtype=report.reference_dtype)
    if not trace.ok:  # a right answer computed by someone else's code is no verdict on the candidate's kernel
        return finish(provenance.STATUS, trace.error().message)
    if not report.ok:
        return finish(report.first_failure.reason or "wrong_result", report.verdict)

    # Timing.
    t0 = _clock()
    try:
        timed, sets, snapshots, timer, calls = _timing_phase(module, spec, tgt, info, device, shape, knobs,
                                                             seed, timing_budget_s)
    except Exception as exc:  # noqa: BLE001
        phases["timing_s"] = _clock() - t0
        return finish(_fault_status(exc), _last_line(exc))
    phases["timing_s"] = _clock() - t0
    record.update(timed)
    record["clocks_mhz"]["after_timing"] = read_driver_and_clocks(info.target, info.index)[1]

    # Defenses.
    t0 = _clock()
    max_clock = info.clocks_mhz.get("max_sm") or record["clocks_mhz"]["after_timing"].get("max_sm")
    try:
        checks = [
            defenses.recheck_timed_outputs(sets, snapshots, spec, shape),
            defenses.untimed_work_check(timer, calls["candidate"], UNTIMED_CHECK_CALLS),
            defenses.stream_order_check(module.launch, sets[-1], spec, knobs, shape,
                                        corr.generator_for(device, corr.shape_seed(seed, shape, 98)), device),
            defenses.cached_result_check(module.launch, sets[0], spec, knobs, shape,
                                         corr.generator_for(device, corr.shape_seed(seed, shape, 99)), sync),
            defenses.speed_of_light(record["tflops"], record["peak_tflops"], tgt.clock_ghz, max_clock),
            _provenance_check(trace, lambda first=sets[0]: module.launch(**first, **knobs)),
        ]
    except Exception as exc:  # noqa: BLE001
        phases["defenses_s"] = _clock() - t0
        return finish(_fault_status(exc), _last_line(exc))
    del sets, snapshots
    torch.cuda.empty_cache()
    checks.append(integrity.check())
    phases["defenses_s"] = _clock() - t0
    record["defenses"] = checks
    stream = next(c for c in checks if c["name"] == "timed_stream")
    # Per-call events overstate a kernel shorter than its own host launch (the GPU waits for the launch
    # inside the event pair); say so rather than report a launch-bound time as the kernel's.
    record["launch_bound"] = stream["host_launch_ms"] / UNTIMED_CHECK_CALLS > 0.5 * stream["median_event_ms"]
    failed = next((c for c in checks if not c["ok"]), None)
    if failed is not None:
        return finish(failed.get("reason") or "rejected", failed["detail"])

    # Launch costs (host time per call, CUDA-graph time), only for a candidate every defense passed.
    t0 = _clock()
    try:
        if timer.is_gpu:
            record.update(_launch_costs(timer, calls, device, shape, record))
    except Exception as exc:  # noqa: BLE001 - a figure beside the verdict; its failure is reported, not fatal
        record["launch_note"] = f"launch costs not measured: {_last_line(exc)}"
    del calls
    phases["launch_costs_s"] = _clock() - t0

    if profile:
        from ..profilers import profile_candidate

        t0 = _clock()
        prof = profile_candidate(str(path), module, spec, tgt, shape, knobs, seed)
        phases["profile_s"] = _clock() - t0
        record.update(profile=prof, efficiency=prof.get("efficiency"))
    if not trace.ok:  # the launch-cost and profiler calls are traced too
        return finish(provenance.STATUS, trace.error().message)
    record["summary"] = (f"{report.verdict}; {record['tflops']:.1f} TFLOP/s"
                         + (f", {record['ratio_vs_vendor']:.3f}x {record['vendor']}" if record["ratio_vs_vendor"]
                            else ""))
    return finish("ok", "correct")


def _candidate_defenses(module, spec, knobs: dict, shape, sets: list[dict], snapshots: list[dict], device,
                        seed: int, trace: provenance.Trace, integrity: defenses.Integrity) -> list[dict]:
    """The runtime defenses of `runtime_evaluate` that apply to the candidate side of a comparison."""
    def sync():
        synchronize(device)

    return [
        defenses.recheck_timed_outputs(sets, snapshots, spec, shape),
        defenses.untimed_work_check(timing.Timer(device), lambda i: module.launch(**sets[i % len(sets)], **knobs),
                                    UNTIMED_CHECK_CALLS),
        defenses.stream_order_check(module.launch, sets[-1], spec, knobs, shape,
                                    corr.generator_for(device, corr.shape_seed(seed, shape, 98)), device),
        defenses.cached_result_check(module.launch, sets[0], spec, knobs, shape,
                                     corr.generator_for(device, corr.shape_seed(seed, shape, 99)), sync),
        _provenance_check(trace, lambda: module.launch(**sets[0], **knobs)),
        integrity.check(),
    ]


LAUNCH_BOUND_FRACTION = 0.5   # host time per call above this share of the GPU time per call: launch-bound


def _launch_bound(timer: timing.Timer, sides: dict[str, Callable[[int], object]], gpu_ms: dict[str, float]) -> dict:
    """Host time per launch call of each side beside its GPU time per call, and whether the host decides."""
    host: dict[str, float] = {}
    for order in (list(sides), list(reversed(sides))):  # each side measured first once: the lower of two
        for name in order:
            us = timing.host_us_per_call(timer, sides[name], calls=20)
            host[name] = min(us, host.get(name, us))
    bound = {name: host[name] * 1e-3 > LAUNCH_BOUND_FRACTION * gpu_ms[name] for name in sides}
    return {"host_us_per_call": host, "gpu_us_per_call": {k: v * 1e3 for k, v in gpu_ms.items()},
            "launch_bound": any(bound.values()), "sides_launch_bound": bound}


@dataclass(frozen=True)
class _Contest:
    """What one comparison holds fixed across its shapes: both kernels, the device, the seed, the guards."""

    cand_mod: object
    inc_mod: object
    cand_spec: object
    inc_spec: object
    request: EvalRequest
    info: DeviceInfo
    tgt: Target
    device: object
    seed: int
    trace: provenance.Trace          # the candidate's: judged
    integrity: defenses.Integrity


def _compare_at(contest: _Contest, shape, defend_fully: bool) -> dict:
    """The A/B at one shape: both sides under the same guard, on the same input sets in the same order.

    The incumbent's launches go through a provenance guard of their own (its trace is not judged), so both
    sides pay the same host instrumentation; under graph timing neither side runs host code while timed.
    """
    cand_mod, inc_mod, cand_spec, inc_spec = contest.cand_mod, contest.inc_mod, contest.cand_spec, contest.inc_spec
    request, device, seed, trace = contest.request, contest.device, contest.seed, contest.trace
    sets, _ = _rotating_sets(cand_spec, shape, device, seed, _cache_bytes(contest.info, contest.tgt),
                             outputs_per_set=2)
    snapshots = [corr.snapshot_inputs(s) for s in sets]
    count = len(sets)
    inc_out = [s["c"].clone() for s in sets]
    cand_knobs, inc_knobs = {**cand_spec.knobs, **(request.knobs or {})}, inc_spec.knobs
    inc_launch = provenance.guard(inc_mod.launch, provenance.Trace(str(inc_spec.path)))

    def cand(i: int):
        return cand_mod.launch(**sets[i % count], **cand_knobs)

    def inc(i: int):
        return inc_launch(**{**sets[i % count], "c": inc_out[i % count]}, **inc_knobs)

    if request.timing == "graph":
        calls = max(request.ab_calls, count)  # every input set written by each replay: all are re-checked
        cand_graph = timing.capture_graph(cand, device, calls)
        inc_graph = timing.capture_graph(inc, device, calls)
        for out in [s["c"] for s in sets] + inc_out:  # what the eager warm-ups wrote must not pass for the replays'
            corr.poison(out)
        result = timing.compare_graphs(cand_graph, inc_graph, calls, device, rounds=request.ab_rounds,
                                       min_gain=request.min_gain, seed=seed)
        replay_check = _provenance_check(trace, cand_graph.replay)
        replay_check["name"] = "provenance_graph_replay"
    else:
        result = timing.compare_interleaved(cand, inc, device, rounds=request.ab_rounds,
                                            calls_per_round=request.ab_calls,
                                            min_gain=request.min_gain, seed=seed)
        replay_check = None
    samples = result["samples"]
    result.update(_launch_bound(timing.Timer(device), {"candidate": cand, "incumbent": inc},
                                {"candidate": statistics.median(samples["candidate_ms"]),
                                 "incumbent": statistics.median(samples["incumbent_ms"])}))
    if defend_fully:
        checks = _candidate_defenses(cand_mod, cand_spec, cand_knobs, shape, sets, snapshots, device, seed, trace,
                                     contest.integrity)
    else:  # later shapes: the timed outputs and operands; the other defenses ran at the first shape
        checks = [defenses.recheck_timed_outputs(sets, snapshots, cand_spec, shape)]
    if replay_check is not None:
        checks.insert(0, replay_check)
    result.update(shape=list(shape), input_sets=count, checks=checks)
    if defend_fully:
        result["vs_vendor"] = _vendor_comparison(cand, cand_spec, sets, device, request.ab_rounds, request.ab_calls,
                                                 seed)
    return result


def compare(candidate_path, incumbent_path, request: EvalRequest | None = None, **fields) -> dict:
    """Time candidate against incumbent interleaved on the same inputs; accept on the interval's low end.

    The shapes are the request's objective (its problem's, or its one shape, else the incumbent's benchmark
    shape: never the candidate's own SHAPES), each timed in A/B rounds under the problem's timing; several
    shapes combine into one weighted-geometric-mean speedup with one paired-bootstrap interval. Both kernels
    read the same rotating operand sets, write their own outputs and run under the same instrumentation. The
    candidate side gets the defenses of `runtime_evaluate`: outputs of the timed calls checked and operands
    unchanged, no work off the timed stream, no cached result, only its own kernels computing (traced on
    every call, and profiled on a replay of its graph under graph timing), timers and evaluator untouched. A
    failure makes `accepted` False and names the reason in `candidate_status`. Raises NoDeviceError when no
    GPU of the target is present.
    """
    import torch

    integrity = defenses.Integrity.capture()  # before either module runs any code
    request = EvalRequest.build(request, fields)
    inc_mod, inc_spec = load_candidate(str(incumbent_path))
    cand_mod, cand_spec, tgt, objective = _resolve(candidate_path, request, benchmark_from=inc_spec)
    trace = _trace_launches(cand_mod, candidate_path)
    _resolve(incumbent_path, request.with_(target=tgt.name), benchmark_from=inc_spec)
    for field in ("dtype", "out_dtype", "scales"):
        if getattr(cand_spec, field) != getattr(inc_spec, field):
            raise UsageError(f"candidate and incumbent differ in {field}: {getattr(cand_spec, field)!r} vs "
                             f"{getattr(inc_spec, field)!r}")
    info = require_device(tgt.name)
    device = _device(info)
    seed = int(request.seed) if request.seed is not None else secrets.randbits(31)
    contest = _Contest(cand_mod, inc_mod, cand_spec, inc_spec, request, info, tgt, device, seed, trace, integrity)
    per_shape = []
    for n, goal in enumerate(objective):
        per_shape.append(_compare_at(contest, goal.shape, defend_fully=n == 0))
        torch.cuda.empty_cache()
    first = per_shape[0]
    if len(per_shape) == 1:
        result = {k: v for k, v in first.items() if k != "checks"}
    else:
        speedup, low, high = timing.combine_rounds(
            [(r["samples"]["candidate_ms"], r["samples"]["incumbent_ms"]) for r in per_shape],
            [o.weight for o in objective], seed=seed)
        result = {"speedup": speedup, "ci_low": low, "ci_high": high, "confidence": first["confidence"],
                  "accepted": low > 1 + request.min_gain, "min_gain": request.min_gain,
                  "method": f"weighted geometric mean over {len(per_shape)} shapes of: {first['method']}",
                  "launch_bound": any(r["launch_bound"] for r in per_shape), "vs_vendor": first.get("vs_vendor"),
                  "per_shape": [{k: v for k, v in r.items() if k not in ("checks", "vs_vendor")} for r in per_shape],
                  "weights": [o.weight for o in objective], "shape": first["shape"]}
    checks = [c for r in per_shape for c in r["checks"]]
    failed = next((c for c in checks if not c["ok"]), None)
    result.update(seed=seed, device=info.name, measured=True, timing=request.timing,
                  shapes=[list(o.shape) for o in objective], candidate_defenses=checks,
                  candidate_correct=failed is None,
                  candidate_status="ok" if failed is None else failed.get("reason") or "rejected",
                  candidate_verdict=None if failed is None else failed["detail"])
    if result.get("launch_bound"):
        result["launch_note"] = ("launch-bound: host time per launch call is above half the GPU time per call, so "
                                 "per-call times include the host launch" +
                                 ("; CUDA-graph timing (--timing graph) measures GPU time alone"
                                  if request.timing != "graph" else ""))
    if failed is not None:
        result["accepted"] = False
    return result


def _vendor_comparison(cand: Callable[[int], object], spec, sets: list, device, rounds: int, calls_per_round: int,
                       seed: int) -> dict:
    """The candidate against the vendor library, interleaved on the same input sets in the same session.

    `ratio` is vendor time / candidate time (above 1 the candidate is faster), with its bootstrap interval;
    a run's steps each carry one, so where a climb stands against the vendor never mixes sessions.
    """
    vendors = [timing.vendor_call(spec, s) for s in sets]
    if vendors[0][0] is None:
        return {"vendor": None, "note": vendors[0][1]}
    try:
        vendors[0][0]()
        synchronize(device)
    except Exception as exc:  # noqa: BLE001 - e.g. torch._scaled_mm refusing a layout or dtype pair
        return {"vendor": None, "note": f"vendor call failed: {_last_line(exc)}"}
    guarded = provenance.guard(lambda i: vendors[i % len(sets)][0](), provenance.Trace("<vendor>"))
    timed = timing.compare_interleaved(cand, guarded, device, rounds=rounds, calls_per_round=calls_per_round,
                                       seed=seed)  # the vendor side pays the candidate's guard too
    return {"vendor": vendors[0][1], "ratio": timed["speedup"], "ci_low": timed["ci_low"],
            "ci_high": timed["ci_high"], "method": timed["method"].replace("A/B", "candidate/vendor")}
