"""Fit the two sm90 memory constants of the static model on one measured set and validate them on the other.

The sm90 model has two figures no datasheet gives: the latency of an operand copy under load (`tma_latency`,
`gmem_latency`, one value for both) and the operand bandwidth into one SM (`operand_bytes_per_clock`). This
script compiles the measured kernels once, re-runs the static analysis for every pair on a grid, and ranks
the pairs on the fitting set only; the other set is scored at every grid point but never used to choose.

Two measured sets (both H200):

* ladder: the ten sm90 bf16 stages at 4096^3 and 8192^3 (benchmarks/results/sm90_bf16_ladder.json); its
  score is the mean over the two shapes;
* variants: the correct knob variants of benchmarks/sm90_knob_variants.json at 4096^3
  (benchmarks/results/sm90_knob_variants_h200.jsonl). The stage defaults measured in the same run are left
  out: they are the ladder's own kernels.

Ranking: Spearman rho of estimated_tflops against the measured TFLOP/s, ties broken by pairwise accuracy
(variants: with their pre-registered tie threshold), then by the smaller mean |log(estimate / measurement)|.

    python benchmarks/fit_static_model.py [--fit-on ladder|variants] [--out benchmarks/results/static_model_fit.json]
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
sys.path.insert(0, str(ROOT))

from benchmarks.static_model_fidelity import VARIANT_RESULTS, VARIANTS, variant_measurements

LADDER_MEASURED = ROOT / "benchmarks" / "results" / "sm90_bf16_ladder.json"
LADDER_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))
LATENCIES = (600, 800, 1000, 1200, 1500, 2000, 2500, 3000)
BANDWIDTHS = (None, 32, 36, 40, 44, 48, 56, 64)


@dataclasses.dataclass
class Case:
    """One compiled, measured kernel."""

    label: str
    shape: tuple[int, int, int]
    kernel: object  # evaluator.compile.CompiledKernel
    measured_tflops: float


@dataclasses.dataclass
class Ranking:
    """Kernels ranked against each other (one shape of one set)."""

    name: str
    cases: list[Case]
    tie: float = 0.0


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def _compile(path: Path, shape: tuple, knobs: dict | None):
    from evaluator.compile import compile_candidate
    from evaluator.contract import load_candidate
    from evaluator.targets import get_target

    module, spec = load_candidate(str(path))
    (kernel,) = compile_candidate(module, spec, get_target("sm90"), shape, knobs)  # every sm90 stage: one kernel
    print(f"compiled {path.name} {shape} {knobs or ''}", file=sys.stderr, flush=True)
    return kernel


def ladder_rankings() -> list[Ranking]:
    """The ten stages at each ladder shape, against benchmarks/results/sm90_bf16_ladder.json."""
    measured = {(r["stage"], (r["M"], r["N"], r["K"])): r["tflops"]
                for r in json.loads(LADDER_MEASURED.read_text())["records"] if r.get("tflops")}
    files = sorted((ROOT / "kernels" / "sm90" / "bf16").glob("v0*.py"))  # the ten measured stages
    rankings = []
    for shape in LADDER_SHAPES:
        cases = [Case(p.stem.split("_")[0], shape, _compile(p, shape, None), measured[(p.stem.split("_")[0], shape)])
                 for p in files]
        rankings.append(Ranking(f"ladder {'x'.join(map(str, shape))}", cases))
    return rankings


def fitting_variants() -> tuple[dict, list[dict]]:
    """The variants file and its measured variants that ran correctly, each with a `label`; the stage defaults
    measured in the same run are not among them (they are the ladder's own kernels)."""
    config, measured = variant_measurements()
    chosen = []
    for r in measured:
        if r["role"] != "variant" or r.get("status") != "ok":
            continue
        label = f"{r['stage']} " + ",".join(f"{k}={v}" for k, v in r["knobs_changed"].items())
        chosen.append({**r, "label": label})
    return config, chosen


def variant_rankings() -> list[Ranking]:
    """The knob variants that ran correctly, at their one shape, compiled with the knobs they were measured with."""
    config, chosen = fitting_variants()
    shape = tuple(config["shape"])
    cases = [Case(r["label"], shape, _compile(ROOT / r["file"], shape, r["knobs"]), r["tflops"]) for r in chosen]
    return [Ranking(f"variants {'x'.join(map(str, shape))}", cases, config["tie_threshold"])]


def score(rankings: list[Ranking], costs) -> dict:
    """Spearman rho, pairwise accuracy and mean |log error| of the estimates under `costs`, per ranking and
    averaged over the rankings."""
    from evaluator.stats import pairwise_accuracy, spearman
    from evaluator.targets import get_target
    from evaluator.targets.nvidia.static import analyze_kernel
    from evaluator.throughput import ModelInputs, kernel_estimate

    target = get_target("sm90")
    per = []
    for ranking in rankings:
        est = []
        for case in ranking.cases:
            report = analyze_kernel(case.kernel, target, costs)
            estimate = kernel_estimate(ModelInputs.from_dict(report.model), case.shape, case.kernel.grid,
                                       target.compute_units, target.clock_ghz, target.clock)
            est.append(estimate.estimated_tflops)
        meas = [c.measured_tflops for c in ranking.cases]
        per.append({"ranking": ranking.name, "n": len(est), "spearman": round(spearman(est, meas), 4),
                    "pairwise_accuracy": round(pairwise_accuracy(est, meas, ranking.tie)[0], 4),
                    "log_error": round(sum(abs(math.log(e / m)) for e, m in zip(est, meas)) / len(est), 4),
                    "estimates": [round(e, 1) for e in est]})
    mean = {k: round(sum(p[k] for p in per) / len(per), 4) for k in ("spearman", "pairwise_accuracy", "log_error")}
    return {**{f"mean_{k}": v for k, v in mean.items()}, "per_ranking": per}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fit-on", choices=("ladder", "variants"), default="ladder",
                   help="the measured set that chooses the constants; the other one validates them")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "static_model_fit.json"))
    args = p.parse_args(argv)

    from evaluator.targets.nvidia.model import NvCosts

    sets = {"ladder": ladder_rankings(), "variants": variant_rankings()}
    validate_on = "ladder" if args.fit_on == "variants" else "variants"
    grid = []
    for latency in LATENCIES:
        for bandwidth in BANDWIDTHS:
            costs = dataclasses.replace(NvCosts(), tma_latency=latency, gmem_latency=latency,
                                        operand_bytes_per_clock=bandwidth)
            point = {"latency": latency, "operand_bytes_per_clock": bandwidth,
                     "fit": score(sets[args.fit_on], costs), "validation": score(sets[validate_on], costs)}
            grid.append(point)
            fit, val = point["fit"], point["validation"]
            print(f"latency {latency:5d} bandwidth {bandwidth}: fit rho {fit['mean_spearman']:.3f} pairwise "
                  f"{fit['mean_pairwise_accuracy']:.3f} | validation rho "
                  + " / ".join(f"{r['spearman']:.3f}" for r in val["per_ranking"]), file=sys.stderr, flush=True)
    best = max(grid, key=lambda g: (g["fit"]["mean_spearman"], g["fit"]["mean_pairwise_accuracy"],
                                    -g["fit"]["mean_log_error"]))
    current = NvCosts()
    fitted_on = {"ladder": str(LADDER_MEASURED.relative_to(ROOT)),
                 "variants": f"{VARIANT_RESULTS.relative_to(ROOT)} (chosen in {VARIANTS.relative_to(ROOT)})"}
    out = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": _git("rev-parse", "--short", "HEAD"),
           "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")),
           "command": "python benchmarks/fit_static_model.py " + " ".join(argv if argv is not None else sys.argv[1:]),
           "fit_on": args.fit_on, "fitted_on": fitted_on[args.fit_on], "validated_on": fitted_on[validate_on],
           "objective": ("Spearman rho of estimated_tflops vs measured TFLOP/s (mean over the set's rankings), "
                         "then pairwise accuracy, then smaller mean |log error|"),
           "best": {"latency": best["latency"], "operand_bytes_per_clock": best["operand_bytes_per_clock"],
                    "fit": best["fit"], "validation": best["validation"]},
           "model_constants": {"latency": current.tma_latency, "operand_bytes_per_clock": current.operand_bytes_per_clock},
           "grid": grid}
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n")
    summary = {k: out["best"][k] for k in ("latency", "operand_bytes_per_clock")}
    summary["fit_rho"] = best["fit"]["mean_spearman"]
    summary["validation_rho"] = [r["spearman"] for r in best["validation"]["per_ranking"]]
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
