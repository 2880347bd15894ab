"""Nsight Compute on the candidate's kernels only: tensor-pipe activity, registers, achieved occupancy.

The command profiles `evaluator.profilers.ncu_target` with the clocks left as they are
(`--clock-control none`: nearpeak never changes a card's clocks), filtered to the candidate's kernel names,
skipping the first launch. `sm__pipe_tensor_op_hmma_cycles_active` counts Hopper's warpgroup MMA (HGMMA)
as well as warp-level HMMA on the H200, so it is the matrix-unit efficiency for both kinds of kernel;
`sm__inst_executed_pipe_tensor_op_gmma` tells which of the two the kernel issued.

`--csv` output (the default "details" page) is one row per (launch, metric) with the columns
"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", ..., "Section Name", "Metric Name",
"Metric Unit", "Metric Value", after `==PROF==` progress lines. The "raw" page (`--page raw`) is one wide
row per launch after a row of units; both are parsed.
"""
from __future__ import annotations

import csv
import io
import re
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from ...profilers.ncu_target import driver_command, run_profiler

TENSOR_PIPE = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
GMMA_INSTRUCTIONS = "sm__inst_executed_pipe_tensor_op_gmma.sum"
REGISTERS = "launch__registers_per_thread"
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
NCU_METRICS = (TENSOR_PIPE, GMMA_INSTRUCTIONS, REGISTERS, OCCUPANCY)

_THOUSANDS = re.compile(r"^-?\d{1,3}(,\d{3})+(\.\d+)?$")


def kernel_filter(names: list[str]) -> str:
    """ncu's `-k` argument matching exactly these function names."""
    return "regex:^(" + "|".join(re.escape(n) for n in names) + ")$"


def ncu_command(path: str, names: list[str], shape, knobs: dict, seed: int, *, launches: int = 3,
                skip: int = 1, count: int = 2, ncu: str = "ncu", python: str = sys.executable,
                log_file: str | None = None) -> list[str]:
    """argv that profiles `count` launches of the candidate's kernels after skipping `skip`."""
    cmd = [ncu, "--clock-control", "none", "--target-processes", "all", "-k", kernel_filter(names),
           "--launch-skip", str(skip), "--launch-count", str(count), "--metrics", ",".join(NCU_METRICS), "--csv"]
    if log_file:
        cmd += ["--log-file", log_file]
    return cmd + driver_command(path, shape, knobs, seed, launches, python)


def parse_value(text: str) -> float | str | None:
    """A metric cell as a number where it is one: "1,024" -> 1024.0, "87.5" -> 87.5, "n/a" -> None."""
    text = text.strip()
    if not text or text.lower() in ("n/a", "nan"):
        return None
    if _THOUSANDS.match(text):
        text = text.replace(",", "")
    elif text.count(",") == 1 and "." not in text:
        text = text.replace(",", ".")  # a decimal comma from a non-English locale
    try:
        return float(text)
    except ValueError:
        return text


def _csv_rows(text: str) -> list[list[str]]:
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        return []
    body = [line for line in lines[start:] if line.startswith('"')]
    return list(csv.reader(io.StringIO("\n".join(body))))


def parse_ncu_csv(text: str) -> list[dict]:
    """Profiled launches in order: [{"id", "kernel", "metrics": {name: value}, "units": {name: unit}}]."""
    rows = _csv_rows(text)
    if not rows:
        return []
    header, body = rows[0], rows[1:]
    col = {name: i for i, name in enumerate(header)}
    launches: dict[str, dict] = {}
    if "Metric Name" in col:
        for row in body:
            if len(row) != len(header):
                continue
            entry = launches.setdefault(row[col["ID"]], {"id": int(row[col["ID"]]), "kernel": row[col["Kernel Name"]],
                                                         "metrics": {}, "units": {}})
            name = row[col["Metric Name"]]
            entry["metrics"][name] = parse_value(row[col["Metric Value"]])
            entry["units"][name] = row[col["Metric Unit"]]
        return list(launches.values())
    metric_cols = [name for name in header if "__" in name]
    units: dict[str, str] = {}
    out = []
    for row in body:
        if len(row) != len(header):
            continue
        if not row[col["ID"]].strip():  # the raw page's units row
            units = {name: row[col[name]] for name in metric_cols}
            continue
        out.append({"id": int(row[col["ID"]]), "kernel": row[col["Kernel Name"]],
                    "metrics": {name: parse_value(row[col[name]]) for name in metric_cols}, "units": dict(units)})
    return out


def median_metric(launches: list[dict], metric: str) -> float | None:
    """Median of one metric over profiled launches (parse_ncu_csv's entries); None when none reported it."""
    values = [x["metrics"].get(metric) for x in launches]
    values = [v for v in values if isinstance(v, float)]
    return statistics.median(values) if values else None


def summarize_ncu(launches: list[dict]) -> dict:
    """Median over profiled launches of each figure nearpeak reports."""
    gmma = median_metric(launches, GMMA_INSTRUCTIONS)
    tensor_pipe = median_metric(launches, TENSOR_PIPE)
    return {
        "efficiency": None if tensor_pipe is None else tensor_pipe / 100,   # the record's matrix-unit share
        "tensor_pipe_active_pct": tensor_pipe,
        "gmma_instructions": gmma,
        "matrix_path": None if gmma is None else ("wgmma" if gmma > 0 else "mma.sync or none"),
        "registers_per_thread": median_metric(launches, REGISTERS),
        "achieved_occupancy_pct": median_metric(launches, OCCUPANCY),
        "launches_profiled": len(launches),
        "kernels": sorted({x["kernel"] for x in launches}),
    }


def run_ncu(path: str, names: list[str], shape, knobs: dict, seed: int, *, timeout_s: float = 120.0,
            ncu: str | None = None) -> dict:
    """Run Nsight Compute on the candidate and summarize; failures come back as `ok: False` with the reason."""
    ncu = ncu or shutil.which("ncu")
    if not ncu:
        return {"ok": False, "tool": "ncu", "error": "ncu is not on PATH"}
    with tempfile.TemporaryDirectory(prefix="nearpeak-ncu-") as tmp:
        log = str(Path(tmp) / "ncu.csv")
        cmd = ncu_command(str(Path(path).resolve()), names, shape, knobs, seed, ncu=ncu, log_file=log)
        done = run_profiler(cmd, timeout_s)
        if done is None:
            return {"ok": False, "tool": "ncu", "command": cmd, "error": f"ncu ran past {timeout_s:.0f} s"}
        text = Path(log).read_text() if Path(log).exists() else ""
    launches = parse_ncu_csv(text) or parse_ncu_csv(done.stdout)
    if done.returncode != 0 or not launches:
        tail = (done.stderr or done.stdout or text).strip().splitlines()[-5:]
        return {"ok": False, "tool": "ncu", "command": cmd, "returncode": done.returncode,
                "error": "ncu produced no metrics for the candidate's kernels: " + " | ".join(tail)}
    return {"ok": True, "tool": "ncu", "command": cmd, "measured": True, **summarize_ncu(launches),
            "raw": launches}
