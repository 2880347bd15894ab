"""Evaluating candidates and the accept rule.

The loop asks two things of the evaluator: a record for a kernel file (static stage, plus the runtime stage
when a GPU of the target is present) and, on a GPU, an interleaved A/B comparison of candidate and incumbent.
Both go through `Evaluator` (each call in fresh sandboxed processes) so another executor (a process pool,
a Ray actor per GPU) can replace it without touching the loop.

The accept rule has two modes, fixed when a run starts and written into its run.json:

* measured: correct on every shape, and the lower bound of the interleaved speedup's confidence interval
  exceeds 1 + min_gain;
* static (no GPU of the target): a declared static objective, `estimated_tflops` (useful FLOPs of the
  evaluated shape over the estimated kernel time, so redundant matrix work can only lower it); the lower bound of
  the estimated candidate/incumbent ratio, widened by the model's measured ratio error on the target
  (evaluator.static_error), must exceed 1 + min_gain, as in measured mode. The hot loop's estimated efficiency
  stays a diagnostic. Every figure it produces is a static estimate and says so.

Either way a static screen runs first, so a candidate that does not compile, spills in the hot loop beyond
the budget or breaks the policy is rejected without spending GPU time.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from evaluator import api
from evaluator.request import EvalRequest, Problem, weighted_geomean
from evaluator.static_error import StaticSpeedup, static_speedup
from evaluator.targets import UnknownTargetError, get_target

from .figures import figures

MEASURED, STATIC = "measured", "static"
OBJECTIVES = {
    MEASURED: "measured: correct on every shape and interleaved A/B speedup over the incumbent whose 95% "
              "confidence lower bound exceeds 1 + min_gain",
    STATIC: "static estimate (no GPU of the target): higher estimated TFLOP/s (useful 2*M*N*K FLOPs of the "
            "evaluated shape over the estimated kernel time; wasted matrix work only lowers it) whose ratio over the "
            "incumbent, less the static model's error for a ratio on this target, still exceeds 1 + min_gain; a gain "
            "resting on a mechanism the model has not validated on the target is labelled and needs a wider margin; "
            "not a measurement",
}
TIE = 1e-9


@dataclass(frozen=True)
class Judgement:
    passed: bool
    reason: str
    score: tuple[float, ...]          # larger is better; ranks passing candidates of one step
    screened_out: bool                # failed on its own (not merely no better than the incumbent)
    comparison: dict | None = None    # the interleaved timing result, measured mode only


class Evaluator:
    """Evaluation through evaluator.api, every candidate in fresh sandboxed processes (evaluator.isolated).

    `problem` is the run's (its shapes, weights and timing): every record and comparison is made at it,
    never at a candidate's own SHAPES; None evaluates each kernel at its own declarations.
    """

    def __init__(self, target: str, seed: int, timeout_s: float = 600.0, problem: Problem | None = None):
        self.target = target
        self.seed = seed
        self.timeout_s = timeout_s  # per evaluation and per comparison; past it the sandbox is killed
        self.problem = problem

    def request(self, **fields) -> EvalRequest:
        return EvalRequest(target=self.target, problem=self.problem, timeout_s=self.timeout_s, **fields)

    def record(self, path: Path, run: bool | None) -> dict:
        # No seed: each evaluation draws its own inputs and held-out shape (kept in the record, never shown).
        # A candidate that runs on a GPU is profiled too: its matrix-unit efficiency is a headline figure.
        return api.evaluate(str(path), self.request(run=run, profile=run is not False))

    def compare(self, candidate: Path, incumbent: Path, shape, min_gain: float) -> dict:
        request = self.request(min_gain=min_gain, shape=tuple(shape) if shape and not self.problem else None)
        return api.compare(candidate, incumbent, request)

    def self_compare(self, kernel: Path, copy: Path, rounds: int, calls: int) -> dict:
        """A short A/A: `kernel` against a byte-identical `copy` (the run's noise check)."""
        return api.compare(kernel, copy, self.request(ab_rounds=rounds, ab_calls=calls))


def describe_failure(record: dict) -> str:
    """A failed record in one line: status, where, message."""
    where = f" (line {record['line']})" if record.get("line") else ""
    message = f": {record['message']}" if record.get("message") else ""
    return f"{record.get('status')}{where}{message}"


def screen(record: dict, max_spills: int) -> str | None:
    """Why a record is rejected before any timing, or None when it passes the static screen."""
    if record.get("status") != "ok":
        return describe_failure(record)
    f = figures(record)
    if f.hot_loop_spills is not None and f.hot_loop_spills > max_spills:
        return f"{f.hot_loop_spills} spill instructions in the hot loop (budget {max_spills})"
    misfit = resources_misfit(record)
    if misfit:
        return f"does not fit on {record.get('target')}: {misfit}; it would fail at launch"
    if f.correct is False:  # measured wrong on its own run: no interleaved comparison is worth its GPU time
        runtime = record.get("runtime") or {}
        return f"incorrect results (measured): {runtime.get('verdict')}"
    return None


def resources_misfit(record: dict) -> str | None:
    """What the compiled kernel asks for beyond the target's per-CTA limits (evaluator.targets facts), or None.

    Triton compiles such a kernel without complaint and the launch fails on the GPU, so the screen catches it.
    """
    static = record.get("static") or {}
    try:
        target = get_target(str(record.get("target")))
    except UnknownTargetError:
        return None
    shared, registers = static.get("shared_bytes"), static.get("registers")
    if shared is not None and shared > target.shared_bytes_per_block:
        return f"{shared} bytes of shared memory/LDS per CTA, above the limit of {target.shared_bytes_per_block}"
    if registers is not None and registers > target.max_registers_per_thread:
        return f"{registers} registers per thread, above the limit of {target.max_registers_per_thread}"
    warps = static.get("num_warps")
    if registers and warps and target.register_file_unit == "SM":
        needed = registers * warps * target.warp_size
        if needed > target.register_file:
            return (f"{registers} registers x {warps * target.warp_size} threads = {needed} per CTA, above the "
                    f"register file of {target.register_file}")
    return None


def estimated_tflops(record: dict) -> float | None:
    """The static objective of a record: useful TFLOP/s over the estimated kernel time (a static estimate); over
    a run's several objective shapes, their weighted geometric mean."""
    objective = record.get("objective") or {}
    if objective.get("geomean_estimated_tflops") is not None:
        return objective["geomean_estimated_tflops"]
    return (record.get("static") or {}).get("estimated_tflops")


def shape_class_note(candidate: dict, incumbent: dict) -> str | None:
    """A sentence when the candidate's SHAPE_MULTIPLE differs from the incumbent's (it may narrow the shapes the
    kernel supports; the run's own shapes still fit, or the static stage would have refused it)."""
    new = (candidate.get("spec") or {}).get("shape_multiple")
    old = (incumbent.get("spec") or {}).get("shape_multiple")
    if not new or not old or new == old:
        return None
    narrower = all(n % o == 0 for n, o in zip(new, old))
    what = "narrows" if narrower else "changes"
    return f"{what} SHAPE_MULTIPLE {tuple(old)} -> {tuple(new)}; every shape of the run still fits"


def with_shape_note(judgement: Judgement, candidate: dict, incumbent: dict) -> Judgement:
    note = shape_class_note(candidate, incumbent)
    if not note or not judgement.passed:
        return judgement
    return Judgement(judgement.passed, f"{judgement.reason}; {note}", judgement.score, judgement.screened_out,
                     judgement.comparison)


def static_score(record: dict) -> tuple[float, ...]:
    """Ranks passing candidates of one step: the estimate, then fewer hot-loop spills, then fewer spills."""
    f = figures(record)
    return (estimated_tflops(record) or 0.0, -float(f.hot_loop_spills or 0), -float(f.spills or 0))


def objective_statics(record: dict) -> tuple[list[dict], list[float]]:
    """The static sections at each objective shape of a record (the first is `static`) and their weights."""
    objective = record.get("objective") or {}
    statics = [record.get("static") or {}] + list(objective.get("extra_static") or [])
    return statics, list(objective.get("weights") or [1.0])[:len(statics)]


def compiled_digest(record: dict) -> str | None:
    """The compiled kernels' identity over every objective shape of the run (compiler output): two candidates
    with the same digest run the same machine code at every shape the run times, so one evaluation serves both."""
    statics, _ = objective_statics(record)
    digests = [s.get("compiled_sha256") for s in statics]
    if not all(digests):
        return None
    if len(digests) == 1:
        return digests[0]
    return hashlib.sha256("+".join(digests).encode()).hexdigest()


def objective_speedup(candidate: dict, incumbent: dict) -> StaticSpeedup:
    """The static ratio over the run's objective shapes: each shape's `static_speedup`, combined by the
    objective's weighted geometric mean (point and both bounds: the model's error is taken as the same at
    every shape, so the bounds combine like the point)."""
    cand, weights = objective_statics(candidate)
    inc, _ = objective_statics(incumbent)
    if len(cand) != len(inc) or len(cand) == 1:
        return static_speedup(cand[0], inc[0])
    per_shape = [static_speedup(c, i) for c, i in zip(cand, inc)]
    unvalidated = tuple(dict.fromkeys(m for s in per_shape for m in s.unvalidated))
    return StaticSpeedup(*(weighted_geomean([getattr(s, f) for s in per_shape], weights)
                           for f in ("point", "low", "high")), unvalidated,
                         f"weighted geometric mean over {len(per_shape)} objective shapes of: {per_shape[0].basis}",
                         next((s.memory_bound for s in per_shape if s.memory_bound), ""))


def judge_static(candidate: dict, incumbent: dict, min_gain: float = 0.01) -> Judgement:
    """Accept only when the lower bound of the estimated candidate/incumbent ratio, with the target's ratio error
    (evaluator.static_error), clears 1 + min_gain; a gain that involves a mechanism not validated on the target
    says so in the reason."""
    if estimated_tflops(candidate) is None:
        return Judgement(False, "no static estimate: the analysis found no K loop with matrix instructions",
                         static_score(candidate), True)
    new = static_score(candidate)
    est_new, est_old = new[0], estimated_tflops(incumbent) or 0.0
    detail = f"(hot-loop efficiency {figures(candidate).efficiency_estimate}; static estimate)"
    if est_old <= 0 or est_new <= 0:
        return Judgement(False, f"estimated {est_new:.1f} TFLOP/s not above incumbent {est_old:.1f}: no ratio "
                                f"to judge {detail}", new, False)
    speedup = objective_speedup(candidate, incumbent)
    interval = (f"estimated ratio {speedup.point:.4f}, model interval [{speedup.low:.4f}, {speedup.high:.4f}]"
                + (f" (a memory-bound shape: the error of the {speedup.memory_bound})" if speedup.memory_bound else ""))
    label = (f"; UNVALIDATED on {candidate.get('target') or 'this target'}: the gain involves "
             f"{', '.join(speedup.unvalidated)}" if speedup.unvalidated else "")
    if speedup.low > 1.0 + min_gain:
        return Judgement(True, f"estimated {est_new:.1f} TFLOP/s > incumbent {est_old:.1f}: {interval} clears "
                               f"1 + {min_gain}{label} {detail}", new, False)
    return Judgement(False, f"estimated {est_new:.1f} TFLOP/s not above incumbent {est_old:.1f} by the model's error: "
                            f"{interval} does not clear 1 + {min_gain}{label} {detail}", new, False)


def judge_measured(candidate: dict, comparison: dict, min_gain: float) -> Judgement:
    runtime = candidate.get("runtime") or {}
    if runtime.get("correct") is not True:
        return Judgement(False, f"incorrect results (measured): {runtime.get('verdict')}",
                         (0.0,), True, comparison)
    if comparison.get("candidate_correct") is False:
        return Judgement(False, f"incorrect results during timing (measured): {comparison.get('candidate_verdict')}",
                         (0.0,), True, comparison)
    if comparison.get("error"):
        return Judgement(False, f"interleaved timing failed: {comparison['error']}: {comparison.get('message')}",
                         (0.0,), True, comparison)
    low, speedup = comparison.get("ci_low"), comparison.get("speedup")
    score = (float(speedup or 0.0), float(low or 0.0))
    timing = comparison.get("timing") or "eager"
    detail = (f"speedup {speedup:.4f}x, 95% CI [{low:.4f}, {comparison.get('ci_high'):.4f}] "
              f"({timing} timing decided; {comparison.get('method')}, measured)")
    if comparison.get("launch_bound"):
        detail += f" [{comparison.get('launch_note') or 'launch-bound'}]"
    if comparison.get("accepted") and low is not None and low > 1.0 + min_gain:
        return Judgement(True, f"{detail} clears 1 + {min_gain}", score, False, comparison)
    return Judgement(False, f"{detail} does not clear 1 + {min_gain}", score, False, comparison)
