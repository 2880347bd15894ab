"""Scaling of the loop over the GPUs of one host: the same tune run with 1, 2, 4 workers, locally and with Ray.

Each configuration runs the same `nearpeak run` (same starting kernel, proposer, steps, candidates and seed)
with `--workers N` (local executor) or `--executor ray --workers N` (a Ray instance local to this host with N
GPUs), timed by benchmarks/loop_throughput.py's driver. Per configuration it records the loop's wall time,
candidates per hour, the GPU workers' busy fraction, whether the ledger is whole (no lost or duplicated
candidate, `git fsck` clean) and whether every accept decision matches the one-worker run of the same
executor for the same candidate (same kernel proposed from the same parent kernel).

    python benchmarks/loop_scaling.py --target sm90 --from kernels/sm90/bf16/v05_two_warpgroups.py \\
        --steps 5 --candidates 8 --workers 1,2,4 --executors local,ray -- --knob NUM_STAGES=2,3,4,5

Arguments after `--` go to every `nearpeak run` unchanged. Configurations that need more GPUs than this host
shows (`nvidia-smi -L`, or `--gpus`) are skipped and listed as such. Writes --out (JSON, one record per
(executor, workers) with `workers`, `candidates_per_hour` and `speedup_vs_1`) and the same path with .md.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from loop_throughput import run_timed, summarize
from results_meta import markdown_lines, run_metadata

from agent.ledger import Ledger


def visible_gpus() -> int:
    """GPUs `nvidia-smi -L` lists (0 without the tool)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(line.startswith("GPU ") for line in out.splitlines())


def decisions(run: Path) -> dict[tuple[str, str], str]:
    """(kernel sha256, parent kernel sha256) -> verdict, for every judged candidate of a run."""
    ledger = Ledger(run)
    entries = ledger.entries()
    kernel_of = {e.sha: e.trailers.get("Kernel-Sha256", "") for e in entries}
    return {(e.trailers.get("Kernel-Sha256", ""), kernel_of.get(e.parent, "")): e.verdict
            for e in entries if e.step > 0}


def whole(run: Path) -> dict:
    """Lost or duplicated candidates and the repository's health."""
    ledger = Ledger(run)
    entries = [e for e in ledger.entries() if e.step > 0]
    numbers = [(e.step, e.candidate) for e in entries]
    intact, detail = ledger.fsck()
    return {"entries": len(entries), "duplicated_numbers": len(numbers) - len(set(numbers)),
            "waiting_unjudged": len(ledger.proposals()), "fsck_clean": intact, "fsck_detail": detail[:500]}


def match(reference: dict, other: dict) -> dict:
    """Decisions on the candidates both runs judged; `all_match` is None when they judged none in common (the
    comparison says nothing then)."""
    common = set(reference) & set(other)
    differ = sorted(f"{k[0][:12]} from {k[1][:12]}: {reference[k]} vs {other[k]}" for k in common
                    if reference[k] != other[k])
    return {"common_candidates": len(common), "decisions_differ": differ,
            "all_match": (not differ) if common else None}


def run_config(args, executor: str, workers: int, runs_dir: Path, extra: list[str]) -> tuple[dict, Path | None]:
    run_id = f"scale-{executor}-{workers}"
    # Each configuration gets its own runs directory: the tune cache is shared per runs directory, and a shared
    # one would steer later configurations away from the settings earlier ones rejected (different candidates).
    runs_dir = runs_dir / run_id
    argv = ["run", "--target", args.target, "--from", args.from_file, "--proposer", args.proposer,
            "--steps", str(args.steps), "--candidates", str(args.candidates), "--seed", str(args.seed),
            "--runs-dir", str(runs_dir), "--run-id", run_id, "--workers", str(workers), *extra]
    if executor == "ray":
        argv += ["--executor", "ray"]
    code, wall, loop_wall, _ = run_timed(argv)
    run = runs_dir / run_id
    if code != 0 or not run.is_dir():
        return {"executor": executor, "workers": workers, "error": f"nearpeak run exited {code}"}, None
    summary = summarize(run, loop_wall, workers)
    hours = loop_wall / 3600.0
    return {"executor": executor, "workers": workers, "command": "nearpeak " + " ".join(argv),
            "wall_s": round(wall, 1), "loop_wall_s": summary["loop_wall_s"], "candidates": summary["candidates"],
            "measured_candidates": summary["measured_candidates"],
            "candidates_per_hour": round(summary["candidates"] / hours, 1) if hours else None,
            "measured_candidates_per_hour": round(summary["measured_candidates"] / hours, 1) if hours else None,
            "gpu_busy_fraction_per_worker": summary["gpu_busy_fraction"], "device": summary["device"],
            "ledger": whole(run)}, run


def markdown(result: dict) -> str:
    lines = ["# Loop scaling", "", *markdown_lines(result), f"- host GPUs: {result['gpus']}",
             f"- base command: `{result['base']}`", "",
             ("| executor | workers | loop wall s | candidates | per hour | speedup vs 1 | GPU busy | decisions "
             "match | ledger whole |"),
             "|---|---|---|---|---|---|---|---|---|"]
    for r in result["records"]:
        if "error" in r or "skipped" in r:
            lines.append(f"| {r['executor']} | {r['workers']} | {r.get('error') or r.get('skipped')} |||||||")
            continue
        ledger = r["ledger"]
        ok = ledger["fsck_clean"] and not ledger["duplicated_numbers"] and not ledger["waiting_unjudged"]
        lines.append(f"| {r['executor']} | {r['workers']} | {r['loop_wall_s']} | {r['candidates']} | "
                     f"{r['candidates_per_hour']} | {r['speedup_vs_1']} | {r['gpu_busy_fraction_per_worker']} | "
                     f"{r['decisions_vs_1']['all_match'] if r.get('decisions_vs_1') else '-'} | {ok} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, extra = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--target", default="sm90")
    parser.add_argument("--from", dest="from_file", default="kernels/sm90/bf16/v05_two_warpgroups.py")
    parser.add_argument("--proposer", default="tune")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--candidates", type=int, default=8)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--workers", default="1,2,4", help="worker counts to run (default 1,2,4)")
    parser.add_argument("--executors", default="local,ray", help="executors to run (default local,ray)")
    parser.add_argument("--gpus", type=int, help="GPUs on this host (default: nvidia-smi -L)")
    parser.add_argument("--runs-dir", help="keep the runs here (default: a temporary directory)")
    parser.add_argument("--out", default="benchmarks/results/loop_scaling.json")
    args = parser.parse_args(ours)
    counts = sorted({int(w) for w in args.workers.split(",")})
    executors = [e for e in args.executors.split(",") if e]
    gpus = args.gpus if args.gpus is not None else visible_gpus()
    runs_dir = Path(args.runs_dir or tempfile.mkdtemp(prefix="nearpeak-scaling-"))
    base = (f"nearpeak run --target {args.target} --from {args.from_file} --proposer {args.proposer} --steps "
            f"{args.steps} --candidates {args.candidates} --seed {args.seed} " + " ".join(extra))
    records: list[dict] = []
    meta = run_metadata(["benchmarks/loop_scaling.py", *argv])
    result = {"benchmark": "loop_scaling", **meta, "gpus": gpus, "base": base, "runs_dir": str(runs_dir),
              "records": records}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)

    def save() -> None:  # after every configuration: a call cut short keeps what it finished
        out.write_text(json.dumps(result, indent=1) + "\n")
        out.with_suffix(".md").write_text(markdown(result))

    for executor in executors:
        reference_rate, reference_run = None, None
        for workers in counts:
            if workers > max(gpus, 1):  # without a GPU only the static (CPU) path runs, with one worker
                records.append({"executor": executor, "workers": workers,
                                "skipped": f"needs {workers} GPUs, this host shows {gpus}"})
                continue
            record, run = run_config(args, executor, workers, runs_dir, extra)
            if run is not None:
                if workers == counts[0]:
                    reference_rate, reference_run = record["candidates_per_hour"], run
                record["speedup_vs_1"] = (round(record["candidates_per_hour"] / reference_rate, 3)
                                          if reference_rate and counts[0] == 1 else None)
                record["decisions_vs_1"] = (match(decisions(reference_run), decisions(run))
                                            if reference_run is not None and counts[0] == 1 else None)
            records.append(record)
            save()
    save()
    print(markdown(result))
    return 0 if all("error" not in r for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
