"""The climb of a run: how far each step took the kernel, from figures that can be compared with each other.

Absolute TFLOP/s from separate timings drift by several percent between calls, so a plot of them can show an
accepted step going down. The climb uses only ratios from interleaved comparisons instead: each candidate's
speedup over the incumbent it was judged against (both timed in one session on the same inputs), chained
over the accepted steps into a cumulative speedup over the starting kernel. The cumulative interval combines
the steps' 95% intervals in log space (each side separately), treating the steps' timing errors as independent.

Where each step stands against the vendor library comes from the same session too (the comparison's
`vs_vendor`). Ledgers written before comparisons carried it fall back to the candidate's own runtime record,
which timed it interleaved with the vendor one evaluation earlier, but only when that record timed the same
shape as the comparisons; `vendor_source` says which.

In static mode (no GPU of the target) the ratios are of the static objective, estimated TFLOP/s: static
estimates, never measurements, and every label says so.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass

from .config import RunConfig
from .evaluation import MEASURED, estimated_tflops
from .ledger import MAIN, Entry, Ledger
from .loop import ACCEPTED, BASELINE, RECORD, RUN, STEP

SAME_SESSION = "interleaved in the comparison's session"
RUNTIME_RECORD = "interleaved in the candidate's own runtime evaluation"


@dataclass(frozen=True)
class Ratio:
    """A ratio with its 95% interval (`low == high == value` when it has none, as for static estimates)."""

    value: float
    low: float
    high: float

    def times(self, other: Ratio) -> Ratio:
        """The product of two independent ratios. Each side of the interval combines in log space (the root
        of the summed squares), so an asymmetric bootstrap interval keeps its shape and a ratio without an
        interval passes the other's through unchanged."""
        value = self.value * other.value
        below = math.hypot(*(_log_distance(r.value, r.low) for r in (self, other)))
        above = math.hypot(*(_log_distance(r.high, r.value) for r in (self, other)))
        return Ratio(value, value * math.exp(-below), value * math.exp(above))

    def text(self) -> str:
        if self.low == self.high == self.value:
            return f"{self.value:.3f}x"
        return f"{self.value:.3f}x [{self.low:.3f}, {self.high:.3f}]"


ONE = Ratio(1.0, 1.0, 1.0)


def _log_distance(upper: float, lower: float) -> float:
    if upper <= 0 or lower <= 0:
        return 0.0
    return math.log(upper) - math.log(lower)


@dataclass(frozen=True)
class ClimbPoint:
    """One evaluated candidate (or the starting kernel) placed on the climb."""

    step: int
    candidate: int
    verdict: str
    on_main: bool
    commit: str
    title: str
    speedup: Ratio | None        # over the incumbent it was judged against
    cumulative: Ratio | None     # over the starting kernel: the incumbent's cumulative times `speedup`
    vs_vendor: Ratio | None      # vendor time / this kernel's time (measured mode only)
    vendor_source: str = ""
    timed_shape: tuple[int, ...] | None = None   # the shape its own runtime record timed (its TFLOP/s figure)
    idea: str = ""               # the planned idea it implements, where the ledger names one

    @property
    def label(self) -> str:
        return f"{self.step}.{self.candidate}"


@dataclass(frozen=True)
class Climb:
    """A run's climb and what it was measured on."""

    run_id: str
    target: str
    mode: str                    # "measured" or "static"
    shape: tuple[int, ...] | None
    device: str
    date: str                    # the run's creation date (UTC)
    vendor: str | None           # the vendor library's name, when one was timed
    points: tuple[ClimbPoint, ...]
    problem: str | None = None   # the run's problem in words (its shapes, weights and deciding timing)

    @property
    def measured(self) -> bool:
        return self.mode == MEASURED

    @property
    def accepted(self) -> tuple[ClimbPoint, ...]:
        """The starting kernel and the accepted steps of main's lineage (the run's best kernel), in order."""
        return tuple(p for p in self.points if p.on_main)

    @property
    def other_lineages(self) -> tuple[ClimbPoint, ...]:
        """Accepted kernels off main's lineage (a beam search's other population members)."""
        return tuple(p for p in self.points if not p.on_main and p.verdict == ACCEPTED)

    @property
    def figure(self) -> str:
        """What the climb's numbers are, in words."""
        if self.measured:
            return "speedup over the starting kernel, chained interleaved A/B speedups (measured, 95% CI)"
        return "estimated TFLOP/s over the starting kernel (static estimate, not measured)"

    def point(self, commit: str) -> ClimbPoint | None:
        return next((p for p in self.points if p.commit == commit), None)

    def incumbent_line(self) -> list[tuple[int, float]]:
        """The incumbent's ratio over the starting kernel as a step function, (step, value) corners from step
        0 to the run's last step: flat through the steps that accepted nothing, rising only where a step did."""
        corners: list[tuple[int, float]] = []
        for p in self.accepted:
            if p.cumulative is None:
                continue
            if corners:
                corners.append((p.step, corners[-1][1]))
            corners.append((p.step, p.cumulative.value))
        last = max((p.step for p in self.points), default=0)
        if corners and last > corners[-1][0]:
            corners.append((last, corners[-1][1]))
        return corners


def climb(ledger: Ledger) -> Climb:
    """The climb of the run in `ledger`, read from its commits alone."""
    root = ledger.main_line()[0]
    config = RunConfig.from_json(ledger.read(root.sha, RUN))
    measured = config.mode == MEASURED
    commits = [(entry, _json(ledger, entry.sha, STEP), _json(ledger, entry.sha, RECORD)) for entry in ledger.entries()]
    comparisons = [step.get("comparison") or {} for _, step, _ in commits]
    runtimes = [record.get("runtime") or {} for _, _, record in commits]
    # The climb's shape is the one its comparisons timed; a runtime record timed elsewhere says nothing of it.
    shape = next((tuple(c["shape"]) for c in comparisons if c.get("shape")), None) or \
        next((tuple(r["shape"]) for r in runtimes if r.get("shape")), None) or \
        next((tuple(record["shape"]) for _, _, record in commits if record.get("shape")), None)
    device = next((x["device"] for x in comparisons + runtimes if x.get("device")), None)
    vendor = next(((c.get("vs_vendor") or {}).get("vendor") for c in comparisons
                   if (c.get("vs_vendor") or {}).get("vendor")), None) or \
        next((r["vendor"] for r in runtimes if r.get("vendor") and tuple(r.get("shape") or ()) == shape), None)
    cumulative: dict[str, Ratio] = {}       # accepted commit -> its cumulative ratio over the starting kernel
    estimate: dict[str, float | None] = {}   # commit -> estimated TFLOP/s (the static objective)
    points = []
    for (entry, step, record), comparison, runtime in zip(commits, comparisons, runtimes):
        # by step: every incumbent comes before what was judged against it
        estimate[entry.sha] = estimated_tflops(record)
        incumbent = step.get("incumbent") or entry.parent or ""
        if entry.step == 0:
            speedup, total = ONE, ONE
        else:
            speedup = _measured_speedup(comparison) if measured else _static_speedup(
                estimate[entry.sha], estimate.get(incumbent))
            base = cumulative.get(incumbent)
            total = base.times(speedup) if base is not None and speedup is not None else None
        if entry.verdict in (ACCEPTED, BASELINE) and total is not None:  # any lineage's kernels chain on
            cumulative[entry.sha] = total
        vs_vendor, source = _vs_vendor(comparison, runtime, shape) if measured else (None, "")
        points.append(ClimbPoint(step=entry.step, candidate=entry.candidate, verdict=entry.verdict,
                                 on_main=entry.ref == MAIN, commit=entry.sha, title=_title(entry, step),
                                 idea=_idea(step),
                                 speedup=speedup, cumulative=total, vs_vendor=vs_vendor, vendor_source=source,
                                 timed_shape=tuple(runtime["shape"]) if runtime.get("shape") else None))
    return Climb(run_id=config.run_id, target=config.target, mode=config.mode, shape=shape,
                 device=device or "no GPU (compile-only)", date=config.created_utc[:10], vendor=vendor,
                 points=tuple(points), problem=problem.describe() if (problem := config.run_problem()) else None)


def _json(ledger: Ledger, sha: str, name: str) -> dict:
    data = ledger.read(sha, name)
    return json.loads(data) if data else {}


def _title(entry: Entry, step: dict) -> str:
    return step.get("title") or entry.summary


def _idea(step: dict) -> str:
    """The title of the idea a candidate implements: its proposal names the idea's number in the step's plan
    (agent.ideas), or the step names the idea itself. Ledgers without plans have none."""
    idea = step.get("idea") or (step.get("proposal") or {}).get("idea")
    if isinstance(idea, dict):
        return str(idea.get("title") or "")
    if isinstance(idea, str):
        return idea
    ideas = (step.get("plan") or {}).get("ideas") or step.get("ideas") or []
    if isinstance(idea, int) and not isinstance(idea, bool):
        return next((str(i.get("title") or "") for i in ideas if isinstance(i, dict) and i.get("number") == idea), "")
    return ""


def _measured_speedup(comparison: dict) -> Ratio | None:
    value, low, high = comparison.get("speedup"), comparison.get("ci_low"), comparison.get("ci_high")
    if value is None:
        return None  # screened out before any timing, or the comparison failed
    return Ratio(float(value), float(low if low is not None else value), float(high if high is not None else value))


def _static_speedup(candidate: float | None, incumbent: float | None) -> Ratio | None:
    if not candidate or not incumbent:
        return None
    return Ratio(candidate / incumbent, candidate / incumbent, candidate / incumbent)


def _vs_vendor(comparison: dict, runtime: dict, shape: tuple | None) -> tuple[Ratio | None, str]:
    same = comparison.get("vs_vendor") or {}
    if same.get("ratio") is not None:
        return Ratio(same["ratio"], same.get("ci_low", same["ratio"]), same.get("ci_high", same["ratio"])), \
            SAME_SESSION
    if runtime.get("ratio_vs_vendor") is not None and tuple(runtime.get("shape") or ()) == shape:
        ratio = float(runtime["ratio_vs_vendor"])
        return Ratio(ratio, ratio, ratio), RUNTIME_RECORD
    return None, ""
