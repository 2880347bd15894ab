"""How many candidates per GPU-hour the loop evaluates, and where each candidate's seconds go.

Runs one `nearpeak run` (any arguments after `--` go to it unchanged) as a child process, timestamps its
progress lines, then reads the run's ledger: per candidate, the worker seconds of each phase (static stage on a
CPU worker; runtime stage and A/B comparison on the GPU worker) from step.json, and the runtime stage's own
split (load, correctness including the JIT compile, timing) from the evaluation record. The loop's wall time
runs from the end of the starting kernel's evaluation to the run's last line, so run creation is not counted.

    python benchmarks/loop_throughput.py --out benchmarks/results/loop_throughput.json -- \\
        run --target sm90 --from kernels/sm90/bf16/v05_two_warpgroups.py --proposer tune --steps 5 \\
        --candidates 8 --runs-dir /tmp/runs --run-id throughput

`candidates_per_gpu_hour` counts measured candidates (those that reached the runtime stage) per hour of loop
wall time per GPU worker; a run without a GPU of its target has none, and the figure is null.
"""
from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_meta import run_metadata

from agent.ledger import Ledger
from agent.loop import RECORD, STEP

LOOP_STARTS = ("created run ", "resuming ")   # progress lines printed once the run is ready to step


def _option(argv: list[str], name: str, default: str | None = None) -> str | None:
    return argv[argv.index(name) + 1] if name in argv and argv.index(name) + 1 < len(argv) else default


def run_timed(nearpeak_args: list[str]) -> tuple[int, float, float, list[str]]:
    """Run nearpeak; (exit code, whole wall seconds, loop wall seconds, progress lines with time offsets)."""
    started = time.monotonic()
    loop_start = None
    lines = []
    child = subprocess.Popen([sys.executable, "-m", "agent.cli", *nearpeak_args], cwd=ROOT, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
    for line in child.stderr:
        offset = time.monotonic() - started
        if loop_start is None and any(mark in line for mark in LOOP_STARTS):
            loop_start = offset
        lines.append(f"{offset:8.1f} s  {line.rstrip()}")
        print(lines[-1], file=sys.stderr, flush=True)
    child.stdout.read()
    code = child.wait()
    wall = time.monotonic() - started
    return code, wall, wall - (loop_start or 0.0), lines


def _mean(values: list[float]) -> float | None:
    return round(statistics.fmean(values), 3) if values else None


def summarize(run: Path, loop_wall: float, gpu_workers: int) -> dict:
    """Throughput and per-phase seconds from a run's ledger."""
    ledger = Ledger(run)
    rows = []
    for entry in ledger.entries():
        if entry.step == 0:
            continue
        step = json.loads(ledger.read(entry.sha, STEP) or b"{}")
        record = json.loads(ledger.read(entry.sha, RECORD) or b"{}")
        runtime = record.get("runtime") or {}
        rows.append({"step": entry.step, "candidate": entry.candidate, "verdict": entry.verdict,
                     "parent_rank": step.get("parent_rank"), "phases_s": step.get("phases_s") or {},
                     "elapsed_s": step.get("elapsed_s"), "measured": bool(runtime),
                     "runtime_phase_s": runtime.get("phase_seconds") or {}, "device": runtime.get("device"),
                     "tflops_measured": runtime.get("tflops")})
    measured = [r for r in rows if r["measured"]]
    hours = loop_wall / 3600.0
    phases = {name: _mean([r["phases_s"][name] for r in rows if r["phases_s"].get(name) is not None])
              for name in ("static", "runtime", "compare")}
    runtime_split = {name: _mean([r["runtime_phase_s"][name] for r in measured if name in r["runtime_phase_s"]])
                     for name in ("load_s", "correctness_s", "timing_s", "defenses_s", "total_s")}
    gpu_busy = sum((r["phases_s"].get("runtime") or 0) + (r["phases_s"].get("compare") or 0) for r in rows)
    accepted = [r for r in rows if r["verdict"] == "accepted"]
    return {
        "candidates": len(rows), "measured_candidates": len(measured), "gpu_workers": gpu_workers,
        "loop_wall_s": round(loop_wall, 1),
        "candidates_per_gpu_hour": round(len(measured) / hours / gpu_workers, 1) if measured and hours else None,
        "all_candidates_per_hour": round(len(rows) / hours, 1) if hours else None,
        "device": next((r["device"] for r in measured if r["device"]), None),
        "seconds_per_candidate_by_phase": phases,
        "runtime_stage_split_s": runtime_split,
        "gpu_busy_fraction": round(gpu_busy / gpu_workers / loop_wall, 3) if loop_wall else None,
        "accepted": [f"{r['step']}.{r['candidate']}" for r in accepted],
        "accepted_from_a_parent_that_was_not_the_best": [f"{r['step']}.{r['candidate']}" for r in accepted
                                                          if (r["parent_rank"] or 1) > 1],
        "per_candidate": rows,
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ours, nearpeak_args = (argv[:argv.index("--")], argv[argv.index("--") + 1:]) if "--" in argv else (argv, [])
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    parser.add_argument("--out", help="write the JSON result here (default: stdout only)")
    parser.add_argument("--json", action="store_true", help="print the JSON result on stdout")
    args = parser.parse_args(ours)
    if not nearpeak_args or nearpeak_args[0] != "run" or not _option(nearpeak_args, "--run-id"):
        parser.error("give the nearpeak command after --, starting with 'run' and naming --run-id")
    code, wall, loop_wall, lines = run_timed(nearpeak_args)
    run = Path(_option(nearpeak_args, "--runs-dir", "runs")) / _option(nearpeak_args, "--run-id")
    if code != 0 or not run.is_dir():
        print(f"loop_throughput: nearpeak run failed (exit {code}); no run at {run}", file=sys.stderr)
        return 1
    meta = run_metadata(["benchmarks/loop_throughput.py", *argv])
    result = {"benchmark": "loop_throughput", **meta, "run_command": "nearpeak " + " ".join(nearpeak_args),
              "wall_s": round(wall, 1),
              **summarize(run, loop_wall, int(_option(nearpeak_args, "--workers", "1"))),
              "progress": lines}
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if args.json or not args.out:
        print(text)
    print(f"loop_throughput: {result['measured_candidates']} measured of {result['candidates']} candidates in "
          f"{result['loop_wall_s']} s of loop: {result['candidates_per_gpu_hour']} measured candidates per GPU-hour",
          file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
