"""How fast `nearpeak eval DIR --jobs N` scores a directory of candidates, and whether a hanging file holds up others.

Issue 17's goal: on a 2-core machine with a warm Triton cache, at least one file per second per core; one
hanging or crashing file never delays the others beyond its own limit. The directory is the test's
(tests/batch_files.py: 24 good knob variants, 2 hanging, 2 crashing, 2 invalid files).

    python benchmarks/batch_speed.py [--jobs 2] [--timeout 20] [--out benchmarks/results]

Three batches through `evaluator.batch.run_batch`, the code behind `nearpeak eval DIR`:
1. warm-up: the good files once, to fill Triton's cache (not timed);
2. clean: the good and the invalid files, warm cache: files per second, and per core;
3. full: all 30, the hanging ones killed at `--timeout`: how much longer than the clean batch it takes,
   against the bound a hang can cost (its limit, once per job slot it holds).
The machine's load average is recorded with the figures: this machine is shared, and a loaded one is slower.
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from batch_files import write_batch_dir

from evaluator.batch import (
    SANDBOX_KIND,
    ScoreOptions,
    expand_paths,
    run_batch,
    sandboxed_seconds,
    summary_table,
)


def timed_batch(paths: list[str], options: ScoreOptions, jobs: int) -> dict:
    """Run one batch; per file: when it finished (s after the start) and its own sandboxed wall time."""
    finished: dict[str, float] = {}
    started = time.monotonic()
    load_before = os.getloadavg()[0]

    def on_file(path: str, records: list[dict], done: int, total: int) -> None:
        finished[path] = time.monotonic() - started
        print(f"  [{done}/{total}] {Path(path).name}: {', '.join(r['status'] for r in records)}", file=sys.stderr)

    records = run_batch(paths, options, jobs=jobs, on_file=on_file)
    wall = time.monotonic() - started
    own = {Path(str(r["file"])).name: sandboxed_seconds(r) for r in records}
    return {"files": len(paths), "wall_s": round(wall, 2), "files_per_s": round(len(paths) / wall, 3),
            "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "finished_at_s": {Path(p).name: round(t, 2) for p, t in finished.items()}, "own_wall_s": own,
            "records": records}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=20.0, help="per-file limit, s")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    options = ScoreOptions(timeout_s=args.timeout)
    with tempfile.TemporaryDirectory(prefix="nearpeak-batch-") as tmp:
        expected = write_batch_dir(Path(tmp))
        every = expand_paths([tmp])
        good = [p for p in every if Path(p).name.startswith("cand_")]
        invalid = [p for p in every if Path(p).name.startswith("invalid_")]
        print("warm-up (fills the Triton cache)", file=sys.stderr)
        timed_batch(good, options, args.jobs)
        print("clean batch", file=sys.stderr)
        clean = timed_batch(good + invalid, options, args.jobs)
        print("full batch", file=sys.stderr)
        full = timed_batch(every, options, args.jobs)
    slots_held = math.ceil(expected["timeout"] / args.jobs)
    good_names = [Path(p).name for p in good]
    crash_s = sum(t for n, t in full["own_wall_s"].items() if n.startswith("crash_") and t)
    result = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": {"cores": cores, "python": platform.python_version(), "platform": platform.platform()},
        "sandbox": SANDBOX_KIND, "jobs": args.jobs, "file_timeout_s": args.timeout,
        "clean": {k: v for k, v in clean.items() if k != "records"},
        "full": {k: v for k, v in full.items() if k != "records"},
        "files_per_s_per_core": round(clean["files_per_s"] / min(cores, args.jobs), 3),
        "goal_files_per_s_per_core": 1.0,
        "hang_cost_s": round(full["wall_s"] - clean["wall_s"], 2),
        "hang_cost_bound_s": round(slots_held * args.timeout + crash_s / args.jobs, 2),
        "good_file_own_wall_s": {
            "clean_median": statistics.median(clean["own_wall_s"][n] for n in good_names),
            "full_median": statistics.median(full["own_wall_s"][n] for n in good_names),
            "full_max": max(full["own_wall_s"][n] for n in good_names)},
        "statuses_expected": dict(expected),
        "summary": summary_table(full["records"]),
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
sandbox: {r['sandbox']}. Made by `python benchmarks/batch_speed.py --jobs {r['jobs']} --timeout {r['file_timeout_s']:g}`.

| batch | files | wall | files/s |
|---|---|---|---|
| clean (24 good + 2 invalid) | {clean['files']} | {clean['wall_s']} s | {clean['files_per_s']} |
| full (+ 2 hanging, limit {r['file_timeout_s']:g} s, + 2 crashing) | {full['files']} | {full['wall_s']} s | {full['files_per_s']} |

- **{r['files_per_s_per_core']} files/s per core** (goal {r['goal_files_per_s_per_core']}).
- The hanging and crashing files cost the batch {r['hang_cost_s']} s against a bound of {r['hang_cost_bound_s']} s
  (the hang limit once per job slot the hanging files hold, plus the crashing files' own time spread over the
  slots); each good file's own sandboxed time: median {own['clean_median']} s in the clean batch,
  {own['full_median']} s (max {own['full_max']} s) beside the hanging and crashing ones.

Summary table of the full batch, as `nearpeak eval` prints it:

```
{r['summary']}
```
"""


if __name__ == "__main__":
    sys.exit(main())
