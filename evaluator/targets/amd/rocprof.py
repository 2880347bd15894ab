"""rocprofv3 on the candidate's kernels (AMD CDNA targets): MFMA efficiency from hardware counters.

UNVERIFIED ON HARDWARE: no AMD GPU exists where nearpeak is developed. This module is written against
rocprofv3's documented command line and CSV output and tested on fixture files only.

Command: `rocprofv3 --pmc SQ_BUSY_CYCLES SQ_VALU_MFMA_BUSY_CYCLES GRBM_GUI_ACTIVE --kernel-include-regex RE
--output-format csv -d DIR -o PREFIX -- python -m evaluator.profilers.ncu_target FILE ...`. Counter
collection writes `DIR/.../PREFIX_counter_collection.csv`, one row per (dispatch, counter) with columns
such as Correlation_Id, Dispatch_Id, Agent_Id, Queue_Id, Process_Id, Thread_Id, Grid_Size, Kernel_Id,
Kernel_Name, Workgroup_Size, LDS_Block_Size, Scratch_Size, VGPR_Count, Accum_VGPR_Count, SGPR_Count,
Counter_Name, Counter_Value, Start_Timestamp, End_Timestamp.

MFMA efficiency is MFMA-busy cycles per available MFMA cycle: SQ_VALU_MFMA_BUSY_CYCLES summed over the
SIMDs, over GRBM_GUI_ACTIVE (GPU-active cycles) times the number of SIMDs (CUs x 4), the formula of
rocprofiler-compute's "MFMA Util". How GRBM_GUI_ACTIVE aggregates over the XCDs of an MI350/MI355 is one of
the things a first run on hardware must confirm. The seed article's thread-trace method (rocprofv3 --att)
is the finer-grained alternative and is not wired in.
"""
from __future__ import annotations

import csv
import io
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from ...profilers.ncu_target import driver_command, run_profiler

ROCPROF_COUNTERS = ("SQ_BUSY_CYCLES", "SQ_VALU_MFMA_BUSY_CYCLES", "GRBM_GUI_ACTIVE")
UNVERIFIED = "rocprofv3 path written against documented outputs; not yet run on an AMD GPU"


def kernel_regex(names: list[str]) -> str:
    """rocprofv3's --kernel-include-regex for these names (ROCm kernel names may carry suffixes)."""
    return "^(" + "|".join(names) + ")"


def rocprof_command(path: str, names: list[str], shape, knobs: dict, seed: int, out_dir: str, *,
                    launches: int = 3, prefix: str = "nearpeak", rocprofv3: str = "rocprofv3",
                    python: str = sys.executable) -> list[str]:
    return [rocprofv3, "--pmc", *ROCPROF_COUNTERS, "--kernel-include-regex", kernel_regex(names),
            "--output-format", "csv", "-d", out_dir, "-o", prefix, "--",
            *driver_command(path, shape, knobs, seed, launches, python)]


def _int(text: str | None) -> int | None:
    try:
        return int(float(text)) if text not in (None, "") else None
    except ValueError:
        return None


def parse_counter_collection(text: str) -> list[dict]:
    """Dispatches in order: {"dispatch_id", "kernel", "counters": {name: value summed over rows}, resources}."""
    dispatches: dict[int, dict] = {}
    for row in csv.DictReader(io.StringIO(text)):
        dispatch = _int(row.get("Dispatch_Id"))
        if dispatch is None or not row.get("Counter_Name"):
            continue
        entry = dispatches.setdefault(dispatch, {
            "dispatch_id": dispatch, "kernel": row.get("Kernel_Name", ""), "counters": {},
            "vgpr": _int(row.get("VGPR_Count")), "agpr": _int(row.get("Accum_VGPR_Count")),
            "sgpr": _int(row.get("SGPR_Count")), "lds_bytes": _int(row.get("LDS_Block_Size")),
            "scratch_bytes": _int(row.get("Scratch_Size")),
        })
        name = row["Counter_Name"]
        entry["counters"][name] = entry["counters"].get(name, 0.0) + float(row["Counter_Value"])
    return [dispatches[k] for k in sorted(dispatches)]


def mfma_efficiency(counters: dict[str, float], compute_units: int, simds_per_cu: int) -> float | None:
    """Fraction of available MFMA cycles the matrix units were busy (0..1), or None without the counters."""
    busy = counters.get("SQ_VALU_MFMA_BUSY_CYCLES")
    active = counters.get("GRBM_GUI_ACTIVE")
    if busy is None or not active:
        return None
    return busy / (active * compute_units * simds_per_cu)


def summarize_rocprof(dispatches: list[dict], target, skip: int = 1) -> dict:
    """Median over the candidate's dispatches after the first `skip` (the first may include cold caches)."""
    measured = dispatches[skip:] or dispatches
    effs = [mfma_efficiency(d["counters"], target.compute_units, target.simds_per_cu) for d in measured]
    effs = [e for e in effs if e is not None]
    first = measured[0] if measured else {}
    return {
        "efficiency": statistics.median(effs) if effs else None,   # the record's matrix-unit share (0..1)
        "mfma_efficiency_pct": 100 * statistics.median(effs) if effs else None,
        "mfma_busy_per_sq_busy": _ratio(measured, "SQ_VALU_MFMA_BUSY_CYCLES", "SQ_BUSY_CYCLES"),
        "vgpr": first.get("vgpr"), "agpr": first.get("agpr"), "sgpr": first.get("sgpr"),
        "lds_bytes": first.get("lds_bytes"), "scratch_bytes": first.get("scratch_bytes"),
        "dispatches_profiled": len(measured), "kernels": sorted({d["kernel"] for d in measured}),
    }


def _ratio(dispatches: list[dict], num: str, den: str) -> float | None:
    values = [d["counters"][num] / d["counters"][den] for d in dispatches
              if d["counters"].get(den) and num in d["counters"]]
    return statistics.median(values) if values else None


def run_rocprof(path: str, names: list[str], shape, knobs: dict, seed: int, target, *,
                timeout_s: float = 120.0, rocprofv3: str | None = None) -> dict:
    """Run rocprofv3 on the candidate and summarize; failures come back as `ok: False` with the reason."""
    rocprofv3 = rocprofv3 or shutil.which("rocprofv3")
    base = {"tool": "rocprofv3", "unverified": UNVERIFIED}
    if not rocprofv3:
        return {"ok": False, **base, "error": "rocprofv3 is not on PATH"}
    with tempfile.TemporaryDirectory(prefix="nearpeak-rocprof-") as tmp:
        cmd = rocprof_command(str(Path(path).resolve()), names, shape, knobs, seed, tmp, rocprofv3=rocprofv3)
        done = run_profiler(cmd, timeout_s)
        if done is None:
            return {"ok": False, **base, "command": cmd, "error": f"rocprofv3 ran past {timeout_s:.0f} s"}
        files = sorted(Path(tmp).rglob("*_counter_collection.csv"))
        dispatches = [d for f in files for d in parse_counter_collection(f.read_text())]
    if done.returncode != 0 or not dispatches:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        return {"ok": False, **base, "command": cmd, "returncode": done.returncode,
                "error": "rocprofv3 produced no counters for the candidate's kernels: " + " | ".join(tail)}
    return {"ok": True, **base, "command": cmd, "measured": True, **summarize_rocprof(dispatches, target),
            "raw": dispatches}
