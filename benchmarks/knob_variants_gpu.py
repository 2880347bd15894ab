"""Measure the sm90 knob variants of benchmarks/sm90_knob_variants.json on a GPU, through evaluator.runtime.

A thin driver: each variant (then each stage's defaults, as anchors) goes through `runtime_evaluate`, the
same correctness, timing and defenses `nearpeak eval --run` uses, in this one process so the imports are
paid once. Every record is written as one JSON line as soon as it is measured, so a run cut short keeps
what it finished.

    python benchmarks/knob_variants_gpu.py --out results.jsonl [--budget 0.5] [--commit SHA]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ROOT / "benchmarks" / "sm90_knob_variants.json"


def measurements(config: dict) -> list[dict]:
    """Variants first, then one entry per stage with its default knobs."""
    entries = [dict(v, role="variant") for v in config["variants"]]
    seen = []
    for v in config["variants"]:
        if v["file"] not in seen:
            seen.append(v["file"])
    return entries + [{"stage": Path(f).stem.split("_")[0], "file": f, "knobs": {}, "role": "default"} for f in seen]


def summarize(entry: dict, shape, record: dict) -> dict:
    keep = ("status", "correct", "verdict", "tflops", "median_ms", "vendor", "vendor_tflops", "ratio_vs_vendor",
            "spread", "seed", "knobs", "device", "clocks_mhz", "phase_seconds", "timing_method")
    return {**entry, "shape": list(shape), **{k: record.get(k) for k in keep}}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=str(VARIANTS))
    p.add_argument("--out", required=True, help="JSON-lines file, one record per measurement")
    p.add_argument("--budget", type=float, default=0.5, help="seconds of timed calls per side (candidate, vendor)")
    p.add_argument("--commit", default=None, help="git commit of the measured tree (recorded, not checked)")
    p.add_argument("--dirty", action="store_true", help="record that the tree had uncommitted changes")
    args = p.parse_args(argv)

    from evaluator.runtime.evaluate import runtime_evaluate

    config = json.loads(Path(args.variants).read_text())
    shape = tuple(config["shape"])
    entries = measurements(config)
    with open(args.out, "w") as out:
        header = {"header": True, "date": datetime.now(timezone.utc).isoformat(), "command": " ".join(sys.argv),
                  "commit": args.commit, "dirty": args.dirty, "shape": list(shape), "budget_s": args.budget,
                  "variants_file": str(Path(args.variants).relative_to(ROOT))}
        out.write(json.dumps(header) + "\n")
        out.flush()
        for n, entry in enumerate(entries, 1):
            started = time.perf_counter()
            try:
                record = runtime_evaluate(str(ROOT / entry["file"]), target="sm90", shape=shape,
                                          knobs=entry["knobs"] or None, seed=20261201 + n, timing_budget_s=args.budget)
                row = summarize(entry, shape, record)
            except Exception as exc:  # noqa: BLE001 - one failing variant must not lose the others
                row = {**entry, "shape": list(shape), "status": "driver_error", "verdict": f"{type(exc).__name__}: {exc}"}
            row["wall_s"] = round(time.perf_counter() - started, 2)
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            print(f"[{n}/{len(entries)}] {entry['stage']} {entry['knobs'] or 'defaults'}: {row.get('status')} "
                  f"{row.get('tflops') or 0:.1f} TFLOP/s ({row['wall_s']} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
