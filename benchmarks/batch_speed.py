"""How fast `nearpeak eval DIR --jobs N` scores a directory of candidates, and whether a hanging file holds up others.

Issue 17's goal: on a 2-core machine with a warm Triton cache, at least one file per second per core; one
hanging or crashing file never delays the others beyond its own limit. The directory is the test's
(tests/batch_files.py: 24 good knob variants, 2 hanging, 2 crashing, 2 invalid files).

    python benchmarks/batch_speed.py [--jobs 2] [--timeout 20] [--out benchmarks/results]

Three runs of `nearpeak eval PATH... --jobs N --jsonl OUT`, the command a user types:
1. warm-up: the good files once, to fill Triton's cache (not timed);
2. clean: the good and the invalid files, warm cache: files per second, and per core;
3. full: all 30, the hanging ones killed at `--timeout`: how much longer than the clean batch it takes,
   against the bound a hang can cost (its limit, once per job slot it holds).
The machine's load average is recorded with the figures: this machine is shared, and a loaded one is slower;
the CPU time of each run (the command and every process it started) says what a file costs regardless.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from batch_files import write_batch_dir
from results_meta import run_metadata

from evaluator.batch import SANDBOX_KIND, expand_paths, sandboxed_seconds


def timed_batch(paths: list[str], jobs: int, timeout_s: float, out_dir: Path, name: str) -> dict:
    """One `nearpeak eval PATH... --jobs N --jsonl OUT` run: its wall time, the CPU time it and everything it
    started used (the sandbox worker and the children it forked), and its records."""
    jsonl = out_dir / f"{name}.jsonl"
    cpu_before = resource.getrusage(resource.RUSAGE_CHILDREN)
    load_before = os.getloadavg()[0]
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "agent.cli", "eval", *paths, "--jobs", str(jobs), "--jsonl",
                           str(jsonl), "--timeout", str(timeout_s)], capture_output=True, text=True, cwd=ROOT,
                          check=False)
    wall = time.monotonic() - started
    cpu_after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"nearpeak eval failed ({done.returncode}): {done.stderr[-2000:]}")
    records = [json.loads(line) for line in jsonl.read_text().splitlines()]
    cpu = (cpu_after.ru_utime - cpu_before.ru_utime) + (cpu_after.ru_stime - cpu_before.ru_stime)
    return {"files": len(paths), "wall_s": round(wall, 2), "files_per_s": round(len(paths) / wall, 3),
            "cpu_s": round(cpu, 2), "cpu_s_per_file": round(cpu / len(paths), 3),
            "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "own_wall_s": {Path(str(r["file"])).name: sandboxed_seconds(r) for r in records},
            "records": records, "stdout": done.stdout}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0, help="per-file limit, s")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory(prefix="nearpeak-batch-") as tmp:
        folder, logs = Path(tmp) / "candidates", Path(tmp) / "out"
        logs.mkdir()
        expected = write_batch_dir(folder)
        every = expand_paths([str(folder)])
        good = [p for p in every if Path(p).name.startswith("cand_")]
        invalid = [p for p in every if Path(p).name.startswith("invalid_")]
        print("warm-up (fills the Triton cache)", file=sys.stderr)
        timed_batch(good, args.jobs, args.timeout, logs, "warmup")
        print("clean batch", file=sys.stderr)
        clean = timed_batch(good + invalid, args.jobs, args.timeout, logs, "clean")
        print("full batch", file=sys.stderr)
        full = timed_batch(every, args.jobs, args.timeout, logs, "full")
    slots_held = math.ceil(expected["timeout"] / args.jobs)
    good_names = [Path(p).name for p in good]
    crash_s = sum(t for n, t in full["own_wall_s"].items() if n.startswith("crash_") and t)
    meta = run_metadata(None if argv is None else ["benchmarks/batch_speed.py", *argv])
    result = {
        "date": meta["date_utc"], "command": meta["command"], "git": meta["git"],
        "machine": {"cores": cores, "python": platform.python_version(), "platform": platform.platform()},
        "sandbox": SANDBOX_KIND, "jobs": args.jobs, "file_timeout_s": args.timeout,
        "clean": {k: v for k, v in clean.items() if k not in ("records", "stdout")},
        "full": {k: v for k, v in full.items() if k not in ("records", "stdout")},
        "files_per_s_per_core": round(clean["files_per_s"] / min(cores, args.jobs), 3),
        "files_per_cpu_s": round(1 / clean["cpu_s_per_file"], 3),
        "goal_files_per_s_per_core": 1.0,
        "hang_cost_s": round(full["wall_s"] - clean["wall_s"], 2),
        "hang_cost_bound_s": round(slots_held * args.timeout + crash_s / args.jobs, 2),
        "good_file_own_wall_s": {
            "clean_median": statistics.median(clean["own_wall_s"][n] for n in good_names),
            "full_median": statistics.median(full["own_wall_s"][n] for n in good_names),
            "full_max": max(full["own_wall_s"][n] for n in good_names)},
        "statuses_expected": dict(expected),
        "summary": full["stdout"].strip(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "batch_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "batch_speed.md").write_text(markdown(result))
    print(markdown(result))
    return 0


def markdown(r: dict) -> str:
    clean, full = r["clean"], r["full"]
    own = r["good_file_own_wall_s"]
    return f"""# Batch scoring speed (`nearpeak eval DIR --jobs {r['jobs']}`)

Measured {r['date']} on this machine ({r['machine']['cores']} cores, shared with other work: 1-minute load
average {clean['load_average_1min'][0]} to {full['load_average_1min'][1]} during the runs), warm Triton cache,
sandbox: {r['sandbox']}. Made by `{r['command']}` at commit {r['git']['commit']}{' (dirty tree)' if r['git']['dirty'] else ''}.

| batch | files | wall | files/s | CPU time (all processes) | CPU per file |
|---|---|---|---|---|---|
| clean (24 good + 2 invalid) | {clean['files']} | {clean['wall_s']} s | {clean['files_per_s']} | {clean['cpu_s']} s | {clean['cpu_s_per_file']} s |
| full (+ 2 hanging, limit {r['file_timeout_s']:g} s, + 2 crashing) | {full['files']} | {full['wall_s']} s | {full['files_per_s']} | {full['cpu_s']} s | {full['cpu_s_per_file']} s |

- Wall-clock throughput on this loaded machine: **{r['files_per_s_per_core']} files/s per core** (goal
  {r['goal_files_per_s_per_core']}). CPU time per file (worker start, forked children, parent, all included):
  {clean['cpu_s_per_file']} s, i.e. **{r['files_per_cpu_s']} files per CPU-second**, which is what a core of
  its own would deliver (an estimate from CPU time, not a run on an idle machine).
- The hanging and crashing files made the batch {r['hang_cost_s']} s longer than the clean one; what they alone
  account for is {r['hang_cost_bound_s']} s (the {r['file_timeout_s']:g} s limit once per job slot the hanging files
  hold at the same time, plus the crashing files' own time spread over the slots); the other
  {round(r['hang_cost_s'] - r['hang_cost_bound_s'], 2)} s they do not explain (the load average moved from
  {clean['load_average_1min'][0]} to {full['load_average_1min'][1]} between the runs). Each good file's own sandboxed time: median {own['clean_median']} s in the clean batch,
  {own['full_median']} s (max {own['full_max']} s) beside the hanging and crashing ones: a hang costs its own job slot
  for its own limit, nothing more.

Summary table of the full batch, as `nearpeak eval` prints it:

```
{r['summary']}
```
"""


if __name__ == "__main__":
    sys.exit(main())
