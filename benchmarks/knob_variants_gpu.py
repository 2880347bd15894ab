"""Measure sm90 variant sets on a GPU through the evaluator's runtime path (evaluator.api.evaluate, run=True).

The sets: the knob variants of issue 16 (benchmarks/sm90_knob_variants.json) and the occupancy validation set of
issue 23 (benchmarks/sm90_occupancy_variants.json), each variant then each stage's defaults (as anchors). Every
evaluation is the one `nearpeak eval --run` does (a sandboxed process: correctness, timing, defenses); one that
fails is written with its status and the run goes on. Each set goes to its own JSON-lines file in --out-dir, a
header line first (set, target, device, commit, date, shape, tie threshold), each record as soon as it is
measured, so a run cut short keeps what it finished; benchmarks/static_model_fidelity.py --measured FILE reads
them.

    python benchmarks/knob_variants_gpu.py --out-dir "$OUT" [--set FILE ...] [--commit SHA] [--dry-run]

--dry-run evaluates statically (run=False) to check the driver and the files on a machine without the GPU.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETS = (ROOT / "benchmarks" / "sm90_knob_variants.json", ROOT / "benchmarks" / "sm90_occupancy_variants.json")
SET_NAMES = {"sm90_knob_variants.json": "sm90_knob_variants", "sm90_occupancy_variants.json": "sm90_occupancy_variants"}
TARGET = "sm90"


def measurements(config: dict) -> list[dict]:
    """Variants first, then one entry per stage file with its default knobs."""
    entries = [dict(v, role="variant") for v in config["variants"]]
    seen = []
    for v in config["variants"]:
        if v["file"] not in seen:
            seen.append(v["file"])
    return entries + [{"stage": Path(f).stem.split("_")[0], "file": f, "knobs": {}, "role": "default"} for f in seen]


def summarize(entry: dict, set_name: str, shape, record: dict) -> dict:
    """One output line: the entry (its requested knobs), the record's status and its measured figures."""
    runtime = record.get("runtime") or {}
    keep = ("status", "correct", "verdict", "tflops", "median_ms", "vendor", "vendor_tflops", "ratio_vs_vendor",
            "spread", "seed", "device", "clocks_mhz", "phase_seconds", "timing_method")
    row = {**entry, "set": set_name, "shape": list(shape), "record_status": record.get("status"),
           "message": record.get("message"), **{k: runtime.get(k) for k in keep}}
    if not runtime:
        row["status"] = record.get("status")
    return row


def run_set(path: Path, out_dir: Path, header_extra: dict, run: bool, timeout_s: float) -> tuple[int, int]:
    """Measure one set into out_dir/<set>.jsonl; (rows written, rows measured ok)."""
    from evaluator import api

    config = json.loads(path.read_text())
    name = SET_NAMES.get(path.name, path.stem)
    shape = tuple(config["shape"])
    entries = measurements(config)
    ok = 0
    with open(out_dir / f"{name}.jsonl", "w") as out:
        header = {"header": True, "set": name, "target": TARGET, "variants_file": str(path.relative_to(ROOT))
                  if path.is_relative_to(ROOT) else str(path), "shape": list(shape),
                  "tie_threshold": config.get("tie_threshold", 0.03), "measured": run, **header_extra}
        out.write(json.dumps(header) + "\n")
        out.flush()
        for n, entry in enumerate(entries, 1):
            started = time.perf_counter()
            try:
                record = api.evaluate(str(ROOT / entry["file"]), target=TARGET, shape=shape,
                                      knobs=entry["knobs"] or None, run=run, seed=20261202 + n, timeout_s=timeout_s)
                row = summarize(entry, name, shape, record)
            except Exception as exc:  # noqa: BLE001 - one failing variant must not lose the others
                row = {**entry, "set": name, "shape": list(shape), "status": "driver_error",
                       "verdict": f"{type(exc).__name__}: {exc}"}
            row["wall_s"] = round(time.perf_counter() - started, 2)
            ok += row.get("status") == "ok"
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            print(f"[{name} {n}/{len(entries)}] {entry['stage']} {entry['knobs'] or 'defaults'}: {row.get('status')} "
                  f"{row.get('tflops') or 0:.1f} TFLOP/s ({row['wall_s']} s)", flush=True)
    return len(entries), ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True, help="folder for one <set>.jsonl per set ($OUT on the GPU machine)")
    p.add_argument("--set", action="append", default=[], help="a variants file (repeatable; default: both sets)")
    p.add_argument("--commit", default=None, help="git commit of the measured tree (recorded, not checked)")
    p.add_argument("--dirty", action="store_true", help="record that the tree had uncommitted changes")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per evaluation")
    p.add_argument("--dry-run", action="store_true", help="static evaluation only (no GPU needed)")
    args = p.parse_args(argv)

    sets = [Path(s).resolve() for s in args.set] or list(SETS)
    missing = [str(s) for s in sets if not s.is_file()]
    if missing:
        print(f"knob_variants_gpu: no such variants file: {', '.join(missing)}", file=sys.stderr)
        return 2
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    extra = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "command": " ".join(sys.argv),
             "commit": args.commit, "dirty": args.dirty}
    for path in sets:
        written, ok = run_set(path, out_dir, extra, not args.dry_run, args.timeout)
        print(f"{path.name}: {ok} of {written} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
