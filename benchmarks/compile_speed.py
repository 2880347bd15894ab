"""How long `nearpeak eval` takes on this machine: cold (empty Triton cache) and from the cache.

Targets (issue 2): a cold eval of a 256x256-tile gfx950 kernel, interpreter start included, <= 3 s wall on
a 2-core machine; a repeat served from Triton's cache <= 0.5 s of compile time.

    python benchmarks/compile_speed.py [KERNEL] [--repeats 3] [--out benchmarks/results]
"""
from __future__ import annotations

import argparse
import datetime
import json
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
sys.path.insert(0, str(ROOT))

from benchmarks.results_meta import git_state


def _children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_eval(kernel: str, cache_dir: str) -> tuple[float, float, dict]:
    """(wall s, CPU s of the whole process tree: the CLI, its sandbox worker and the forked stage, the record)."""
    env = {**os.environ, "TRITON_CACHE_DIR": cache_dir}
    cpu0 = _children_cpu_s()
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "evaluator", kernel, "--json", "--static-only"], capture_output=True,
                         text=True, env=env, cwd=ROOT, check=False)
    wall = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"eval failed: {out.stderr or out.stdout}")
    return wall, _children_cpu_s() - cpu0, json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("kernel", nargs="?", default="kernels/gfx950/fp16/v00_naive.py")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    args = parser.parse_args()
    cold, warm = [], []
    for n in range(args.repeats):
        with tempfile.TemporaryDirectory() as cache:
            wall, cpu, record = timed_eval(args.kernel, cache)
            cold.append({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "compile_s": record["compile_seconds"]})
            wall, cpu, record = timed_eval(args.kernel, cache)
            warm.append({"wall_s": round(wall, 3), "cpu_s": round(cpu, 3), "compile_s": record["compile_seconds"]})
        print(f"run {n + 1}: cold {cold[-1]}  cached {warm[-1]}", file=sys.stderr)
    import triton

    result = {
        "what": f"nearpeak eval --static-only of {args.kernel} (target {record['target']}, tile "
                f"{record['knobs'].get('BLOCK_M')}x{record['knobs'].get('BLOCK_N')}), subprocess wall time "
                "including interpreter start",
        "where": f"{platform.node()} ({os.cpu_count()} cores, {platform.machine()}), no GPU, load average "
                 f"{os.getloadavg()[0]:.1f} (wall times stretch with load; CPU seconds much less)",
        "versions": {"python": platform.python_version(), "triton": triton.__version__},
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": "python benchmarks/compile_speed.py " + " ".join(sys.argv[1:]),
        "git": git_state(),
        "cold": cold, "cached": warm,
        "cold_wall_median_s": statistics.median(c["wall_s"] for c in cold),
        "cold_cpu_median_s": statistics.median(c["cpu_s"] for c in cold),
        "cached_cpu_median_s": statistics.median(c["cpu_s"] for c in warm),
        "cached_compile_median_s": statistics.median(c["compile_s"] for c in warm),
        "cached_wall_median_s": statistics.median(c["wall_s"] for c in warm),
        "targets": {"cold_wall_s": 3.0, "cached_compile_s": 0.5},
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "compile_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    (out / "compile_speed.md").write_text(
        f"# Compile-only evaluation speed\n\n{result['what']}.\n\nWhere: {result['where']}; triton "
        f"{triton.__version__}; {result['date']}.\nCommand: `{result['command']}`\nGit commit: "
        f"{result['git']['commit']}{' (dirty tree)' if result['git']['dirty'] else ''}\n\n"
        "| measure | median | target |\n|---|---|---|\n"
        f"| cold eval, wall (empty cache) | {result['cold_wall_median_s']:.2f} s | <= 3 s |\n"
        f"| cold eval, CPU user+sys of the process tree | {result['cold_cpu_median_s']:.2f} s | - |\n"
        f"| cached eval, CPU user+sys of the process tree | {result['cached_cpu_median_s']:.2f} s | - |\n"
        f"| cached eval, compile time | {result['cached_compile_median_s']:.3f} s | <= 0.5 s |\n"
        f"| cached eval, wall | {result['cached_wall_median_s']:.2f} s | - |\n")
    print((out / "compile_speed.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
