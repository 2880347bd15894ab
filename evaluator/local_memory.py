"""Where a kernel's spilled registers live, and what their traffic costs (docs/static-model.md, "Spills").

Registers the compiler cannot keep go to per-thread local memory (SASS `STL`/`LDL`, AMDGCN `scratch_*`), which
is cached like any other data. A spilled register is stored, then reloaded before its next use, every iteration:
a cyclic pattern, so an LRU cache holds it only while the footprint of every thread that spills fits in the
cache; past that, each access misses it. The footprint decides the level (the first one it fits in, from the
nearest), and the level gives the latency a reload waits for and the bandwidth the traffic competes for.
Target-neutral: each target lists its levels with their figures and sources.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class CacheLevel:
    """One level local memory can be served from, as the target states it."""

    name: str                          # "L1", "L2", "HBM"
    capacity_bytes: float              # the footprint must fit in this (float("inf") for memory)
    per_unit: bool                     # capacity of one CU/SM (L1) or of the whole device (L2, HBM)
    latency_cycles: float              # a reload served from here
    bytes_per_cycle: float | None      # this level's bandwidth per CU/SM; None: the operand feed is the limit
    through_operand_feed: bool         # its traffic also crosses the CU/SM's operand feed (L2 and beyond)


@dataclass(frozen=True)
class SpillPlacement:
    """Where one kernel's spills are served from, and why."""

    level: str
    bytes_per_thread: int              # the compiler's stack frame (ptxas) / scratch size (AMDGCN)
    footprint_per_unit: float          # every resident spilling thread of one CU/SM
    footprint_device: float            # every resident spilling thread of the device
    capacity_bytes: float              # of the chosen level
    latency_cycles: float
    bytes_per_cycle: float | None
    through_operand_feed: bool

    def to_dict(self) -> dict:
        out = asdict(self)
        out["capacity_bytes"] = None if out["capacity_bytes"] == float("inf") else out["capacity_bytes"]
        return out

    @classmethod
    def from_dict(cls, data: dict) -> SpillPlacement:
        capacity = data.get("capacity_bytes")
        return cls(**{**data, "capacity_bytes": float("inf") if capacity is None else capacity})


def place_spills(bytes_per_thread: int, threads_per_cta: int, resident_ctas: int, busy_units: int,
                 levels: tuple[CacheLevel, ...]) -> SpillPlacement | None:
    """The nearest level that holds every resident spilling thread's local memory (`levels` nearest first, the last
    one taken when none holds it); None when nothing spills."""
    if bytes_per_thread <= 0 or not levels:
        return None
    per_unit = float(bytes_per_thread) * threads_per_cta * max(1, resident_ctas)
    device = per_unit * max(1, busy_units)
    chosen = next((lv for lv in levels if (per_unit if lv.per_unit else device) <= lv.capacity_bytes), levels[-1])
    return SpillPlacement(chosen.name, bytes_per_thread, per_unit, device, chosen.capacity_bytes,
                          chosen.latency_cycles, chosen.bytes_per_cycle, chosen.through_operand_feed)
