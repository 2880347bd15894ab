"""From one hot-loop iteration to a whole kernel: the work-normalised static objective `estimated_tflops`.

Target-neutral arithmetic over what the target's model measured off the compiled code:

* the hot loop of one instruction stream (a wave, a warpgroup): its steady-state iteration time, the cycles it
  keeps the matrix pipe busy and the cycles it spends issuing;
* how many such streams of one CTA share one matrix pipe (w), and how many CTAs a CU/SM holds at once (R:
  registers, LDS/shared memory, wave/warp slots, the grid). Streams share what they use (`shared_iteration`):
  - the w streams of one CTA meet at every barrier, so they hide each other's stalls only inside a
    barrier-delimited segment: one CTA's iteration is the sum over segments of max(segment, w matrix, w issue);
  - independent CTAs overlap freely until something shared is full: the matrix pipe (n M_iter), the issue
    port with its VALU work and accumulator moves (n I_iter), for n = R w; the LDS of the CU (every wave's LDS
    traffic against the CU's LDS bandwidth), the operand feed into the CU/SM (operand bytes of every
    resident CTA against the bandwidth, see docs/static-model.md) and the level that serves register spills
    (evaluator.local_memory: every resident CTA's spill traffic against that level's bandwidth; from L2 on it
    also crosses the operand feed);
* the clock: a function of the matrix-unit utilisation the estimate implies (evaluator.clock), so a
  fully busy loop runs at the clock such loads are measured at, never above the peak at that clock;
* the work (evaluator.work): K advanced per iteration, so iterations per tile = ceil(K / k_per_iteration);
  tiles per CU/SM from the grid (one tile per CTA) or, for a persistent kernel, from the useful tile area;
* per-tile overheads the target estimates: the load latency a tile's first iteration waits for when nothing
  prefetched it, and the epilogue after the K loop.

estimated_tflops = 2 M N K of the evaluated shape / estimated kernel time at that clock. Work that does
not produce output (a repeated accumulation chain, tiles past the problem) costs time but adds no useful
FLOPs, so it can only lower the figure; `useful_fraction` reports the share of issued matrix FLOPs that is useful.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from .clock import ClockModel, datasheet_clock
from .local_memory import SpillPlacement
from .targets.loop_estimate import Segment
from .work import MatrixWork


@dataclass(frozen=True)
class Residency:
    """CTAs (workgroups) one CU/SM holds at once, and what limits it."""

    ctas_per_unit: int
    limits: dict[str, int]            # limit name -> CTAs that limit alone allows

    @property
    def limited_by(self) -> list[str]:
        return sorted(name for name, value in self.limits.items() if value == self.ctas_per_unit)


@dataclass(frozen=True)
class StreamLoop:
    """The hot loop of one instruction stream, per iteration, in cycles."""

    iteration_cycles: float           # steady state, the stream alone on its pipe
    matrix_cycles: float              # matrix pipe busy
    issue_cycles: float               # spent issuing (the rest of the iteration is stalls)
    segments: tuple[Segment, ...] = ()   # barrier-delimited parts of the iteration (none: not recorded)
    lds_cycles: float = 0.0           # LDS pipe busy for this stream at one wave's LDS rate


@dataclass(frozen=True)
class TileOverheads:
    """Cycles a tile spends outside its K loop, as the target's model sees them."""

    first_load_latency: float         # exposed before the first iteration when nothing prefetched the tile
    prefetched_across_tiles: bool     # a producer (or the K loop itself) already loads the next tile
    epilogue_cycles: float            # after the K loop: drain, convert, store


@dataclass(frozen=True)
class ThroughputEstimate:
    estimated_tflops: float
    estimated_seconds: float
    useful_fraction: float
    useful_flops: float
    issued_flops: float
    tiles: int
    iterations_per_tile: int
    tiles_per_unit: int               # on the busiest CU/SM
    waves: int                        # rounds of resident CTAs on the busiest CU/SM
    resident_ctas: int
    resident_limited_by: list[str]    # the residency limits that bind, or ["grid"] when the launch is smaller
    streams_per_pipe: int
    shared_iteration_cycles: float    # one iteration of every resident stream together
    shared_bound: str                 # which term sets it (`SharedIteration.bound`)
    tile_cycles: float
    total_cycles: float
    matrix_utilisation: float         # share of the kernel's cycles the matrix pipe is busy (issued work)
    clock_ghz: float                  # the clock model's value at that utilisation
    datasheet_clock_ghz: float
    share_of_datasheet_peak: float    # estimated_tflops over the datasheet peak (at the datasheet clock)
    clock_source: str                 # where the clock model comes from

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("estimated_tflops", "useful_fraction", "matrix_utilisation", "clock_ghz",
                    "share_of_datasheet_peak"):
            out[key] = round(out[key], 4)
        for key in ("estimated_seconds",):
            out[key] = float(f"{out[key]:.4g}")
        for key in ("shared_iteration_cycles", "tile_cycles", "total_cycles", "useful_flops", "issued_flops"):
            out[key] = round(out[key], 1)
        return {"kind": "static_estimate", **out}


@dataclass(frozen=True)
class Sharing:
    """What the resident streams of a CU/SM share, besides the matrix pipe and the issue port."""

    operand_bytes: float = 0.0            # per CTA per iteration, into the CU/SM
    operand_bytes_per_cycle: float | None = None   # the CU/SM's operand feed; None: not modelled
    waves_per_cta: int = 1                # every wave of one CTA, over all SIMDs (their LDS traffic adds up)
    lds_share: float = 0.0                # one wave's LDS rate over the CU's LDS bandwidth; 0: not modelled
    spill_bytes: float = 0.0              # per CTA per iteration, spill stores and reloads (local memory)
    spills: SpillPlacement | None = None  # the level that serves them

    def feed_bytes(self) -> float:
        """Bytes one CTA moves through the operand feed per iteration: its operands, and its spills when they
        are served from beyond the CU/SM's own cache."""
        through = self.spills is not None and self.spills.through_operand_feed
        return self.operand_bytes + (self.spill_bytes if through else 0.0)

    def spill_level_cycles(self) -> float:
        """Cycles one CTA's spill traffic keeps the serving level busy per iteration (0: not modelled)."""
        rate = self.spills.bytes_per_cycle if self.spills is not None else None
        return self.spill_bytes / rate if rate else 0.0


@dataclass(frozen=True)
class SharedIteration:
    cycles: float
    bound: str        # "own_latency", "barriers", "matrix_pipe", "issue", "lds", "operand_feed", "spills"


def one_cta_iteration(loop: StreamLoop, streams: int) -> float:
    """One iteration of the `streams` streams of one CTA on one pipe: they meet at every barrier, so inside each
    barrier-delimited segment they overlap (its length, or the pipe, or the issue port, whichever is longest)
    and no stall hides across a barrier."""
    if streams <= 1:
        return loop.iteration_cycles
    if not loop.segments:
        return max(loop.iteration_cycles, streams * loop.matrix_cycles, streams * loop.issue_cycles)
    return sum(max(seg.cycles, streams * seg.matrix, streams * seg.issue) for seg in loop.segments)


def shared_iteration(loop: StreamLoop, streams: int, ctas: int = 1, sharing: Sharing = Sharing()) -> SharedIteration:
    """One iteration of `ctas` resident CTAs of `streams` streams each per pipe: the longest of one CTA's own
    iteration (barriers included), the shared matrix pipe, the issue port, the CU's LDS, the operand feed and
    the level serving the spills."""
    n = ctas * streams
    terms = {
        "own_latency": loop.iteration_cycles,
        "barriers": one_cta_iteration(loop, streams),
        "matrix_pipe": n * loop.matrix_cycles,
        "issue": n * loop.issue_cycles,
        "lds": ctas * sharing.waves_per_cta * loop.lds_cycles * sharing.lds_share,
        "operand_feed": ctas * sharing.feed_bytes() / sharing.operand_bytes_per_cycle
        if sharing.operand_bytes_per_cycle else 0.0,
        "spills": ctas * sharing.spill_level_cycles(),
    }
    bound = max(terms, key=terms.get)
    return SharedIteration(terms[bound], bound)


def estimate_throughput(shape: tuple[int, int, int], grid_ctas: int, units: int, clock_ghz: float,
                        work: MatrixWork, loop: StreamLoop, streams_per_cta: int, residency: Residency,
                        overheads: TileOverheads, operand_bytes_per_cycle: float | None = None,
                        clock: ClockModel | None = None, sharing: Sharing | None = None) -> ThroughputEstimate:
    """Estimated kernel time and useful TFLOP/s of a GEMM of `shape` (see the module docstring); `clock_ghz` is
    the datasheet clock, `clock` the load-dependent model (None: the datasheet clock at every load)."""
    clock = clock or datasheet_clock(clock_ghz)
    sharing = sharing or Sharing(operand_bytes=work.operand_bytes_per_iteration,
                                 operand_bytes_per_cycle=operand_bytes_per_cycle)
    m, n, k = shape
    useful_flops = 2.0 * m * n * k
    iterations = max(1, math.ceil(k / max(1, work.k_per_iteration)))
    if work.persistent:
        tiles = max(1, math.ceil(m * n / max(1, work.useful_area)))
        ctas = max(1, min(grid_ctas, tiles))
        tiles_per_cta = math.ceil(tiles / ctas)
    else:
        tiles = ctas = max(1, grid_ctas)
        tiles_per_cta = 1
    issued_flops = float(tiles) * iterations * work.flops_per_iteration
    useful_fraction = min(1.0, useful_flops / issued_flops) if issued_flops else 0.0

    ctas_per_unit = math.ceil(ctas / units)                     # on the busiest CU/SM
    resident = max(1, min(residency.ctas_per_unit, ctas_per_unit))
    waves = math.ceil(ctas_per_unit / resident)
    per_tile_latency = 0.0 if overheads.prefetched_across_tiles and work.persistent else overheads.first_load_latency
    total = busy = 0.0
    remaining = ctas_per_unit
    for _ in range(waves):  # the last round may hold fewer CTAs, which then share the pipe with fewer
        together = min(resident, remaining)
        remaining -= together
        iteration = shared_iteration(loop, streams_per_cta, together, sharing).cycles
        total += tiles_per_cta * (per_tile_latency + iterations * iteration + overheads.epilogue_cycles)
        busy += tiles_per_cta * iterations * together * streams_per_cta * loop.matrix_cycles
    if work.persistent and overheads.prefetched_across_tiles:
        total += overheads.first_load_latency                    # only the CTA's first tile waits for its loads
    utilisation = min(1.0, busy / total) if total else 0.0
    ghz = clock.at(utilisation)
    seconds = total / (ghz * 1e9)
    full = shared_iteration(loop, streams_per_cta, resident, sharing)
    tflops = useful_flops / seconds / 1e12 if seconds else 0.0
    return ThroughputEstimate(
        estimated_tflops=tflops, estimated_seconds=seconds,
        useful_fraction=useful_fraction, useful_flops=useful_flops, issued_flops=issued_flops, tiles=tiles,
        iterations_per_tile=iterations, tiles_per_unit=tiles_per_cta * ctas_per_unit, waves=waves,
        resident_ctas=resident,
        resident_limited_by=residency.limited_by if resident == residency.ctas_per_unit else ["grid"],
        streams_per_pipe=resident * streams_per_cta,
        shared_iteration_cycles=full.cycles, shared_bound=full.bound,
        tile_cycles=per_tile_latency + iterations * full.cycles + overheads.epilogue_cycles, total_cycles=total,
        matrix_utilisation=utilisation, clock_ghz=ghz, datasheet_clock_ghz=clock_ghz,
        # the matrix tables run at the datasheet peak per cycle: useful share of the pipe, at this clock
        share_of_datasheet_peak=utilisation * useful_fraction * ghz / clock_ghz, clock_source=clock.source)


@dataclass(frozen=True)
class ModelInputs:
    """What a target's static analysis hands over for the kernel-level estimate (JSON-ready via to_dict)."""

    work: MatrixWork
    loop: StreamLoop
    streams_per_cta: int
    residency: Residency
    overheads: TileOverheads
    operand_bytes_per_cycle: float | None     # into one CU/SM; None: not modelled
    lds_share: float = 0.0                    # one wave's LDS rate over the CU's LDS bandwidth; 0: not modelled
    spill_bytes_per_iteration: float = 0.0    # per CTA: the hot loop's spill stores and reloads
    spills: SpillPlacement | None = None      # where they are served from (evaluator.local_memory)

    def to_dict(self) -> dict:
        return {"work": self.work.to_dict(), "loop": asdict(self.loop), "streams_per_cta": self.streams_per_cta,
                "residency": {**asdict(self.residency), "limited_by": self.residency.limited_by},
                "overheads": asdict(self.overheads), "operand_bytes_per_cycle": self.operand_bytes_per_cycle,
                "lds_share": self.lds_share, "spill_bytes_per_iteration": self.spill_bytes_per_iteration,
                "spills": self.spills.to_dict() if self.spills else None}

    @property
    def sharing(self) -> Sharing:
        return Sharing(self.work.operand_bytes_per_iteration, self.operand_bytes_per_cycle,
                       max(1, self.work.consumer_warps), self.lds_share, self.spill_bytes_per_iteration, self.spills)

    @classmethod
    def for_loop(cls, work: MatrixWork, estimate, residency: Residency, simds_per_cu: int,
                 operand_bytes_per_cycle: float | None, first_load_latency: float, loads_after_loop: bool,
                 epilogue_cycles: float, lds_share: float = 0.0, spill_bytes_per_iteration: float = 0.0,
                 spills: SpillPlacement | None = None) -> ModelInputs:
        """The inputs from a target's hot-loop estimate (`iteration_cycles`, `matrix_cycles`, `stall_cycles`):
        consumer warps spread over the CU/SM's SIMDs; a tile is prefetched across tiles by a producer, or by a
        persistent kernel that loads nothing after its K loop."""
        stalls = sum(estimate.stall_cycles.values())
        return cls(
            work=work,
            loop=StreamLoop(estimate.iteration_cycles, estimate.matrix_cycles,
                            max(0.0, estimate.iteration_cycles - stalls), tuple(estimate.segments),
                            estimate.lds_cycles),
            streams_per_cta=max(1, math.ceil(work.consumer_warps / simds_per_cu)),
            residency=residency,
            operand_bytes_per_cycle=operand_bytes_per_cycle,
            overheads=TileOverheads(first_load_latency,
                                    work.warp_specialized or (work.persistent and not loads_after_loop),
                                    epilogue_cycles),
            lds_share=lds_share, spill_bytes_per_iteration=spill_bytes_per_iteration, spills=spills)

    @classmethod
    def from_dict(cls, data: dict) -> ModelInputs:
        work = {k: v for k, v in data["work"].items() if k != "useful_area"}
        residency = {k: v for k, v in data["residency"].items() if k != "limited_by"}
        stream = dict(data["loop"])
        segments = tuple(Segment(**seg) for seg in stream.pop("segments", None) or ())
        return cls(MatrixWork(**work), StreamLoop(**stream, segments=segments), data["streams_per_cta"],
                   Residency(**residency),
                   TileOverheads(**data["overheads"]), data.get("operand_bytes_per_cycle"),
                   data.get("lds_share") or 0.0, data.get("spill_bytes_per_iteration") or 0.0,
                   SpillPlacement.from_dict(data["spills"]) if data.get("spills") else None)


def kernel_estimate(inputs: ModelInputs, shape: tuple[int, int, int], grid: tuple[int, ...], units: int,
                    clock_ghz: float, clock: ClockModel | None = None) -> ThroughputEstimate:
    """`estimate_throughput` for a compiled kernel launched on `grid` for a GEMM of `shape`; `clock_ghz` is the
    datasheet clock, `clock` the target's load-dependent clock model."""
    return estimate_throughput(shape, math.prod(grid), units, clock_ghz, inputs.work, inputs.loop,
                               inputs.streams_per_cta, inputs.residency, inputs.overheads,
                               inputs.operand_bytes_per_cycle, clock, inputs.sharing)
