"""Tensor-pipe activity of a stage and of its fair vendor baseline, side by side, under Nsight Compute.

How close a kernel can come to the vendor library depends on how busy the library keeps the matrix units: if
both keep the tensor pipe ~97% active at the same clock, no schedule can win much. This profiles, for each
kernel file and shape, the stage's launches and then the vendor call the evaluator compares it with
(`evaluator.runtime.timing.vendor_call`: torch.matmul, or torch._scaled_mm with the stage's accumulation
mode), through the evaluator's own profiler driver (`evaluator.profilers.ncu_target`, `--vendor` for the
library). Only the bracketed launches are profiled (`--profile-from-start off`), clocks as they are.

    python benchmarks/vendor_tensor_pipe.py kernels/sm90/bf16/v10_split_k.py --shape 8192 8192 8192 \\
        --out benchmarks/results/vendor_tensor_pipe.json

Writes --out (JSON) and the same path with .md. Needs ncu and an NVIDIA GPU.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_meta import markdown_lines, run_metadata

from evaluator.profilers.ncu_target import driver_command, run_profiler
from evaluator.targets.nvidia.ncu import NCU_METRICS, TENSOR_PIPE, median_metric, parse_ncu_csv

SM_CLOCK = "sm__cycles_elapsed.avg.per_second"
DURATION = "gpu__time_duration.sum"
METRICS = (*NCU_METRICS, SM_CLOCK, DURATION)


def profile(path: str, shape: list[int], vendor: bool, launches: int, timeout_s: float) -> dict:
    """Per kernel name: median tensor-pipe %, SM clock (GHz) and duration (us) over the profiled launches."""
    ncu = shutil.which("ncu")
    if ncu is None:
        return {"ok": False, "error": "ncu is not on PATH"}
    with tempfile.TemporaryDirectory(prefix="nearpeak-vendor-ncu-") as tmp:
        log = Path(tmp) / "ncu.csv"
        cmd = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--target-processes", "all",
               "--metrics", ",".join(METRICS), "--csv", "--log-file", str(log),
               *driver_command(str(Path(path).resolve()), shape, {}, 0, launches)]
        if vendor:
            cmd.append("--vendor")
        done = run_profiler(cmd, timeout_s)
        if done is None:
            return {"ok": False, "error": f"ncu ran past {timeout_s} s"}
        launches_seen = parse_ncu_csv(log.read_text() if log.exists() else "")
        if done.returncode != 0 or not launches_seen:
            return {"ok": False, "error": f"ncu exited {done.returncode}: {(done.stderr or done.stdout)[-600:]}"}
    by_kernel: dict[str, list[dict]] = {}
    for launch in launches_seen:
        by_kernel.setdefault(launch["kernel"], []).append(launch)

    def median(launches: list[dict], name: str, scale: float = 1.0) -> float | None:
        value = median_metric(launches, name)
        return None if value is None else round(value * scale, 3)

    kernels = [{"kernel": name[:120], "launches": len(rows), "tensor_pipe_active_pct": median(rows, TENSOR_PIPE),
                "sm_clock_ghz": median(rows, SM_CLOCK, 1e-9), "duration_us": median(rows, DURATION, 1e-3)}
               for name, rows in by_kernel.items()]
    return {"ok": True, "kernels": kernels}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="kernel files (stages) to profile with their vendor baseline")
    parser.add_argument("--shape", type=int, nargs=3, action="append", metavar=("M", "N", "K"),
                        help="problem shape (repeatable; default: each file's benchmark shape)")
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--out", default="benchmarks/results/vendor_tensor_pipe.json")
    args = parser.parse_args(argv)
    meta = run_metadata(None if argv is None else ["benchmarks/vendor_tensor_pipe.py", *argv])
    records = []
    for path in args.files:
        for shape in args.shape or [None]:
            for side in ("stage", "vendor"):
                result = profile(path, shape, side == "vendor", args.launches, args.timeout)
                records.append({"file": path, "shape": shape, "side": side, **result})
                print(json.dumps(records[-1]), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"benchmark": "vendor_tensor_pipe", **meta, "records": records}, indent=1) + "\n")
    lines = ["# Tensor-pipe activity: stage vs vendor baseline (ncu)", "", *markdown_lines(meta), "",
             "| file | M x N x K | side | kernel | launches | tensor pipe active % | SM clock GHz | duration us |",
             "|---|---|---|---|---|---|---|---|"]
    for r in records:
        dims = "x".join(map(str, r["shape"])) if r["shape"] else "benchmark shape"
        if not r["ok"]:
            lines.append(f"| {r['file']} | {dims} | {r['side']} | {r['error'][:200]} |||||")
            continue
        for k in r["kernels"]:
            lines.append(f"| {r['file']} | {dims} | {r['side']} | `{k['kernel'][:60]}` | {k['launches']} | "
                         f"{k['tensor_pipe_active_pct']} | {k['sm_clock_ghz']} | {k['duration_us']} |")
    out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0 if all(r["ok"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
