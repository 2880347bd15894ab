"""Measure sm90 ladder stages on a Hopper GPU (H100/H200) through the evaluator's own runtime stage.

    PYTHONPATH=. python benchmarks/ladder_gpu.py --stages v09,v09-fp8 --shapes 4096x4096x4096,8192x8192x8192
    PYTHONPATH=. python benchmarks/ladder_gpu.py --rounds 3 --profile          # every stage, the five shapes

A thin driver: each round of each (stage, shape) is one call of `evaluator.stages:runtime_stage` (what
`nearpeak eval --run` runs) in a fresh sandboxed process, so correctness, timing, the vendor baseline, the
defenses and the profiler are exactly the evaluator's (docs/eval-schema.md's runtime section); nothing here
measures anything itself. Rounds are separate processes with fresh seeds; the table gives the median over
rounds with the min-max range, and each round's own interquartile range is in the JSON. The fp8 vendor
baseline is `torch._scaled_mm` with the kernel's declared `FAST_ACCUM` (named in the `vendor` column).
Writes NAME.json and NAME.md to --out-dir (default: $OUT if set, else benchmarks/results), with the command,
date and git commit (see benchmarks/results_meta.py).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results_meta import markdown_lines, run_metadata
from evaluator.ladder import stage_files
from evaluator.request import EvalRequest
from evaluator.sandbox import run_isolated

BENCH_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192))
ROUND_TIMEOUT_S = 300.0
ROUND_FIELDS = ("status", "verdict", "seed", "tflops", "vendor_tflops", "ratio_vs_vendor", "graph_tflops",
                "ratio_vs_vendor_graph", "host_us_per_call", "launch_bound", "phase_seconds")


def stage_labels() -> dict[str, Path]:
    """'v00', 'v01', ... for the bf16 ladder, 'v09-fp8', 'v10-fp8', ... for the fp8 stages."""
    labels = {}
    for path in stage_files("sm90"):
        stage = path.name.split("_")[0]
        labels[f"{stage}-fp8" if path.parent.name == "fp8" else stage] = path
    return labels


def parse_shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.lower().split("x"))
    return m, n, k


def measure_round(path: Path, shape, profile: bool) -> dict:
    """One runtime evaluation in a fresh sandboxed process: the runtime section, or what went wrong."""
    request = EvalRequest(target="sm90", shape=tuple(shape), profile=profile, run=True)
    result = run_isolated("evaluator.stages:runtime_stage", {"path": str(path), "request": request.to_dict()},
                          timeout_s=ROUND_TIMEOUT_S)
    if not result.ok:
        return {"status": result.verdict, "verdict": result.message, "stderr_tail": result.stderr_tail[-2000:]}
    return result.value


def _median_range(values: list[float]) -> dict | None:
    values = [v for v in values if v is not None]
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def summarize(stage: str, shape, rounds: list[dict]) -> dict:
    """Median over rounds, with the range, of the evaluator's own figures."""
    ok = [r for r in rounds if r.get("status") == "ok"]
    first = ok[0] if ok else rounds[0]
    profiled = next((r for r in ok if r.get("tensor_pipe_pct") is not None), {})
    return {
        "stage": stage, "shape": list(shape), "rounds": len(rounds), "rounds_ok": len(ok),
        "status": "ok" if len(ok) == len(rounds) else next(r["status"] for r in rounds if r.get("status") != "ok"),
        "verdict": first.get("verdict"),
        "max_rel_error": max((s["rel_error"] for r in ok for s in r.get("shapes", []) if s.get("rel_error") is not None),
                             default=None),
        "tflops": _median_range([r.get("tflops") for r in ok]),
        "vendor": first.get("vendor"),
        "vendor_tflops": _median_range([r.get("vendor_tflops") for r in ok]),
        "ratio_vs_vendor": _median_range([r.get("ratio_vs_vendor") for r in ok]),
        "ratio_vs_vendor_graph": _median_range([r.get("ratio_vs_vendor_graph") for r in ok]),
        "host_us_per_call": _median_range([r.get("host_us_per_call") for r in ok]),
        "iqr_ms_per_round": [r["spread"]["candidate"]["iqr_ms"] for r in ok if r.get("spread")],
        "launch_bound": any(r.get("launch_bound") for r in ok),
        "tensor_pipe_pct": profiled.get("tensor_pipe_pct"),
        "timing_method": first.get("timing_method"),
        "seeds": [r.get("seed") for r in rounds],
        "per_round": [{k: r.get(k) for k in ROUND_FIELDS} for r in rounds],
    }


def _fmt(stat: dict | None, digits: int) -> str:
    if not stat:
        return "-"
    return f"{stat['median']:.{digits}f} [{stat['min']:.{digits}f}-{stat['max']:.{digits}f}]"


def render(report: dict) -> str:
    device = report.get("device") or {}
    cut = "" if report.get("complete", True) else " (run cut short: the rows measured so far)"
    lines = [f"# sm90 ladder on {device.get('device', 'no device')} (evaluator runtime stage){cut}", "",
             *markdown_lines(report["meta"]),
             f"- device: {device.get('device')}, driver {device.get('driver')}, clocks {device.get('clocks_mhz')}",
             (f"- versions: torch {device.get('torch_version')}, triton {device.get('triton_version')}, "
             f"CUDA {device.get('cuda_version')}"),
             f"- method: {report['rounds']} rounds per row, each a fresh sandboxed `runtime_stage` with a fresh seed; "
             "median over rounds [min-max]. Per round: " + (report["rows"][0].get("timing_method") or "-"
                                                           if report["rows"] else "-"),
             "", ("| stage | M x N x K | status | max rel error | TFLOP/s | vendor | vendor TFLOP/s | ratio | "
                  "ratio, CUDA graph | host us/call | tensor pipe % |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in report["rows"]:
        err = f"{row['max_rel_error']:.2e}" if row["max_rel_error"] is not None else "-"
        pipe = f"{row['tensor_pipe_pct']:.1f}" if row["tensor_pipe_pct"] is not None else "-"
        status = row["status"] + (" (launch-bound)" if row["launch_bound"] else "")
        lines.append(f"| {row['stage']} | {'x'.join(map(str, row['shape']))} | {status} | {err} | "
                     f"{_fmt(row['tflops'], 1)} | {row['vendor'] or '-'} | {_fmt(row['vendor_tflops'], 1)} | "
                     f"{_fmt(row['ratio_vs_vendor'], 3)} | {_fmt(row.get('ratio_vs_vendor_graph'), 3)} | "
                     f"{_fmt(row.get('host_us_per_call'), 1)} | {pipe} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="", help="comma list of v00, ..., v09-fp8, ... (default: all)")
    ap.add_argument("--shapes", default="", help="comma list of MxNxK (default: the five benchmark shapes)")
    ap.add_argument("--rounds", type=int, default=3, help="fresh-process evaluations per (stage, shape)")
    ap.add_argument("--profile", action="store_true", help="profile the first round (ncu tensor-pipe utilisation)")
    ap.add_argument("--out-dir", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--name", default="sm90_ladder_runtime", help="file name stem of the results")
    args = ap.parse_args(argv)

    labels = stage_labels()
    stages = [s for s in args.stages.split(",") if s] or list(labels)
    unknown = [s for s in stages if s not in labels]
    if unknown:
        ap.error(f"unknown stages {unknown}; known: {', '.join(labels)}")
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s] or list(BENCH_SHAPES)
    meta = run_metadata()
    rows, device = [], None
    out = Path(args.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    device_fields = ("device", "driver", "clocks_mhz", "torch_version", "triton_version", "cuda_version")
    for stage in stages:
        for shape in shapes:
            rounds = [measure_round(labels[stage], shape, args.profile and i == 0) for i in range(args.rounds)]
            device = device or next((r for r in rounds if r.get("device")), None)
            row = summarize(stage, shape, rounds)
            rows.append(row)
            print(f"{stage:4s} {'x'.join(map(str, shape)):16s} {row['status']:10s} TFLOP/s {_fmt(row['tflops'], 1)} "
                  f"ratio {_fmt(row['ratio_vs_vendor'], 3)}", flush=True)
            report = {"meta": meta, "rounds": args.rounds, "rows": rows, "complete": False,
                      "device": {k: (device or {}).get(k) for k in device_fields}}
            _write(out, args.name, report)  # after every row, so a run cut short keeps what it measured
    report["complete"] = True
    _write(out, args.name, report)
    print(f"wrote {out / args.name}.json/.md")
    return 0 if all(r["status"] == "ok" for r in rows) else 1


def _write(out: Path, name: str, report: dict) -> None:
    (out / f"{name}.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    (out / f"{name}.md").write_text(render(report))


if __name__ == "__main__":
    sys.exit(main())
