"""Runtime checks that make a fast number hard to fake (issue 7, "Runtime defenses").

Each defense answers one way a candidate could look fast or correct without being so:
- `recheck_timed_outputs`: the outputs of the *timed* calls are checked, not only a first call, and the
  operands must still be the ones drawn before timing;
- `cached_result_check`: new operands in the same buffers must give the new product (a kernel that replays
  an earlier result, or skips work it has "seen", fails);
- `untimed_work_check`: device events time the evaluator's stream; the host clock around a fully
  synchronized region sees every stream. Work launched on a side stream shows up as wall time that the
  events and the host's own launch time do not explain;
- `stream_order_check`: the same cheat caught for kernels too short for a wall clock: a launch that does
  not wait for the evaluator's stream reads operands that are not written yet;
- `speed_of_light`: a figure above the dtype's datasheet peak, scaled to the highest clock the GPU reports,
  is impossible and rejected;
- `Integrity`: timers, synchronization and the vendor GEMM are the same objects after the candidate ran
  as before, and the evaluator's own source files hash the same.
"""
from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import torch

from .. import integrity
from .correctness import fill_operands, judge_output, modified_inputs, poison, snapshot_inputs
from .timing import Timer


def _check(name: str, ok: bool, detail: str, **extra) -> dict:
    return {"name": name, "ok": ok, "detail": detail, **extra}


# ---------------------------------------------------------------------------------------------
# Outputs of the timed calls


def recheck_timed_outputs(sets: list[dict[str, torch.Tensor]], snapshots: list[dict[str, torch.Tensor]],
                          spec, shape) -> dict:
    """Every rotated set's output (poisoned before timing) equals its reference; operands are unchanged."""
    for i, (args, snap) in enumerate(zip(sets, snapshots)):
        result = judge_output(args, spec, shape, modified_inputs(args, snap))
        if not result.ok:
            return _check("timed_outputs", False, f"input set {i} after the timed calls: {result.describe()}",
                          reason=result.reason)
    return _check("timed_outputs", True, f"all {len(sets)} timed input sets correct and unmodified")


def cached_result_check(launch: Callable[..., object], args: dict[str, torch.Tensor], spec, knobs: dict, shape,
                        generator: torch.Generator, sync: Callable[[], None]) -> dict:
    """Refill the operands in place, launch again: the output must change to the new product."""
    previous = args["c"].detach().clone()
    fill_operands(args, spec, generator)
    poison(args["c"])
    before = snapshot_inputs(args)
    launch(**args, **knobs)
    sync()
    if torch.equal(args["c"].view(torch.uint8), previous.view(torch.uint8)):
        return _check("fresh_inputs", False, "new operands in the same buffers gave the previous output bit for "
                      "bit: the result was cached, not computed", reason="cached_result")
    result = judge_output(args, spec, shape, modified_inputs(args, before))
    if not result.ok:
        return _check("fresh_inputs", False, f"after refilling the operands in place: {result.describe()}",
                      reason="cached_result" if result.reason == "wrong_result" else result.reason)
    return _check("fresh_inputs", True, "refilled operands gave their own correct product")


# ---------------------------------------------------------------------------------------------
# Work the events do not see


def untimed_work_verdict(event_ms: float, host_launch_ms: float, wall_ms: float,
                         ratio: float = 1.25, slack_ms: float = 1.0) -> tuple[bool, float]:
    """Is `wall_ms` explained by the evaluator-stream events or by the host's own launch time?

    Honest GPU-bound calls give wall ~ events; honest launch-bound calls give wall ~ host launch time.
    Returns (ok, wall / max(events, host)).
    """
    explained = max(event_ms, host_launch_ms)
    excess = wall_ms / explained if explained > 0 else float("inf")
    return wall_ms <= ratio * explained + slack_ms, excess


def untimed_work_check(timer: Timer, call: Callable[[int], object], calls: int = 50) -> dict:
    """Time `calls` candidate launches three ways: events on our stream, host launch time, and wall time
    across a device-wide synchronize (which waits for every stream)."""
    timer.synchronize()
    wall_start = timer.now()
    tokens = []
    host_s = 0.0
    for i in range(calls):
        token = timer.start()
        t0 = timer.now()
        call(i)
        host_s += timer.now() - t0
        timer.stop(token)
        tokens.append(token)
    timer.synchronize()
    wall_ms = (timer.now() - wall_start) * 1e3
    event_ms = sum(timer.elapsed_ms(t) for t in tokens)
    ok, excess = untimed_work_verdict(event_ms, host_s * 1e3, wall_ms)
    detail = (f"{calls} calls: events {event_ms:.3f} ms, host launch {host_s * 1e3:.3f} ms, wall {wall_ms:.3f} ms "
              f"(wall / explained = {excess:.2f})")
    if not ok:
        detail = "work outside the timed stream: " + detail
    return _check("timed_stream", ok, detail, reason=None if ok else "untimed_work", event_ms=event_ms,
                  host_launch_ms=host_s * 1e3, wall_ms=wall_ms,
                  median_event_ms=statistics.median(timer.elapsed_ms(t) for t in tokens))


STREAM_ORDER_SLEEP_CYCLES = 40_000_000   # ~20 ms of GPU clock: far longer than any host launch


def stream_order_check(launch: Callable[..., object], args: dict[str, torch.Tensor], spec, knobs: dict, shape,
                       generator: torch.Generator, device) -> dict:
    """The candidate's work must be ordered after earlier work on the evaluator's stream.

    The evaluator's stream is kept busy (a GPU-side sleep), then refills the operands and poisons the
    output, and only then does the candidate launch. A kernel on the evaluator's stream waits for all of
    that and computes the new product; one launched on a side stream runs during the sleep on the old
    operands, or is overwritten by the poison. Either way its output is wrong, whatever its size (a wall
    clock cannot tell a 10 us side-stream kernel from launch overhead; this can).
    """
    if torch.device(device).type != "cuda" or not hasattr(torch.cuda, "_sleep"):
        return _check("stream_order", True, "not applicable on this device")
    fresh = {name: torch.empty_like(t) for name, t in args.items() if name != "c"}
    fill_operands(fresh, spec, generator)
    torch.cuda.synchronize(device)
    torch.cuda._sleep(STREAM_ORDER_SLEEP_CYCLES)
    for name, values in fresh.items():
        args[name].copy_(values)
    poison(args["c"])
    launch(**args, **knobs)
    torch.cuda.synchronize(device)
    result = judge_output(args, spec, shape)
    if not result.ok:
        return _check("stream_order", False, "work not ordered on the evaluator's stream (it ran before the "
                      f"operands it was given were written): {result.describe()}", reason="untimed_work")
    return _check("stream_order", True, "launch waited for earlier work on the evaluator's stream")


# ---------------------------------------------------------------------------------------------
# Speed of light


def speed_of_light(measured_tflops: float, peak_tflops: float | None, datasheet_clock_ghz: float,
                   max_clock_mhz: float | None, margin: float = 1.02, unknown_clock_factor: float = 1.10) -> dict:
    """Reject a rate above the datasheet peak scaled to the highest clock the card reports.

    The datasheet peak is quoted at `datasheet_clock_ghz`; an H200 was seen at 1980 MHz against 1830 in
    the datasheet, so the limit scales with the reported maximum clock, or by `unknown_clock_factor`
    when the clock cannot be read.
    """
    if peak_tflops is None:
        return _check("speed_of_light", True, "no datasheet peak for this dtype; not checked", limit_tflops=None)
    factor = max(1.0, max_clock_mhz / 1000 / datasheet_clock_ghz) if max_clock_mhz else unknown_clock_factor
    limit = peak_tflops * factor * margin
    ok = measured_tflops <= limit
    detail = f"{measured_tflops:.1f} TFLOP/s against a limit of {limit:.1f} (datasheet {peak_tflops:.1f} x {factor:.3f})"
    return _check("speed_of_light", ok, detail if ok else "impossible: " + detail,
                  reason=None if ok else "impossible_speed", limit_tflops=limit)


# ---------------------------------------------------------------------------------------------
# Integrity of the evaluator


def _watched() -> dict[str, object]:
    """The callables the evaluator's numbers depend on, by name."""
    watched: dict[str, object] = {
        "time.perf_counter": time.perf_counter, "time.monotonic": time.monotonic,
        "torch.matmul": torch.matmul, "torch.Tensor.__matmul__": torch.Tensor.__matmul__,
        "torch.randn": torch.randn, "torch.equal": torch.equal,
        "torch.linalg.vector_norm": torch.linalg.vector_norm,
    }
    if torch.cuda.is_available():
        watched.update({"torch.cuda.synchronize": torch.cuda.synchronize, "torch.cuda.Event": torch.cuda.Event,
                        "torch.cuda.Event.record": torch.cuda.Event.record,
                        "torch.cuda.Event.elapsed_time": torch.cuda.Event.elapsed_time})
    return watched


@dataclass(frozen=True)
class Integrity:
    """What the evaluator relies on, captured before the candidate is imported."""

    functions: dict[str, int]
    files: integrity.Snapshot

    @classmethod
    def capture(cls) -> Integrity:
        return cls(functions={k: id(v) for k, v in _watched().items()}, files=integrity.snapshot())

    def check(self) -> dict:
        now = _watched()
        patched = sorted(k for k, v in now.items() if self.functions.get(k) != id(v))
        changed = self.files.changes(integrity.snapshot())
        ok = not patched and not changed
        parts = []
        if patched:
            parts.append("replaced: " + ", ".join(patched))
        if changed:
            parts.append("evaluator files changed: " + ", ".join(changed))
        return _check("integrity", ok, "; ".join(parts) or "timers, GEMM and evaluator files untouched",
                      reason=None if ok else "tampered")
