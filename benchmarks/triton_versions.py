"""Every reference stage of every target compiled on several Triton releases, side by side.

Each release lives in its own venv with this tree installed (`pip install -e .` beside `triton==X`); this script
runs `nearpeak ladder --target T --json` with each venv's interpreter and writes one JSON file with every row and
one markdown table per target: compile status, registers, spill bytes and the static estimate of TFLOP/s of each
stage on each release. Compile-only, on the CPU: every figure is compiler output or a static estimate.

    python benchmarks/triton_versions.py --venv /work/main/.venv --venv /work/venvs/t37 ... \\
        --out benchmarks/results/triton_versions
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.results_meta import markdown_lines, run_metadata

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ("gfx950", "sm90", "gfx942", "sm100")
ROW_FIELDS = ("stage", "file", "status", "message", "registers", "spills", "hot_loop_spills", "shared_bytes",
              "estimated_tflops", "estimated_efficiency")


@dataclass(frozen=True)
class Release:
    version: str
    python: str


def release_of(venv: str) -> Release:
    python = str(Path(venv) / "bin" / "python")
    out = subprocess.run([python, "-c", "import triton; print(triton.__version__)"], capture_output=True, text=True,
                         check=True, timeout=120)
    return Release(out.stdout.strip().splitlines()[-1], python)


def ladder(release: Release, target: str, timeout_s: float) -> dict:
    """`nearpeak ladder --target T --json` on `release`: its stage rows, or why none came back."""
    command = [release.python, "-m", "agent.cli", "ladder", "--target", target, "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s, check=False)
    try:
        stages = json.loads(done.stdout)["stages"]
    except (json.JSONDecodeError, KeyError):
        return {"exit_code": done.returncode, "stages": [], "error": done.stderr.strip().splitlines()[-1:]}
    return {"exit_code": done.returncode, "stages": [{k: row.get(k) for k in ROW_FIELDS} for row in stages]}


def _cell(row: dict | None) -> str:
    if row is None:
        return "-"
    if row["status"] != "ok":
        return f"**{row['status']}**"
    tflops = row["estimated_tflops"]
    return f"{row['registers']} / {row['spills']} / {'-' if tflops is None else round(tflops)}"


def markdown(results: dict, meta: dict, targets: tuple[str, ...]) -> str:
    versions = list(results)
    intro = ("Compile-only, on the CPU (no GPU involved): each stage compiled for its target at its benchmark "
             "shape with its default knobs by `nearpeak ladder --target T --json` under a venv holding that Triton "
             "(torch 2.13.0 CPU beside it).")
    legend = ("Each cell: **registers / spill bytes** (compiler output: the record's `registers` and `spills`, "
              "from ptxas -v for sm90/sm100 and from the AMDGPU metadata for gfx950/gfx942) / **estimated "
              "TFLOP/s** (a STATIC ESTIMATE of the whole kernel, docs/static-model.md, made by the static model of "
              "the commit below; not a measurement; the model is being revised, so these estimates will move, "
              "while the compile status, registers and spills are the compiler's). A bold word is the stage's "
              "failure status.")
    lines = ["# Reference stages on Triton " + ", ".join(versions), "", intro, "", legend, "",
             *markdown_lines(meta), ""]
    for target in targets:
        rows = {v: {r["stage"]: r for r in results[v][target]["stages"]} for v in versions}
        stages = list(dict.fromkeys(s for v in versions for s in rows[v]))
        ok = {v: sum(r["status"] == "ok" for r in rows[v].values()) for v in versions}
        lines += [f"## {target}", "", "| stage | " + " | ".join(f"Triton {v}" for v in versions) + " |",
                  "|---|" + "---|" * len(versions),
                  "| stages compiling | " + " | ".join(f"{ok[v]}/{len(rows[v])}" for v in versions) + " |"]
        lines += [f"| {s} | " + " | ".join(_cell(rows[v].get(s)) for v in versions) + " |" for s in stages]
        lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--venv", action="append", required=True, help="a venv with one Triton release (repeat)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/triton_versions"),
                        help="path stem: writes STEM.json and STEM.md")
    parser.add_argument("--target", action="append", choices=TARGETS, help="only these targets (default: all)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per ladder")
    args = parser.parse_args(argv)
    meta = run_metadata(argv)
    targets = tuple(args.target or TARGETS)
    results = {}
    for release in map(release_of, args.venv):
        results[release.version] = {}
        for target in targets:
            print(f"Triton {release.version}: ladder {target}", file=sys.stderr, flush=True)
            results[release.version][target] = ladder(release, target, args.timeout)
    stem = Path(args.out)
    stem.parent.mkdir(parents=True, exist_ok=True)
    stem.with_suffix(".json").write_text(json.dumps({**meta, "kind": "compiler output and static estimates",
                                                     "releases": results}, indent=2) + "\n")
    stem.with_suffix(".md").write_text(markdown(results, meta, targets) + "\n")
    print(stem.with_suffix(".md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
