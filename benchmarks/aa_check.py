"""A/A self-check of the loop's A/B: a kernel against a byte-identical copy of itself, many times over.

    PYTHONPATH=. python benchmarks/aa_check.py --out $OUT                       # on the H200: 3 shapes x 10 x 2
    PYTHONPATH=. python benchmarks/aa_check.py --repeats 3 --timing eager --shape 16x4096x14336

Each repeat is one `evaluator.api.compare` (the comparison a measured `nearpeak run` makes: a fresh sandboxed
process, the candidate's defenses, the paired bootstrap interval) of the kernel against a copy in another
folder, at one shape under one timing. A fair A/B covers 1.0 in about 95% of repeats with a median near 1.0;
anything else is a bias of the measurement, not of the kernels. Writes NAME.json (one record per repeat:
shape, timing, speedup, ci_low, ci_high, device, commit) and NAME.md (coverage and median per shape and
timing) into --out after every repeat, so a cut-short run keeps what it finished.

On a tree that predates the typed request (evaluator.request), the same script drives the old
`api.compare(..., shape=...)`: that is how the "before" table of a change to the A/B is made (eager only).
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.results_meta import markdown_lines, run_metadata
from evaluator import api

KERNEL = ROOT / "kernels" / "sm90" / "bf16" / "v10_split_k.py"
# A decode GEMM (Llama-3-8B MLP down projection at 16 tokens), a skinny one, a large square one.
SHAPES = ["16x4096x14336", "256x8192x8192", "4096x4096x4096"]
TIMINGS = ["eager", "graph"]


def _shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(d) for d in text.lower().split("x"))
    return m, n, k


def compare_once(kernel: Path, copy: Path, shape, timing: str, timeout_s: float) -> dict:
    """One A/A comparison through the evaluator's API (the typed request where this tree has one)."""
    try:
        from evaluator.request import EvalRequest, Problem
    except ImportError:  # an older tree: per-call timing only, the shape as a keyword
        if timing != "eager":
            return {"error": "unsupported", "message": "this tree has no graph-timed A/B"}
        return api.compare(kernel, copy, shape=shape, timeout_s=timeout_s)
    request = EvalRequest(problem=Problem.of([(shape, 1.0)], timing=timing), timeout_s=timeout_s)
    return api.compare(kernel, copy, request)


def summarize(records: list[dict]) -> list[dict]:
    rows = []
    keys = sorted({(tuple(r["shape"]), r["timing"]) for r in records}, key=lambda k: (k[0][0], k[1]))
    for shape, timing in keys:
        done = [r for r in records if tuple(r["shape"]) == shape and r["timing"] == timing and r["speedup"]]
        if not done:
            continue
        covers = sum(r["ci_low"] <= 1.0 <= r["ci_high"] for r in done)
        rows.append({"shape": list(shape), "timing": timing, "repeats": len(done), "covers_one": covers,
                     "coverage": covers / len(done), "median_speedup": statistics.median(r["speedup"] for r in done),
                     "min_speedup": min(r["speedup"] for r in done), "max_speedup": max(r["speedup"] for r in done),
                     "launch_bound": sum(bool(r.get("launch_bound")) for r in done)})
    return rows


def markdown(report: dict) -> str:
    lines = [f"# A/A self-check: {report['kernel']} against a byte-identical copy", "", *markdown_lines(report["meta"]),
             (f"- device: {report['device']}; each repeat one `evaluator.api.compare` in a fresh sandboxed process "
              f"({report['method']})"), "",
             "| shape | timing | repeats | interval covers 1.0 | median speedup | min - max | launch-bound |",
             "|---|---|---|---|---|---|---|"]
    for row in report["summary"]:
        lines.append(f"| {'x'.join(map(str, row['shape']))} | {row['timing']} | {row['repeats']} | "
                     f"{row['covers_one']} of {row['repeats']} ({100 * row['coverage']:.0f}%) | "
                     f"{row['median_speedup']:.4f} | {row['min_speedup']:.4f} - {row['max_speedup']:.4f} | "
                     f"{row['launch_bound']} of {row['repeats']} |")
    failed = [r for r in report["records"] if not r["speedup"]]
    if failed:
        lines += ["", f"{len(failed)} repeat(s) failed: " + "; ".join(f"{r['error']}: {r['message']}"[:160]
                                                                    for r in failed[:5])]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kernel", default=str(KERNEL), help="contract kernel to compare with its copy")
    parser.add_argument("--shape", action="append", help=f"MxNxK (repeatable; default {', '.join(SHAPES)})")
    parser.add_argument("--timing", action="append", choices=TIMINGS, help="eager and/or graph (default both)")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per comparison")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--name", default="aa_check")
    args = parser.parse_args(argv)
    kernel = Path(args.kernel).resolve()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"meta": run_metadata(argv), "kernel": str(kernel.relative_to(ROOT)) if kernel.is_relative_to(ROOT)
              else str(kernel), "device": None, "method": None, "records": [], "summary": []}
    with tempfile.TemporaryDirectory(prefix="nearpeak-aa-") as tmp:
        copy = Path(tmp) / "copy" / kernel.name
        copy.parent.mkdir()
        shutil.copyfile(kernel, copy)
        for text in args.shape or SHAPES:
            shape = _shape(text)
            for timing in args.timing or TIMINGS:
                for repeat in range(args.repeats):
                    started = time.monotonic()
                    result = compare_once(kernel, copy, shape, timing, args.timeout)
                    record = {"shape": list(shape), "timing": timing, "repeat": repeat,
                              "speedup": result.get("speedup"), "ci_low": result.get("ci_low"),
                              "ci_high": result.get("ci_high"), "launch_bound": result.get("launch_bound"),
                              "host_us_per_call": result.get("host_us_per_call"),
                              "gpu_us_per_call": result.get("gpu_us_per_call"),
                              "samples": result.get("samples"),
                              "candidate_status": result.get("candidate_status"),
                              "device": result.get("device"), "error": result.get("error"),
                              "message": result.get("message"), "wall_s": round(time.monotonic() - started, 2),
                              "commit": report["meta"]["git"]["commit"]}
                    report["device"] = report["device"] or result.get("device")
                    report["method"] = report["method"] or result.get("method")
                    report["records"].append(record)
                    report["summary"] = summarize(report["records"])
                    (out / f"{args.name}.json").write_text(json.dumps(report, indent=1) + "\n")
                    (out / f"{args.name}.md").write_text(markdown(report))
                    low, high = record["ci_low"], record["ci_high"]
                    print(f"{text} {timing} #{repeat}: " + (f"{record['speedup']:.4f} [{low:.4f}, {high:.4f}]"
                          if record["speedup"] else f"failed: {record['error']}: {record['message']}"),
                          f"({record['wall_s']} s)", flush=True)
    print(markdown(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
