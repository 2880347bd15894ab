"""Score public GEMM tutorial files as stored (kept outside this project) through `nearpeak eval`'s batch mode.

    python benchmarks/foreign_tutorials.py [--set triton36|triton39|census|census39] [--tutorials DIR] [--jobs 2]

Each set is the files read at one Triton release, with its own stored version per path: `triton36` (under
/work/tutorials, benchmarks/foreign_tutorials/nearpeak-manifest.toml, run with Triton 3.6.0) and `triton39`
(under /work/tutorials39, nearpeak-manifest-triton39.toml, run with a Triton 3.9.0 venv). `census` is every GEMM
kernel file of ROCm/gfx950-gluon-tutorials at its newest stored version (under /work/tutorials_census,
nearpeak-manifest-census.toml), scored at 3.6.0; `census39` is the same files and manifest at 3.9.0. A census
scores exactly the files its manifest names, so the helper modules they import (`common.py`) are not rows. The
files live under
TUTORIALS/<owner>/<repo>/<path> with TUTORIALS/sources.json naming each one's repository, path and commit; the
manifest says how to call each. A set refuses to run under another Triton than the one it was read for. Writes
benchmarks/results/<stem>.json and .md: per file its source, status, line and reason, the GPU allocations by
name its host code made on `meta`, and the compiler's figures and static estimates of what scored.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from evaluator.batch import ScoreOptions, plan_batch, run_batch
from evaluator.manifest import read_manifest
from evaluator.report import batch_registers

HERE = ROOT / "benchmarks" / "foreign_tutorials"
RESULTS = ROOT / "benchmarks" / "results"


@dataclass(frozen=True)
class TutorialSet:
    """The files read at one Triton release: where they are stored, how each is called, where results go."""

    triton: str          # the release its versions were chosen for; the run refuses any other
    tutorials: str       # default folder of the stored files (and their sources.json)
    manifest: Path
    stem: str            # benchmarks/results/<stem>.json and .md
    notes: Path          # why files fail, which versions were read: appended to the .md
    manifest_files_only: bool = False  # score the files the manifest names, not every file under the folders
    listed: Path | None = None  # every file the set is meant to hold (repo path, commit); unsaved ones are not_read
    notes_section: str | None = None  # append only this "## " section of `notes` (None: all of it)


CENSUS_NOTES = "## Census of ROCm/gfx950-gluon-tutorials"

SETS = {
    "triton36": TutorialSet("3.6.0", "/work/tutorials", HERE / "nearpeak-manifest.toml", "foreign_tutorials",
                            HERE / "NOTES.md"),
    "triton39": TutorialSet("3.9.0", "/work/tutorials39", HERE / "nearpeak-manifest-triton39.toml",
                            "foreign_tutorials_triton39", HERE / "NOTES_triton39.md"),
    "census": TutorialSet("3.6.0", "/work/tutorials_census", HERE / "nearpeak-manifest-census.toml",
                          "foreign_tutorials_census", HERE / "NOTES.md", manifest_files_only=True,
                          listed=HERE / "census-files.txt", notes_section=CENSUS_NOTES),
    "census39": TutorialSet("3.9.0", "/work/tutorials_census", HERE / "nearpeak-manifest-census.toml",
                            "foreign_tutorials_census_triton39", HERE / "NOTES.md", manifest_files_only=True,
                            listed=HERE / "census-files.txt", notes_section=CENSUS_NOTES),
}


CENSUS_REPO = "ROCm/gfx950-gluon-tutorials"


def not_read_rows(chosen: TutorialSet, sources: dict, scored_paths: set) -> list[dict]:
    """A row for each listed file that is not stored (so not scored): the census counts it, and says why."""
    if chosen.listed is None:
        return []
    rows = []
    for line in chosen.listed.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        path, commit, versions = line.split()
        if path in scored_paths or f"{CENSUS_REPO}/{path}" in sources:
            continue
        rows.append({"file": f"{CENSUS_REPO}/{path}", "repo": CENSUS_REPO, "path": path, "commit": commit,
                     "target": None, "entry": None, "args": None, "status": "not_read", "line": None,
                     "reason": (f"not read from the index in this session (listed at this commit, {versions} "
                                "stored version(s)); not scored"),
                     "kernel": None, "registers_per_thread": None, "spills": None, "occupancy": None,
                     "estimated_tflops": None, "estimated_loop_efficiency": None, "skipped_at_import": [],
                     "meta_allocations": []})
    return rows


def series_folder(path: str) -> str:
    """The folder of a tutorial series: the file's folder without a trailing stage folder (`v3_lds/`)."""
    return re.sub(r"/v\d+[^/]*$", "", str(Path(path).parent))


def folder_summary(rows: list[dict]) -> list[str]:
    """Scored of all, per series folder: the census headline."""
    folders: dict[str, list[int]] = {}
    for r in rows:
        counts = folders.setdefault(series_folder(r["path"] or r["file"]), [0, 0, 0])
        counts[0] += r["status"] == "ok"
        counts[1] += r["status"] != "not_read"
        counts[2] += 1
    lines = ["| folder | scored | read | files |", "|---|---|---|---|"]
    lines += [f"| {name} | {ok} | {read} | {total} |" for name, (ok, read, total) in sorted(folders.items())]
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--set", choices=sorted(SETS), default="triton36")
    parser.add_argument("--tutorials", help="folder of the stored files (default: the set's)")
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    chosen = SETS[args.set]
    import triton

    if triton.__version__ != chosen.triton:
        print(f"foreign_tutorials: the {args.set} set was read for Triton {chosen.triton}, but this Python has "
              f"Triton {triton.__version__}; run it with a venv that has {chosen.triton}", file=sys.stderr)
        return 2
    MANIFEST, NOTES = chosen.manifest, chosen.notes
    args.tutorials = args.tutorials or chosen.tutorials
    root = Path(args.tutorials).resolve()
    sources = json.loads((root / "sources.json").read_text())
    folders = sorted(str(root / owner) for owner in {key.split("/")[0] for key in sources})
    if chosen.manifest_files_only:
        folders = sorted(str(path) for path in read_manifest(MANIFEST).files)
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
            "meta_allocations": [{k: a[k] for k in ("line", "call", "device", "sibling")}
                                 for a in record.get("meta_allocations") or []],
        })
    if chosen.listed:
        rows += not_read_rows(chosen, sources, {r["path"] for r in rows})
        rows.sort(key=lambda r: r["path"] or r["file"])
    scored = sum(r["status"] == "ok" for r in rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                            check=False).stdout
    named = (f"the {len(folders)} files it names" if chosen.manifest_files_only else " ".join(folders))
    command = (f"python benchmarks/foreign_tutorials.py --set {args.set} --tutorials {args.tutorials} --jobs "
               f"{args.jobs}  (= nearpeak eval "
               f"{named} --manifest {MANIFEST.relative_to(ROOT)} --jobs {args.jobs})")
    summary = {"command": command, "set": args.set, "python": sys.executable, "project_commit": commit.strip(),
               "triton": records[0].get("triton_version"),
               "files": len(rows), "scored": scored, "wall_s": round(wall, 1), "rows": rows,
               "figures": "registers, spills, occupancy: compiler output; estimated TFLOP/s and loop efficiency: "
                          "STATIC ESTIMATE (no GPU ran anything)"}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{chosen.stem}.json").write_text(json.dumps(summary, indent=1) + "\n")
    share = f"{100 * scored / len(rows):.0f}%" if rows else "-"
    title = (f"# Census: every GEMM kernel file of {CENSUS_REPO} (newest stored versions) at Triton {chosen.triton}"
             if chosen.listed else f"# Public GEMM tutorials read at Triton {chosen.triton}")
    unread = sum(r["status"] == "not_read" for r in rows)
    read_share = f"; {scored} of the {len(rows) - unread} read" if unread else ""
    lines = [f"{title}, scored as stored ({scored} of {len(rows)} scored, {share}{read_share})", "",
             (f"Command: `{command}`; project commit {summary['project_commit']}, Triton {summary['triton']}, CPU "
             f"only, {summary['wall_s']} s. Registers, spills, occupancy: compiler output. est. TFLOP/s and loop "
             "efficiency (matrix-unit busy fraction of one CTA's hot-loop iteration): STATIC ESTIMATE. "
             "\"on meta\": the host code's GPU allocations by name (`device=\"cuda\"`, `.cuda()`, `.to(\"cuda\")`) "
             "that the compile-only scorer made on the storage-less meta device while the entry ran."), "",
             ("| file | repo | commit | status | line: reason | kernel | registers/thread | spills | est. TFLOP/s | "
             "est. loop eff. | skipped at import (line: cause) | on meta (line: call) |"),
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if chosen.manifest_files_only:
        lines[4:4] = folder_summary(rows) + [""]
    for r in rows:
        why = "" if r["status"] == "ok" else f"{r['line'] or '-'}: {r['reason']}".replace("|", "\\|")
        eff = f"{100 * r['estimated_loop_efficiency']:.1f}%" if r["estimated_loop_efficiency"] is not None else ""
        skipped = ", ".join(f"{s['line']}: {s['cause']}" for s in r["skipped_at_import"])
        moved = ", ".join(f"{a['line']}: {a['call']}" for a in r["meta_allocations"])
        lines.append(f"| {r['path']} | {r['repo']} | {(r['commit'] or '')[:12]} | {r['status']} | {why} | "
                     f"{r['kernel'] or ''} | {r['registers_per_thread'] or ''} | {r['spills'] if r['spills'] is not None else ''} | "
                     f"{r['estimated_tflops'] or ''} | {eff} | "
                     f"{skipped} | {moved} |")
    notes = NOTES.read_text() if NOTES.is_file() else ""
    if chosen.notes_section and chosen.notes_section in notes:
        notes = chosen.notes_section + notes.split(chosen.notes_section, 1)[1].split("\n## ", 1)[0]
    (RESULTS / f"{chosen.stem}.md").write_text("\n".join(lines) + "\n" + ("\n" + notes if notes else ""))
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
