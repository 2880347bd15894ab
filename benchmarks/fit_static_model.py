"""Fit the two sm90 memory constants of the static model on the ladder measurements, and only there.

The sm90 model has two figures no datasheet gives: the latency of an operand copy under load (`tma_latency`,
`gmem_latency`, one value for both) and the operand bandwidth into one SM (`operand_bytes_per_clock`). This
script compiles the ten sm90 bf16 stages at 4096^3 and 8192^3 once, re-runs the static analysis for every
pair on a grid, and ranks the pairs by the mean Spearman rho of estimated_tflops against the measured
TFLOP/s of benchmarks/results/sm90_bf16_ladder.json (ties broken by pairwise accuracy, then by the smaller
mean |log(estimate / measurement)|). The knob variants are
never read here: they are the validation set (benchmarks/static_model_fidelity.py).

    python benchmarks/fit_static_model.py [--out benchmarks/results/static_model_fit.json]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEASURED = ROOT / "benchmarks" / "results" / "sm90_bf16_ladder.json"
SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))
LATENCIES = (600, 800, 1000, 1200, 1500, 2000, 2500, 3000)
BANDWIDTHS = (None, 32, 36, 40, 44, 48, 56, 64)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "static_model_fit.json"))
    args = p.parse_args(argv)

    from evaluator.compile import compile_candidate
    from evaluator.contract import load_candidate
    from evaluator.stats import pairwise_accuracy, spearman
    from evaluator.targets import get_target
    from evaluator.targets.nvidia.model import NvCosts
    from evaluator.targets.nvidia.static import analyze_kernel
    from evaluator.throughput import ModelInputs, kernel_estimate

    target = get_target("sm90")
    measured = {(r["stage"], (r["M"], r["N"], r["K"])): r["tflops"]
                for r in json.loads(MEASURED.read_text())["records"] if r.get("tflops")}
    files = sorted((ROOT / "kernels" / "sm90" / "bf16").glob("v0*.py"))  # the ten measured stages
    compiled = []
    for path in files:
        module, spec = load_candidate(str(path))
        for shape in SHAPES:
            (kernel,) = compile_candidate(module, spec, target, shape, None)  # every stage launches one kernel
            compiled.append((path.stem.split("_")[0], shape, kernel))
            print(f"compiled {path.name} {shape}", file=sys.stderr, flush=True)

    grid = []
    for latency in LATENCIES:
        for bandwidth in BANDWIDTHS:
            costs = dataclasses.replace(NvCosts(), tma_latency=latency, gmem_latency=latency,
                                        operand_bytes_per_clock=bandwidth)
            per_shape = []
            for shape in SHAPES:
                est, meas = [], []
                for stage, kshape, kernel in compiled:
                    if kshape != shape:
                        continue
                    report = analyze_kernel(kernel, target, costs)
                    estimate = kernel_estimate(ModelInputs.from_dict(report.model), shape, kernel.grid,
                                               target.compute_units, target.clock_ghz)
                    est.append(estimate.estimated_tflops)
                    meas.append(measured[(stage, shape)])
                per_shape.append({"shape": list(shape), "spearman": spearman(est, meas),
                                  "pairwise_accuracy": pairwise_accuracy(est, meas)[0],
                                  "log_error": sum(abs(math.log(e / m)) for e, m in zip(est, meas)) / len(est),
                                  "estimates": [round(e, 1) for e in est]})
            rho = sum(s["spearman"] for s in per_shape) / len(per_shape)
            pairs = sum(s["pairwise_accuracy"] for s in per_shape) / len(per_shape)
            log_error = sum(s["log_error"] for s in per_shape) / len(per_shape)
            grid.append({"latency": latency, "operand_bytes_per_clock": bandwidth, "mean_spearman": round(rho, 4),
                         "mean_pairwise": round(pairs, 4), "mean_log_error": round(log_error, 4),
                         "per_shape": per_shape})
            print(f"latency {latency:5d} bandwidth {bandwidth}: rho {rho:.3f} pairwise {pairs:.3f}",
                  file=sys.stderr, flush=True)
    best = max(grid, key=lambda g: (g["mean_spearman"], g["mean_pairwise"], -g["mean_log_error"]))
    out = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": _git("rev-parse", "--short", "HEAD"),
           "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
           "command": "python benchmarks/fit_static_model.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "fitted_on": str(MEASURED.relative_to(ROOT)), "shapes": [list(s) for s in SHAPES],
           "objective": "mean Spearman rho of estimated_tflops vs measured TFLOP/s over the ten stages, two shapes",
           "best": {k: best[k] for k in ("latency", "operand_bytes_per_clock", "mean_spearman", "mean_pairwise",
                                         "mean_log_error")},
           "grid": grid}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    print(json.dumps(out["best"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
