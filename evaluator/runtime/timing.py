"""How fast is the candidate, against the vendor library, measured so the number can be trusted.

Method (named in every result as `timing_method`):
- several input sets rotate, together larger than twice the last-level cache, so no call finds its
  operands cached by the previous one (the cache size is `Target.last_level_cache_bytes`, or what the
  device reports if that is larger);
- warm-up calls first (JIT compilation, module load, cuBLAS handle creation stay out of the numbers);
- each call timed alone with a pair of device events on the evaluator's stream, many calls, the median
  reported with its interquartile range and min/max;
- the candidate and the vendor library (torch.matmul on A @ B.T, torch._scaled_mm for fp8) alternate call
  by call in the same process, so clock and thermal drift touch both alike.

`compare_interleaved` does the same for a candidate against an incumbent in A/B rounds and puts a
bootstrap confidence interval on the speedup; accepting needs the interval's low end above 1 + min_gain.
`compare_graphs` is its CUDA-graph twin (each side's calls of a round captured once and replayed), for
kernels so short that the host launch decides a per-call time; `combine_rounds` pools the rounds of several
shapes into one weighted-geometric-mean speedup with one interval.
On a CPU device the same code times with the host clock, which is what the tests use.

Beside the per-call figure (which the accept rule uses, since it is what an eager caller gets), the runtime
reports what the launch path costs: `host_us_per_call` (host time for one launch to return, candidate and
vendor) and the per-call GPU time under CUDA-graph replay (`graph_times`), where no host work remains.
"""
from __future__ import annotations

import math
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass

import torch

MAX_ROTATION_BYTES = 8 * 2 ** 30   # never allocate more than this for rotation
MAX_INPUT_SETS = 16


def gemm_flops(shape) -> int:
    m, n, k = shape
    return 2 * m * n * k


def tflops(shape, ms: float) -> float:
    return gemm_flops(shape) / (ms * 1e-3) / 1e12


def input_set_count(bytes_per_set: int, cache_bytes: int, factor: float = 2.0) -> int:
    """How many input sets to rotate so together they exceed `factor` x the cache (at least 2)."""
    wanted = math.ceil(factor * cache_bytes / max(1, bytes_per_set))
    affordable = max(2, MAX_ROTATION_BYTES // max(1, bytes_per_set))
    return int(max(2, min(wanted, affordable, MAX_INPUT_SETS)))


@dataclass(frozen=True)
class Summary:
    """Robust summary of one series of per-call times, in milliseconds."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    min_ms: float
    max_ms: float
    samples: int

    @property
    def iqr_ms(self) -> float:
        return self.q3_ms - self.q1_ms

    def to_dict(self) -> dict:
        d = asdict(self)
        d["iqr_ms"] = self.iqr_ms
        return d


def summarize(times_ms: list[float]) -> Summary:
    if not times_ms:
        raise ValueError("no timings to summarize")
    ordered = sorted(times_ms)
    if len(ordered) >= 2:
        q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
    else:
        q1 = q3 = ordered[0]
    return Summary(median_ms=statistics.median(ordered), q1_ms=q1, q3_ms=q3, min_ms=ordered[0],
                   max_ms=ordered[-1], samples=len(ordered))


# ---------------------------------------------------------------------------------------------
# Timers


# Bound when the evaluator is imported, before any candidate module runs: a candidate that later replaces
# these attributes does not reach the evaluator's timers.
_PERF_COUNTER = time.perf_counter
_CUDA_EVENT = torch.cuda.Event
_CUDA_SYNCHRONIZE = torch.cuda.synchronize


class Timer:
    """Times single calls: device events on the current stream for a GPU, the host clock for the CPU.

    Events are recorded on the stream the evaluator launches on; work a candidate hides on another
    stream is not inside them, which `defenses.untimed_work_check` catches by comparing with wall time.
    """

    def __init__(self, device):
        self.device = torch.device(device)
        self.is_gpu = self.device.type == "cuda"
        self._perf_counter = _PERF_COUNTER
        self._event = _CUDA_EVENT
        self._sync = _CUDA_SYNCHRONIZE

    def synchronize(self) -> None:
        if self.is_gpu:
            self._sync(self.device)

    def now(self) -> float:
        return self._perf_counter()

    def start(self):
        if self.is_gpu:
            start, end = self._event(enable_timing=True), self._event(enable_timing=True)
            start.record()
            return (start, end)
        return [self._perf_counter(), None]

    def stop(self, token) -> None:
        if self.is_gpu:
            token[1].record()
        else:
            token[1] = self._perf_counter()

    def elapsed_ms(self, token) -> float:
        """Milliseconds of a started and stopped token; call after `synchronize`."""
        if self.is_gpu:
            return float(token[0].elapsed_time(token[1]))
        return (token[1] - token[0]) * 1e3


def time_calls(timer: Timer, calls: dict[str, Callable[[int], object]], reps: int,
               warmup: int = 3) -> dict[str, list[float]]:
    """Per-call times of each callable, interleaved call by call. `calls[name](i)` runs call number i."""
    for i in range(warmup):
        for call in calls.values():
            call(i)
    timer.synchronize()
    tokens: dict[str, list] = {name: [] for name in calls}
    for i in range(reps):
        names = list(calls) if i % 2 == 0 else list(reversed(calls))  # neither side always goes first
        for name in names:
            token = timer.start()
            calls[name](i)
            timer.stop(token)
            tokens[name].append(token)
    timer.synchronize()
    return {name: [timer.elapsed_ms(t) for t in toks] for name, toks in tokens.items()}


def reps_for_budget(timer: Timer, call: Callable[[int], object], budget_s: float, lo: int = 20, hi: int = 400) -> int:
    """Number of repetitions that fit `budget_s`, from a short probe of the call's time."""
    timer.synchronize()
    start = timer.now()
    for i in range(3):
        call(i)
    timer.synchronize()
    per_call = max((timer.now() - start) / 3, 1e-6)
    return int(max(lo, min(hi, budget_s / per_call)))


# ---------------------------------------------------------------------------------------------
# Launch cost: host time per call, and the GPU time alone under CUDA-graph replay


def host_us_per_call(timer: Timer, call: Callable[[int], object], calls: int = 50) -> float:
    """Host microseconds one `call(i)` takes to return, averaged over `calls` back-to-back calls.

    The device is idle at the start and nothing waits for it in between, so this is what the caller's
    thread spends in the launch path (argument handling, descriptors, the driver's launch), not GPU time.
    """
    timer.synchronize()
    start = timer.now()
    for i in range(calls):
        call(i)
    host_s = timer.now() - start
    timer.synchronize()
    return host_s / calls * 1e6


def graph_times(calls: dict[str, Callable[[int], object]], device, per_graph: int, replays: int) -> dict:
    """Per-call milliseconds of each callable under CUDA-graph replay, the sides interleaved replay by replay.

    Each side's `per_graph` calls (input sets 0..per_graph-1 in turn) are captured into one graph; each replay
    is timed alone with device events and divided by `per_graph`. Host launch cost is gone from these numbers:
    they are the GPU time a caller gets when it replays graphs. A side whose capture fails maps to its error
    text (str) instead of a `Summary`.
    """
    graphs: dict[str, object] = {}
    errors: dict[str, str] = {}
    stream = torch.cuda.Stream(device)
    for name, call in calls.items():
        graph = torch.cuda.CUDAGraph()
        try:
            with torch.cuda.graph(graph, stream=stream):
                for i in range(per_graph):
                    call(i)
            graphs[name] = graph
        except Exception as exc:  # noqa: BLE001 - a launch path that cannot be captured is reported, not fatal
            errors[name] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[-1] if str(exc).strip() else ''}"
    timer = Timer(device)
    for graph in graphs.values():
        graph.replay()  # warm-up replay (first replay uploads the graph)
    timer.synchronize()
    tokens: dict[str, list] = {name: [] for name in graphs}
    for r in range(replays):
        names = list(graphs) if r % 2 == 0 else list(reversed(graphs))
        for name in names:
            token = timer.start()
            graphs[name].replay()
            timer.stop(token)
            tokens[name].append(token)
    timer.synchronize()
    result: dict[str, Summary | str] = dict(errors)
    for name, toks in tokens.items():
        result[name] = summarize([timer.elapsed_ms(t) / per_graph for t in toks])
    return result


# ---------------------------------------------------------------------------------------------
# Vendor library


def vendor_call(spec, args: dict[str, torch.Tensor]) -> tuple[Callable[[], object] | None, str]:
    """The vendor library's GEMM on the same operands, and its name; (None, why) when there is none."""
    if spec.scales == "e8m0_k32":
        return None, "no vendor MXFP4 GEMM is wired in (torch._scaled_mm's MX path needs swizzled scales)"
    a, b = args["a"], args["b"]
    out_dtype = args["c"].dtype
    if spec.dtype.startswith("float8"):
        one = torch.ones((), dtype=torch.float32, device=a.device)
        sa = args.get("a_scale", one).reshape(())
        sb = args.get("b_scale", one).reshape(())

        fast = spec.fast_accum  # the vendor accumulates the way the candidate declares it does (FAST_ACCUM)

        def scaled():
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=out_dtype, use_fast_accum=fast)
        return scaled, f"torch._scaled_mm (use_fast_accum={fast})"
    if out_dtype == a.dtype:
        out = torch.empty_like(args["c"])

        def mm_out():
            return torch.matmul(a, b.t(), out=out)
        return mm_out, "torch.matmul"

    def mm():
        return torch.matmul(a, b.t()).to(out_dtype)
    return mm, "torch.matmul"


# ---------------------------------------------------------------------------------------------
# Candidate vs incumbent


def bootstrap_speedup(cand_ms: list[float], inc_ms: list[float], confidence: float = 0.95,
                      resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Speedup of candidate over incumbent (>1: candidate faster) with a paired bootstrap interval.

    `cand_ms[r]` and `inc_ms[r]` are round r's times. The statistic is the geometric mean of the per-round
    ratios inc/cand, so a round of drift hits both sides of its ratio; the interval is the wider of the
    percentile interval of that statistic over rounds resampled with replacement (seeded: the same samples
    always give the same interval) and the Student-t interval of the mean log-ratio.
    """
    return combine_rounds([(cand_ms, inc_ms)], [1.0], confidence=confidence, resamples=resamples, seed=seed)


def compare_interleaved(cand_launch: Callable[[int], object], inc_launch: Callable[[int], object], device,
                        rounds: int = 20, calls_per_round: int = 10, warmup: int = 3, min_gain: float = 0.0,
                        confidence: float = 0.95, seed: int = 0) -> dict:
    """A/B rounds of candidate and incumbent; speedup with a bootstrap interval; accept on its low end.

    Each round times `calls_per_round` calls of each (alternating which goes first) and keeps each side's
    median; rounds are the bootstrap's units. `accepted` is `ci_low > 1 + min_gain`.
    """
    timer = Timer(device)
    cand_rounds: list[float] = []
    inc_rounds: list[float] = []
    for i in range(warmup):
        cand_launch(i)
        inc_launch(i)
    for r in range(rounds):
        offset = r * calls_per_round
        order = [("candidate", cand_launch), ("incumbent", inc_launch)]
        if r % 2:
            order.reverse()
        got: dict[str, list] = {}
        for name, launch in order:
            toks = []
            for i in range(calls_per_round):
                token = timer.start()
                launch(offset + i)
                timer.stop(token)
                toks.append(token)
            got[name] = toks
        timer.synchronize()
        cand_rounds.append(statistics.median(timer.elapsed_ms(t) for t in got["candidate"]))
        inc_rounds.append(statistics.median(timer.elapsed_ms(t) for t in got["incumbent"]))
    speedup, low, high = bootstrap_speedup(cand_rounds, inc_rounds, confidence=confidence, seed=seed)
    return {"speedup": speedup, "ci_low": low, "ci_high": high, "confidence": confidence,
            "accepted": low > 1 + min_gain, "min_gain": min_gain,
            "method": (f"interleaved A/B: {rounds} rounds x {calls_per_round} calls each side, per-round medians "
                       f"({'device events' if timer.is_gpu else 'host clock'}), geometric-mean speedup, "
                       f"paired bootstrap {int(confidence * 100)}% interval"),
            "samples": {"candidate_ms": cand_rounds, "incumbent_ms": inc_rounds}}


def capture_graph(launch: Callable[[int], object], device, calls: int):
    """One CUDA graph of `calls` launches (inputs 0..calls-1), after warm-up launches outside the capture."""
    for i in range(3):  # compiles, descriptor caches, allocator pools: not inside the graph
        launch(i)
    torch.cuda.synchronize(device)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=torch.cuda.Stream(device)):
        for i in range(calls):
            launch(i)
    return graph


def compare_graphs(cand_graph, inc_graph, calls_per_graph: int, device, rounds: int = 20, min_gain: float = 0.0,
                   confidence: float = 0.95, seed: int = 0) -> dict:
    """A/B rounds under CUDA-graph replay (graphs from `capture_graph`): a round replays each side's graph once
    (alternating which goes first), timed with device events and divided by its calls. No host work is
    inside the timed replays, on either side."""
    timer = Timer(device)
    graphs = {"candidate": cand_graph, "incumbent": inc_graph}
    for graph in graphs.values():
        graph.replay()  # the first replay uploads the graph
    timer.synchronize()
    cand_rounds: list[float] = []
    inc_rounds: list[float] = []
    for r in range(rounds):
        order = ["candidate", "incumbent"] if r % 2 == 0 else ["incumbent", "candidate"]
        got = {}
        for name in order:
            token = timer.start()
            graphs[name].replay()
            timer.stop(token)
            got[name] = token
        timer.synchronize()
        cand_rounds.append(timer.elapsed_ms(got["candidate"]) / calls_per_graph)
        inc_rounds.append(timer.elapsed_ms(got["incumbent"]) / calls_per_graph)
    speedup, low, high = bootstrap_speedup(cand_rounds, inc_rounds, confidence=confidence, seed=seed)
    return {"speedup": speedup, "ci_low": low, "ci_high": high, "confidence": confidence,
            "accepted": low > 1 + min_gain, "min_gain": min_gain,
            "method": (f"interleaved A/B under CUDA-graph replay: {rounds} rounds, each side's {calls_per_graph} "
                       f"calls captured once and replayed per round (device events per replay / calls), "
                       f"geometric-mean speedup, paired bootstrap {int(confidence * 100)}% interval"),
            "samples": {"candidate_ms": cand_rounds, "incumbent_ms": inc_rounds}}


def combine_rounds(per_shape: list[tuple[list[float], list[float]]], weights: list[float],
                   confidence: float = 0.95, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Weighted geometric mean over shapes of the per-shape paired speedups, with one interval (one shape:
    `bootstrap_speedup`).

    `per_shape[j]` is (candidate round times, incumbent round times) at shape j. Each resample draws every
    shape's rounds with replacement, within that shape, and combines the shapes' mean log-ratios by weight.
    The percentile bootstrap under-covers at 20 rounds (it ignores that the spread itself is estimated); the
    Student-t interval of the same weighted mean log-ratio does not, so the interval is the wider of the two.
    """
    if any(len(cand) != len(inc) or len(cand) < 2 for cand, inc in per_shape):
        raise ValueError("need at least two paired rounds")
    logs = [[math.log(i / c) for c, i in zip(cand, inc)] for cand, inc in per_shape]
    total = sum(weights)

    def statistic(samples: list[list[float]]) -> float:
        return math.exp(sum(w * sum(x) / len(x) for x, w in zip(samples, weights)) / total)

    point = statistic(logs)
    rng = random.Random(seed)
    stats = sorted(statistic([[row[rng.randrange(len(row))] for _ in row] for row in logs])
                   for _ in range(resamples))
    alpha = (1 - confidence) / 2
    low = stats[max(0, math.floor(alpha * resamples))]
    high = stats[min(resamples - 1, math.ceil((1 - alpha) * resamples) - 1)]
    t_low, t_high = _t_interval(logs, weights, confidence)
    return point, min(low, t_low), max(high, t_high)


def _t_interval(logs: list[list[float]], weights: list[float], confidence: float) -> tuple[float, float]:
    """exp(mean +- t * se) of the weighted mean of each shape's mean log-ratio (se from each shape's rounds), t
    from the normal quantile with the usual 1/df correction on the fewest rounds."""
    from statistics import NormalDist, fmean, stdev

    total = sum(weights)
    mean = sum(w * fmean(x) for x, w in zip(logs, weights)) / total
    se = math.sqrt(sum((w / total) ** 2 * stdev(x) ** 2 / len(x) for x, w in zip(logs, weights)))
    z = NormalDist().inv_cdf(1 - (1 - confidence) / 2)
    t = z * (1 + (1 + z * z) / (4 * (min(len(x) for x in logs) - 1)))   # within 0.5% of Student's t for n >= 10
    return math.exp(mean - t * se), math.exp(mean + t * se)
