"""Score public GEMM tutorial files as stored (kept outside this project) through `nearpeak eval`'s batch mode.

    python benchmarks/foreign_tutorials.py [--tutorials /work/tutorials] [--jobs 2]

The files live under TUTORIALS/<owner>/<repo>/<path> with TUTORIALS/sources.json naming each one's repository,
path and commit; benchmarks/foreign_tutorials/nearpeak-manifest.toml says how to call each. Writes
benchmarks/results/foreign_tutorials.json and .md: per file its source, status, line and reason, and the
compiler's figures and static estimates of what scored.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.batch import ScoreOptions, plan_batch, run_batch
from evaluator.report import batch_registers

MANIFEST = ROOT / "benchmarks" / "foreign_tutorials" / "nearpeak-manifest.toml"
RESULTS = ROOT / "benchmarks" / "results"
NOTES = ROOT / "benchmarks" / "foreign_tutorials" / "NOTES.md"  # why files fail, which versions were read: appended


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tutorials", default="/work/tutorials")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    root = Path(args.tutorials).resolve()
    sources = json.loads((root / "sources.json").read_text())
    folders = sorted(str(root / owner) for owner in {key.split("/")[0] for key in sources})
    options = ScoreOptions(manifest=str(MANIFEST))
    started = time.monotonic()
    records = run_batch(plan_batch(folders, options), options, jobs=args.jobs)
    wall = time.monotonic() - started
    rows = []
    for record in sorted(records, key=lambda r: str(r["file"])):
        key = str(Path(record["file"]).resolve().relative_to(root))
        source = sources.get(key, {})
        st = record.get("static") or {}
        rows.append({
            "file": key, "repo": source.get("repo"), "path": source.get("path"), "commit": source.get("commit"),
            "target": record.get("target"), "entry": record.get("entry"), "args": record.get("args"),
            "status": record["status"], "line": record.get("line"), "reason": record.get("message"),
            "kernel": st.get("kernel"), "registers_per_thread": batch_registers(st) or None,
            "spills": st.get("spills"), "occupancy": st.get("occupancy"),
            "estimated_tflops": st.get("estimated_tflops"), "estimated_loop_efficiency": st.get("estimated_efficiency"),
            "skipped_at_import": [{k: s[k] for k in ("line", "cause", "reason")}
                                  for s in record.get("skipped_at_import") or []],
        })
    scored = sum(r["status"] == "ok" for r in rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout
    command = (f"python benchmarks/foreign_tutorials.py --tutorials {args.tutorials} --jobs {args.jobs}  (= nearpeak eval "
               f"{' '.join(folders)} --manifest {MANIFEST.relative_to(ROOT)} --jobs {args.jobs})")
    summary = {"command": command, "project_commit": commit.strip(), "triton": records[0].get("triton_version"),
               "files": len(rows), "scored": scored, "wall_s": round(wall, 1), "rows": rows,
               "figures": "registers, spills, occupancy: compiler output; estimated TFLOP/s and loop efficiency: "
                          "STATIC ESTIMATE (no GPU ran anything)"}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "foreign_tutorials.json").write_text(json.dumps(summary, indent=1) + "\n")
    share = f"{100 * scored / len(rows):.0f}%" if rows else "-"
    lines = [f"# Public GEMM tutorials scored as stored ({scored} of {len(rows)} scored, {share})", "",
             (f"Command: `{command}`; project commit {summary['project_commit']}, Triton {summary['triton']}, CPU "
             f"only, {summary['wall_s']} s. Registers, spills, occupancy: compiler output. est. TFLOP/s and loop "
             "efficiency (matrix-unit busy fraction of one CTA's hot-loop iteration): STATIC ESTIMATE."), "",
             ("| file | repo | commit | status | line: reason | kernel | registers/thread | spills | est. TFLOP/s | "
             "est. loop eff. | skipped at import (line: cause) |"), "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        why = "" if r["status"] == "ok" else f"{r['line'] or '-'}: {r['reason']}".replace("|", "\\|")
        eff = f"{100 * r['estimated_loop_efficiency']:.1f}%" if r["estimated_loop_efficiency"] is not None else ""
        skipped = ", ".join(f"{s['line']}: {s['cause']}" for s in r["skipped_at_import"])
        lines.append(f"| {r['path']} | {r['repo']} | {(r['commit'] or '')[:12]} | {r['status']} | {why} | "
                     f"{r['kernel'] or ''} | {r['registers_per_thread'] or ''} | {r['spills'] if r['spills'] is not None else ''} | "
                     f"{r['estimated_tflops'] or ''} | {eff} | "
                     f"{skipped} |")
    notes = NOTES.read_text() if NOTES.is_file() else ""
    (RESULTS / "foreign_tutorials.md").write_text("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
