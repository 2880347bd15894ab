"""Driver version and clocks of an NVIDIA GPU, read from `nvidia-smi`'s query interface.

`nvidia-smi --id=N --query-gpu=FIELDS --format=csv,noheader,nounits` prints one comma-separated line per
GPU selected, the values in the order asked, clocks in MHz without their unit; a value the GPU does not
report reads "[N/A]" or "[Not Supported]". The reading is context for a reader, never input to a verdict.
"""
from __future__ import annotations

from ..base import SmiReading

QUERY_FIELDS = ("driver_version", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem")
CLOCK_KEYS = ("sm", "mem", "max_sm", "max_mem")  # the names clocks_mhz uses for QUERY_FIELDS[1:]


def smi_query(device: str) -> list[str]:
    """The command line that reads one GPU's driver version and clocks; `device` is nvidia-smi's name for it
    (its host index or UUID, `evaluator.targets.base.smi_device_id`)."""
    return ["nvidia-smi", f"--id={device}", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]


def parse_smi(text: str) -> SmiReading:
    """Driver version and clocks from the output of `smi_query` (its first line); nothing when unreadable."""
    lines = text.strip().splitlines()
    parts = [p.strip() for p in lines[0].split(",")] if lines else []
    if len(parts) != len(QUERY_FIELDS):
        return SmiReading(None, {})
    clocks: dict[str, float] = {}
    for key, raw in zip(CLOCK_KEYS, parts[1:]):
        try:
            clocks[key] = float(raw)
        except ValueError:
            continue  # "[N/A]" or "[Not Supported]"
    return SmiReading(parts[0] or None, clocks)
