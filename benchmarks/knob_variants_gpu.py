"""Measure sm90 variant sets on a GPU through the evaluator's runtime path (evaluator.api.evaluate, run=True).

The sets: the knob variants of issue 16 (benchmarks/sm90_knob_variants.json) and the occupancy validation sets of
issue 23 (benchmarks/sm90_occupancy_variants.json, and the held-out benchmarks/sm90_occupancy_variants_2.json),
each variant then each stage's defaults (as anchors). Every
evaluation is the one `nearpeak eval --run` does (a sandboxed process: correctness, timing, defenses); one that
fails is written with its status and the run goes on. Each set goes to its own JSON-lines file in --out-dir, a
header line first (set, target, device, commit, date, shape, tie threshold), each record as soon as it is
measured, so a run cut short keeps what it finished; benchmarks/static_model_fidelity.py --measured FILE reads
them.

    python benchmarks/knob_variants_gpu.py --out-dir "$OUT" [--set FILE ...] [--commit SHA] [--dry-run | --compile-check]

--dry-run evaluates statically (run=False) to check the driver and the files on a machine without the GPU.
--compile-check only compiles each entry on this machine and writes what ptxas reports (registers, spills, stack,
shared memory: compiler output), no estimate: the check a held-out set gets before its estimates may be computed.
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
SET_NAMES = {"sm90_knob_variants.json": "sm90_knob_variants", "sm90_occupancy_variants.json": "sm90_occupancy_variants",
             "sm90_occupancy_variants_2.json": "sm90_occupancy_variants_2"}
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


def compile_check(entry: dict, shape) -> dict:
    """Compiler output of one entry (no static estimate): each kernel's registers, spills, stack and shared memory."""
    from evaluator.compile import compile_candidate
    from evaluator.contract import load_candidate
    from evaluator.targets import get_target
    from evaluator.targets.nvidia import sass, static

    target = get_target(TARGET)
    module, spec = load_candidate(str(ROOT / entry["file"]))
    kernels = compile_candidate(module, spec, target, shape, entry["knobs"] or None)
    out = []
    for kernel in kernels:
        res = sass.ptxas_resource_usage(kernel.asm["ptx"], static.ptxas_arch(target))
        out.append({"kernel": kernel.name, "num_warps": kernel.num_warps, "registers": res.registers,
                    "spill_bytes": res.spill_store_bytes + res.spill_load_bytes,
                    "stack_frame_bytes": res.stack_frame_bytes, "shared_bytes": kernel.shared_bytes})
    return {"status": "compiled", "compiler_output": out}


def _figures(row: dict) -> str:
    """The progress line's figures: compiler output for a compile check, else the measured TFLOP/s."""
    if "compiler_output" in row:
        return "; ".join(f"{k['kernel']}: {k['registers']} registers, {k['spill_bytes']} B spilled, "
                         f"{k['shared_bytes']} B shared (ptxas)" for k in row["compiler_output"])
    tflops = row.get("tflops")
    return f"{tflops:.1f} TFLOP/s measured" if tflops else (row.get("verdict") or row.get("message") or "")


def run_set(path: Path, out_dir: Path, header_extra: dict, run: bool, timeout_s: float,
            compile_only: bool = False) -> tuple[int, int]:
    """Measure one set into out_dir/<set>.jsonl; (rows written, rows measured ok, or compiled)."""
    from evaluator import api

    config = json.loads(path.read_text())
    name = SET_NAMES.get(path.name, path.stem)
    shape = tuple(config["shape"])
    entries = measurements(config)
    ok = 0
    with open(out_dir / f"{name}.jsonl", "w") as out:
        header = {"header": True, "set": name, "target": TARGET, "variants_file": str(path.relative_to(ROOT))
                  if path.is_relative_to(ROOT) else str(path), "shape": list(shape),
                  "tie_threshold": config.get("tie_threshold", 0.03), "measured": run and not compile_only,
                  **header_extra}
        out.write(json.dumps(header) + "\n")
        out.flush()
        for n, entry in enumerate(entries, 1):
            started = time.perf_counter()
            try:
                if compile_only:
                    row = {**entry, "set": name, "shape": list(shape), **compile_check(entry, shape)}
                else:
                    record = api.evaluate(str(ROOT / entry["file"]), target=TARGET, shape=shape,
                                          knobs=entry["knobs"] or None, run=run, seed=20261202 + n,
                                          timeout_s=timeout_s)
                    row = summarize(entry, name, shape, record)
            except Exception as exc:  # noqa: BLE001 - one failing variant must not lose the others
                row = {**entry, "set": name, "shape": list(shape), "status": "driver_error",
                       "verdict": f"{type(exc).__name__}: {exc}"}
            row["wall_s"] = round(time.perf_counter() - started, 2)
            ok += row.get("status") in ("ok", "compiled")
            out.write(json.dumps(row, default=str) + "\n")
            out.flush()
            print(f"[{name} {n}/{len(entries)}] {entry['stage']} {entry['knobs'] or 'defaults'}: {row.get('status')} "
                  f"{_figures(row)} ({row['wall_s']} s)", flush=True)
    return len(entries), ok


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out-dir", required=True, help="folder for one <set>.jsonl per set ($OUT on the GPU machine)")
    p.add_argument("--set", action="append", default=[], help="a variants file (repeatable; default: both sets)")
    p.add_argument("--commit", default=None, help="git commit of the measured tree (recorded, not checked)")
    p.add_argument("--dirty", action="store_true", help="record that the tree had uncommitted changes")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per evaluation")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--dry-run", action="store_true", help="static evaluation only (no GPU needed)")
    mode.add_argument("--compile-check", action="store_true",
                      help="compile each entry and report ptxas's figures only: no estimate, no GPU")
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
        written, ok = run_set(path, out_dir, extra, not (args.dry_run or args.compile_check), args.timeout,
                              args.compile_check)
        print(f"{path.name}: {ok} of {written} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
