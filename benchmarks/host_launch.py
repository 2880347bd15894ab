"""Host time per launch call of sm90 ladder stages against the vendor library, and CUDA-graph replay.

    PYTHONPATH=. python benchmarks/host_launch.py [--shape 512x512x512] [--calls 200] [--out DIR] [--json]

For each kernel (default: bf16 v01, v09, v10 and fp8 v09, v10) and its vendor call (torch.matmul for bf16,
torch._scaled_mm with use_fast_accum=True for fp8), on a small problem where the GPU work is far shorter
than the launch path:
- `host_us`: host microseconds for one call to return, averaged over back-to-back calls on the same tensors
  (evaluator.runtime.timing.host_us_per_call: the device idle at the start, no synchronization inside);
- `host_us_fresh_c`: the same with a different output tensor on every call, cycling through more outputs than
  v10 caches descriptors for, so the pointer-keyed descriptor cache misses every time;
- `graph_us`: per-call time under CUDA-graph replay (evaluator.runtime.timing.graph_times), i.e. GPU time with
  no host work, and `eager_us`: per-call device-event time of back-to-back eager calls.
The kernel's and the vendor's measurements alternate, in `--rounds` rounds; each figure is the median over
rounds. `ratio` is host_us over the vendor's. Writes host_launch.json and host_launch.md to --out (default $OUT
or benchmarks/results).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KERNELS = {
    "bf16 v01": "kernels/sm90/bf16/v01_wgmma.py",
    "bf16 v09": "kernels/sm90/bf16/v09_tuned.py",
    "bf16 v10": "kernels/sm90/bf16/v10_split_k.py",
    "fp8 v09": "kernels/sm90/fp8/v09_fp8.py",
    "fp8 v10": "kernels/sm90/fp8/v10_fp8_split_k.py",
}
FRESH_OUTPUTS = 200  # more than v10's per-geometry descriptor cache (64), so every call misses


def parse_shape(text: str) -> tuple[int, int, int]:
    try:
        m, n, k = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"shape must look like 512x512x512, got {text!r}") from None
    return m, n, k


def measure(name: str, path: str, shape, calls: int, rounds: int, device) -> dict:
    """Host, eager and graph per-call figures of one kernel and its vendor call on one shape."""
    import torch

    from evaluator.contract import load_candidate
    from evaluator.runtime import correctness as corr
    from evaluator.runtime import timing

    module, spec = load_candidate(str(ROOT / path))
    if not spec.supports(shape):
        return {"kernel": name, "file": path, "error": f"shape {shape} not a multiple of {spec.shape_multiple}"}
    args = corr.make_arguments(spec, shape, device, corr.generator_for(device, 1234))
    vendor, vendor_name = timing.vendor_call(spec, args)
    outputs = [torch.empty_like(args["c"]) for _ in range(FRESH_OUTPUTS)]
    knobs = spec.knobs
    sides = {
        "kernel": lambda i: module.launch(**args, **knobs),
        "vendor": lambda i: vendor(),
    }
    fresh = lambda i: module.launch(**{**args, "c": outputs[i % FRESH_OUTPUTS]}, **knobs)
    timer = timing.Timer(device)
    for call in sides.values():
        for i in range(5):
            call(i)
    for i in range(FRESH_OUTPUTS):  # compile-free warm-up of the fresh-output path's allocations
        fresh(i)
    timer.synchronize()
    per_round: dict[str, list[float]] = {k: [] for k in ("host", "vendor_host", "fresh", "eager", "vendor_eager",
                                                         "graph", "vendor_graph")}
    for _ in range(rounds):
        per_round["host"].append(timing.host_us_per_call(timer, sides["kernel"], calls))
        per_round["vendor_host"].append(timing.host_us_per_call(timer, sides["vendor"], calls))
        per_round["fresh"].append(timing.host_us_per_call(timer, fresh, calls))
        eager = timing.time_calls(timer, sides, reps=calls, warmup=2)
        per_round["eager"].append(1e3 * statistics.median(eager["kernel"]))
        per_round["vendor_eager"].append(1e3 * statistics.median(eager["vendor"]))
        graphs = timing.graph_times(sides, device, per_graph=10, replays=20)
        for side, key in (("kernel", "graph"), ("vendor", "vendor_graph")):
            got = graphs[side]
            per_round[key].append(1e3 * got.median_ms if isinstance(got, timing.Summary) else float("nan"))
    med = {k: statistics.median(v) for k, v in per_round.items()}
    return {"kernel": name, "file": path, "vendor": vendor_name, "shape": list(shape), "rounds": rounds,
            "calls": calls, "host_us": med["host"], "vendor_host_us": med["vendor_host"],
            "ratio": med["host"] / med["vendor_host"], "host_us_fresh_c": med["fresh"],
            "eager_us": med["eager"], "vendor_eager_us": med["vendor_eager"], "graph_us": med["graph"],
            "vendor_graph_us": med["vendor_graph"],
            "host_us_spread": [min(per_round["host"]), max(per_round["host"])],
            "vendor_host_us_spread": [min(per_round["vendor_host"]), max(per_round["vendor_host"])]}


def render(meta: dict, rows: list[dict]) -> str:
    lines = [f"# Host time per launch call on {meta['device']}", "",
             f"{meta['date']}, torch {meta['torch']}, triton {meta['triton']}, commit {meta['commit']}", "",
             f"`{meta['command']}`", "",
             ("Median over rounds; host = host time for one call to return (device idle at start); fresh C = a new "
             "output tensor every call; eager = device events per back-to-back call; graph = per call under "
             "CUDA-graph replay (GPU only)."), "",
             ("| kernel | shape | host us | vendor host us | ratio | host us, fresh C | eager us | vendor eager us "
             "| graph us | vendor graph us | vendor |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['kernel']} | - | {r['error']} | | | | | | | | |")
            continue
        lines.append(f"| {r['kernel']} | {'x'.join(map(str, r['shape']))} | {r['host_us']:.1f} | "
                     f"{r['vendor_host_us']:.1f} | {r['ratio']:.2f} | {r['host_us_fresh_c']:.1f} | "
                     f"{r['eager_us']:.1f} | {r['vendor_eager_us']:.1f} | {r['graph_us']:.1f} | "
                     f"{r['vendor_graph_us']:.1f} | {r['vendor']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", type=parse_shape, default=(512, 512, 512))
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--kernels", default=",".join(KERNELS), help="comma-separated names from: "
                        + ", ".join(KERNELS))
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--json", action="store_true", help="print the JSON records instead of the table")
    args = parser.parse_args(argv)
    import subprocess

    import torch
    import triton

    if not torch.cuda.is_available():
        print("host_launch.py needs a CUDA GPU (sm90)", file=sys.stderr)
        return 2
    names = [n.strip() for n in args.kernels.split(",") if n.strip()]
    unknown = [n for n in names if n not in KERNELS]
    if unknown:
        print(f"unknown kernels {unknown}; known: {', '.join(KERNELS)}", file=sys.stderr)
        return 2
    device = torch.device("cuda", torch.cuda.current_device())
    rows = []
    for name in names:
        print(f"[host_launch] {name} {args.shape}", file=sys.stderr, flush=True)
        rows.append(measure(name, KERNELS[name], args.shape, args.calls, args.rounds, device))
    commit = os.environ.get("NEARPEAK_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=False).stdout.strip() or "unknown"
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(device), "torch": torch.__version__, "triton": triton.__version__,
            "commit": commit, "command": "python benchmarks/host_launch.py " + " ".join(argv or sys.argv[1:])}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "host_launch.json").write_text(json.dumps({**meta, "records": rows}, indent=1))
    (out / "host_launch.md").write_text(render(meta, rows))
    print(json.dumps(rows, indent=1) if args.json else render(meta, rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
