"""From one hot-loop iteration to a whole kernel: the work-normalised static objective `estimated_tflops`.

Target-neutral arithmetic over what the target's model measured off the compiled code:

* the hot loop of one instruction stream (a wave, a warpgroup): its steady-state iteration time, the cycles it
  keeps the matrix pipe busy and the cycles it spends issuing;
* how many such streams of one CTA share one matrix pipe, and how many CTAs a CU/SM holds at once
  (registers, LDS/shared memory, wave/warp slots, the grid), so that R resident CTAs hide each other's
  stalls while sharing the pipe: one iteration of all of them takes max(T_iter, n M_iter, n I_iter) for
  n = R x streams per CTA;
* the operand bytes per iteration against the bandwidth into one CU/SM (a fitted figure: see
  docs/static-model.md), shared by the resident CTAs;
* the work (evaluator.work): K advanced per iteration, so iterations per tile = ceil(K / k_per_iteration);
  tiles per CU/SM from the grid (one tile per CTA) or, for a persistent kernel, from the useful tile area;
* per-tile overheads the target estimates: the load latency a tile's first iteration waits for when nothing
  prefetched it, and the epilogue after the K loop.

estimated_tflops = 2 M N K of the evaluated shape / estimated kernel time at the target's clock. Work that does
not produce output (a repeated accumulation chain, tiles past the problem) costs time but adds no useful
FLOPs, so it can only lower the figure; `useful_fraction` reports the share of issued matrix FLOPs that is useful.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

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
    tile_cycles: float
    total_cycles: float
    clock_ghz: float

    def to_dict(self) -> dict:
        out = asdict(self)
        for key in ("estimated_tflops", "useful_fraction"):
            out[key] = round(out[key], 4)
        for key in ("estimated_seconds",):
            out[key] = float(f"{out[key]:.4g}")
        for key in ("shared_iteration_cycles", "tile_cycles", "total_cycles", "useful_flops", "issued_flops"):
            out[key] = round(out[key], 1)
        return {"kind": "static_estimate", **out}


def shared_iteration(loop: StreamLoop, streams: int, ctas: int = 1, operand_bytes: float = 0.0,
                     bytes_per_cycle: float | None = None) -> float:
    """One iteration of `streams` identical streams (from `ctas` CTAs) on one matrix pipe: each stream's own
    latency chain, the pipe, the issue port, or the operand bandwidth into the CU/SM, whichever is longest."""
    feed = ctas * operand_bytes / bytes_per_cycle if bytes_per_cycle else 0.0
    return max(loop.iteration_cycles, streams * loop.matrix_cycles, streams * loop.issue_cycles, feed)


def estimate_throughput(shape: tuple[int, int, int], grid_ctas: int, units: int, clock_ghz: float,
                        work: MatrixWork, loop: StreamLoop, streams_per_cta: int, residency: Residency,
                        overheads: TileOverheads, operand_bytes_per_cycle: float | None = None) -> ThroughputEstimate:
    """Estimated kernel time and useful TFLOP/s of a GEMM of `shape` (see the module docstring)."""
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
    total = 0.0
    remaining = ctas_per_unit
    for _ in range(waves):  # the last round may hold fewer CTAs, which then share the pipe with fewer
        together = min(resident, remaining)
        remaining -= together
        iteration = shared_iteration(loop, together * streams_per_cta, together, work.operand_bytes_per_iteration,
                                     operand_bytes_per_cycle)
        total += tiles_per_cta * (per_tile_latency + iterations * iteration + overheads.epilogue_cycles)
    if work.persistent and overheads.prefetched_across_tiles:
        total += overheads.first_load_latency                    # only the CTA's first tile waits for its loads
    seconds = total / (clock_ghz * 1e9)
    full = shared_iteration(loop, resident * streams_per_cta, resident, work.operand_bytes_per_iteration,
                            operand_bytes_per_cycle)
    return ThroughputEstimate(
        estimated_tflops=useful_flops / seconds / 1e12 if seconds else 0.0, estimated_seconds=seconds,
        useful_fraction=useful_fraction, useful_flops=useful_flops, issued_flops=issued_flops, tiles=tiles,
        iterations_per_tile=iterations, tiles_per_unit=tiles_per_cta * ctas_per_unit, waves=waves,
        resident_ctas=resident,
        resident_limited_by=residency.limited_by if resident == residency.ctas_per_unit else ["grid"],
        streams_per_pipe=resident * streams_per_cta,
        shared_iteration_cycles=full, tile_cycles=per_tile_latency + iterations * full + overheads.epilogue_cycles,
        total_cycles=total, clock_ghz=clock_ghz)


@dataclass(frozen=True)
class ModelInputs:
    """What a target's static analysis hands over for the kernel-level estimate (JSON-ready via to_dict)."""

    work: MatrixWork
    loop: StreamLoop
    streams_per_cta: int
    residency: Residency
    overheads: TileOverheads
    operand_bytes_per_cycle: float | None     # into one CU/SM; None: not modelled

    def to_dict(self) -> dict:
        return {"work": self.work.to_dict(), "loop": asdict(self.loop), "streams_per_cta": self.streams_per_cta,
                "residency": {**asdict(self.residency), "limited_by": self.residency.limited_by},
                "overheads": asdict(self.overheads), "operand_bytes_per_cycle": self.operand_bytes_per_cycle}

    @classmethod
    def for_loop(cls, work: MatrixWork, estimate, residency: Residency, simds_per_cu: int,
                 operand_bytes_per_cycle: float | None, first_load_latency: float, loads_after_loop: bool,
                 epilogue_cycles: float) -> ModelInputs:
        """The inputs from a target's hot-loop estimate (`iteration_cycles`, `matrix_cycles`, `stall_cycles`):
        consumer warps spread over the CU/SM's SIMDs; a tile is prefetched across tiles by a producer, or by a
        persistent kernel that loads nothing after its K loop."""
        stalls = sum(estimate.stall_cycles.values())
        return cls(
            work=work,
            loop=StreamLoop(estimate.iteration_cycles, estimate.matrix_cycles,
                            max(0.0, estimate.iteration_cycles - stalls)),
            streams_per_cta=max(1, math.ceil(work.consumer_warps / simds_per_cu)),
            residency=residency,
            operand_bytes_per_cycle=operand_bytes_per_cycle,
            overheads=TileOverheads(first_load_latency,
                                    work.warp_specialized or (work.persistent and not loads_after_loop),
                                    epilogue_cycles))

    @classmethod
    def from_dict(cls, data: dict) -> ModelInputs:
        work = {k: v for k, v in data["work"].items() if k != "useful_area"}
        residency = {k: v for k, v in data["residency"].items() if k != "limited_by"}
        return cls(MatrixWork(**work), StreamLoop(**data["loop"]), data["streams_per_cta"], Residency(**residency),
                   TileOverheads(**data["overheads"]), data.get("operand_bytes_per_cycle"))


def kernel_estimate(inputs: ModelInputs, shape: tuple[int, int, int], grid: tuple[int, ...], units: int,
                    clock_ghz: float) -> ThroughputEstimate:
    """`estimate_throughput` for a compiled kernel launched on `grid` for a GEMM of `shape`."""
    return estimate_throughput(shape, math.prod(grid), units, clock_ghz, inputs.work, inputs.loop,
                               inputs.streams_per_cta, inputs.residency, inputs.overheads,
                               inputs.operand_bytes_per_cycle)
