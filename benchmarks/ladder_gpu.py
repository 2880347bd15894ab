"""Measure the sm90 GEMM ladder on a Hopper GPU (H100/H200): correctness, TFLOP/s against the vendor library,
registers/spills, and (with --ncu) the tensor-pipe utilisation from Nsight Compute.

    PYTHONPATH=. python benchmarks/ladder_gpu.py                       # every stage, the five benchmark shapes
    PYTHONPATH=. python benchmarks/ladder_gpu.py --stages v08,v09,fp8 --shapes 8192x8192x8192 --ncu
    PYTHONPATH=. python benchmarks/ladder_gpu.py --variants "v09:GROUP_M=16;v09:NUM_STAGES=3,EPILOGUE_SPLIT=2"

Method (every number in the output says how it was obtained):
- Inputs: fresh random normal operands (bf16: N(0, 1); fp8: N(0, 1) cast to e4m3, scales 0.7 and 1.3), never
  zeros. Several input sets per shape, their total size above the 60 MB L2, rotated on every timed call.
- Correctness: the output is filled with NaN before the checked launch; the reference is torch in float64 on
  the GPU from the same (bf16 or fp8) values; rel_error = ||out - ref||_F / ||ref||_F; correct when it is
  finite and below the tolerance (bf16 1e-2, fp8 2e-2) and the output holds no NaN. An extra small "edge"
  shape (not a tile multiple) is checked for every stage whose SHAPE_MULTIPLE admits it.
- Timing: triton.testing.do_bench median (ms) of the kernel's launch() and of the vendor call on the same
  inputs (torch.matmul for bf16, torch._scaled_mm for fp8), alternated for --rounds rounds in one process;
  each side reports its best round. TFLOP/s = 2 M N K / time.
- Registers/spills: from the compiled kernel launch() returns (n_regs, n_spills as the driver loaded it).
- tensor_pipe_pct: `ncu --clock-control none -k regex:gemm_kernel --metrics
  sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active`, one launch per stage, on a driver
  mode of this script (--ncu-driver); null when ncu is absent or fails.
Each stage runs in its own subprocess, so a stage that crashes (even a CUDA fault) cannot stop the others.
Writes sm90_bf16_ladder.json and sm90_bf16_ladder.md to --out-dir (default: $OUT if set, else benchmarks/results).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import importlib.util
import io
import json
import math
import os
import shutil
import subprocess
import sys
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BF16_DIR = ROOT / "kernels" / "sm90" / "bf16"
FP8_FILE = ROOT / "kernels" / "sm90" / "fp8" / "v09_fp8.py"
BENCH_SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
EDGE_SHAPE = (1000, 1016, 1008)
L2_BYTES = 60 * 1024 * 1024
TOLERANCE = {"bfloat16": 1e-2, "float8_e4m3fn": 2e-2}
FP8_SCALES = (0.7, 1.3)
NCU_METRIC = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"


def log(*parts) -> None:
    print(*parts, flush=True)


def stage_files() -> dict[str, Path]:
    """Stage label -> kernel file: v00..v09 from kernels/sm90/bf16, and 'fp8'."""
    from evaluator.ladder import stage_paths

    files = {p.name.split("_")[0]: p for p in stage_paths(BF16_DIR)}
    if FP8_FILE.exists():
        files["fp8"] = FP8_FILE
    return files


def load_module(path: Path):
    spec = importlib.util.spec_from_file_location(f"ladder_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def parse_shape(text: str) -> tuple[int, int, int]:
    m, n, k = (int(x) for x in text.lower().split("x"))
    return m, n, k


def parse_variant(text: str) -> tuple[str, dict[str, int]]:
    """'v09:GROUP_M=16,NUM_STAGES=3' -> ('v09', {'GROUP_M': 16, 'NUM_STAGES': 3})."""
    stage, _, rest = text.partition(":")
    knobs = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        knobs[key.strip()] = int(value)
    return stage.strip(), knobs


def supports(module, shape) -> bool:
    multiple = getattr(module, "SHAPE_MULTIPLE", (1, 1, 1))
    return all(d % m == 0 for d, m in zip(shape, multiple))


# ---------------------------------------------------------------------------------------------------------------
# Inputs, reference, vendor


def make_set(shape, dtype_name: str, seed: int):
    """One input set: (a, b, a_scale, b_scale), random normal, never zeros."""
    import torch

    m, n, k = shape
    gen = torch.Generator(device="cuda").manual_seed(seed)
    a = torch.randn(m, k, device="cuda", generator=gen)
    b = torch.randn(n, k, device="cuda", generator=gen)
    if dtype_name == "float8_e4m3fn":
        a_scale = torch.tensor([FP8_SCALES[0]], device="cuda", dtype=torch.float32)
        b_scale = torch.tensor([FP8_SCALES[1]], device="cuda", dtype=torch.float32)
        return a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn), a_scale, b_scale
    return a.to(torch.bfloat16), b.to(torch.bfloat16), None, None


def set_count(shape, dtype_name: str) -> int:
    m, n, k = shape
    elem = 1 if dtype_name == "float8_e4m3fn" else 2
    per_set = (m * k + n * k) * elem + m * n * 2
    return max(2, math.ceil(2 * L2_BYTES / per_set))


def reference(a, b, a_scale, b_scale):
    import torch

    ref = a.to(torch.float64) @ b.to(torch.float64).T
    if a_scale is not None:
        ref *= float(a_scale.item()) * float(b_scale.item())
    return ref


def vendor_call(dtype_name: str):
    import torch

    if dtype_name == "float8_e4m3fn":
        return lambda a, b, c, sa, sb: torch._scaled_mm(a, b.T, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)
    return lambda a, b, c, sa, sb: torch.matmul(a, b.T)


def kernel_call(module, knobs):
    if getattr(module, "SCALES", None) == "per_tensor":
        return lambda a, b, c, sa, sb: module.launch(a, b, c, sa, sb, **knobs)
    return lambda a, b, c, sa, sb: module.launch(a, b, c, **knobs)


def rotating(fn, sets, outs):
    """A zero-argument callable that walks the input sets, so timed calls do not re-hit L2."""
    state = {"i": 0}

    def call():
        i = state["i"] % len(sets)
        state["i"] += 1
        a, b, sa, sb = sets[i]
        return fn(a, b, outs[i], sa, sb)
    return call


# ---------------------------------------------------------------------------------------------------------------
# One stage, all shapes (runs in a child process)


def measure_stage(label: str, path: Path, knobs_override: dict, shapes, rounds: int, check_edge: bool) -> list[dict]:
    import torch
    import triton.testing

    torch.backends.cuda.matmul.allow_tf32 = False
    module = load_module(path)
    knobs = {**module.KNOBS, **knobs_override}
    dtype_name = module.DTYPE
    tol = TOLERANCE.get(dtype_name, 1e-2)
    records = []
    todo = [(s, True) for s in shapes] + ([(EDGE_SHAPE, False)] if check_edge else [])
    for shape, timed in todo:
        if records:
            print("CHILD_RECORD " + json.dumps(records[-1]), flush=True)
        m, n, k = shape
        rec = {"stage": label, "stage_file": str(path.relative_to(ROOT)), "technique": getattr(module, "TECHNIQUE", ""),
               "M": m, "N": n, "K": k, "dtype": dtype_name, "out_dtype": module.OUT_DTYPE, "knobs": knobs,
               "timed": timed, "correct": None, "rel_error": None, "tolerance": tol, "tflops": None, "ms": None,
               "vendor_tflops": None, "vendor_ms": None, "ratio_vs_vendor": None, "tensor_pipe_pct": None,
               "registers": None, "spills": None, "skipped": None, "error": None}
        records.append(rec)
        if not supports(module, shape):
            rec["skipped"] = f"not a multiple of SHAPE_MULTIPLE {tuple(module.SHAPE_MULTIPLE)}"
            log(f"  {label} {m}x{n}x{k}: skipped ({rec['skipped']})")
            continue
        try:
            n_sets = set_count(shape, dtype_name) if timed else 1
            sets = [make_set(shape, dtype_name, seed=1000 * i + m + n + k) for i in range(n_sets)]
            outs = [torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(n_sets)]
            run = kernel_call(module, knobs)
            a, b, sa, sb = sets[0]
            outs[0].fill_(float("nan"))
            compiled = run(a, b, outs[0], sa, sb)
            torch.cuda.synchronize()
            rec["registers"] = getattr(compiled, "n_regs", None)
            rec["spills"] = getattr(compiled, "n_spills", None)
            ref = reference(a, b, sa, sb)
            out = outs[0].to(torch.float64)
            has_nan = bool(torch.isnan(out).any())
            rel = float(torch.linalg.norm(out - ref) / torch.linalg.norm(ref))
            rec["rel_error"] = None if math.isnan(rel) else rel
            rec["correct"] = (not has_nan) and math.isfinite(rel) and rel < tol
            del ref, out
            if timed:
                ours = rotating(run, sets, outs)
                vendor = rotating(vendor_call(dtype_name), sets, outs)
                t_ours, t_vendor = [], []
                for _ in range(rounds):
                    t_ours.append(triton.testing.do_bench(ours, warmup=25, rep=100, return_mode="median"))
                    t_vendor.append(triton.testing.do_bench(vendor, warmup=25, rep=100, return_mode="median"))
                flops = 2.0 * m * n * k
                rec["ms"], rec["vendor_ms"] = min(t_ours), min(t_vendor)
                rec["tflops"] = flops / (rec["ms"] * 1e-3) / 1e12
                rec["vendor_tflops"] = flops / (rec["vendor_ms"] * 1e-3) / 1e12
                rec["ratio_vs_vendor"] = rec["tflops"] / rec["vendor_tflops"]
            log(f"  {label} {m}x{n}x{k}: correct={rec['correct']} rel={rec['rel_error']} ms={rec['ms']} "
                f"vendor_ms={rec['vendor_ms']} regs={rec['registers']} spills={rec['spills']}")
            del sets, outs
            torch.cuda.empty_cache()
        except Exception as exc:  # noqa: BLE001 - one failing shape must not stop the others
            lines = str(exc).strip().splitlines()
            rec["error"] = f"{type(exc).__name__}: {lines[-1][:300] if lines else ''}"
            log(f"  {label} {m}x{n}x{k}: ERROR {rec['error']}")
            traceback.print_exc()
            if "CUDA" in str(exc) or "illegal" in str(exc).lower():
                break  # the context is poisoned; the parent records the rest as not run
    if records:
        print("CHILD_RECORD " + json.dumps(records[-1]), flush=True)
    return records


# ---------------------------------------------------------------------------------------------------------------
# Nsight Compute


def ncu_driver(jobs: list[tuple[str, Path, dict]], shape) -> None:
    """Launch each job's kernel once at `shape` (after its compile), for ncu to profile in order."""
    import torch

    for label, path, override in jobs:
        module = load_module(path)
        knobs = {**module.KNOBS, **override}
        a, b, sa, sb = make_set(shape, module.DTYPE, seed=7)
        c = torch.empty(shape[0], shape[1], device="cuda", dtype=torch.bfloat16)
        kernel_call(module, knobs)(a, b, c, sa, sb)
        torch.cuda.synchronize()
        log(f"NCU_LAUNCHED {label}")


def run_ncu(jobs: list[tuple[str, Path, dict]], shape, variant_args: list[str]) -> dict[str, float | None]:
    """tensor_pipe_pct per job label at `shape` (None where ncu is missing or gave no row)."""
    result: dict[str, float | None] = {label: None for label, _, _ in jobs}
    ncu = shutil.which("ncu") or next((str(p) for p in Path("/opt/nvidia").glob("nsight-compute/*/ncu")), None)
    if not ncu:
        log("ncu not found: tensor_pipe_pct stays null")
        return result
    labels = ",".join(label for label, _, _ in jobs)
    cmd = [ncu, "--clock-control", "none", "-k", "regex:gemm_kernel", "--metrics", NCU_METRIC, "--csv",
           sys.executable, str(Path(__file__).resolve()), "--ncu-driver", "--stages", labels,
           "--shapes", "x".join(map(str, shape)), *variant_args]
    try:
        proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    except (subprocess.TimeoutExpired, OSError) as exc:
        log(f"ncu failed: {exc}")
        return result
    lines = proc.stdout.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        log(f"ncu gave no CSV (rc={proc.returncode}): {proc.stdout[-800:]} {proc.stderr[-800:]}")
        return result
    values = []
    for row in csv.DictReader(io.StringIO("\n".join(lines[start:]))):
        if row.get("Metric Name") == NCU_METRIC:
            try:
                values.append(float(row["Metric Value"].replace(",", "")))
            except (KeyError, ValueError):
                values.append(None)
    launched = [ln.split(" ", 1)[1] for ln in lines if ln.startswith("NCU_LAUNCHED ")]
    if len(values) != len(launched):
        log(f"ncu: {len(values)} rows for {len(launched)} launches; not matched")
        return result
    result.update(dict(zip(launched, values)))
    return result


# ---------------------------------------------------------------------------------------------------------------
# Parent: one child per stage, then the report


def device_header(argv: list[str]) -> dict:
    import torch
    import triton

    header = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python"] + argv), "torch": torch.__version__, "triton": triton.__version__,
              "cuda": torch.version.cuda, "device": None, "sm_count": None, "driver": None,
              "timing": "triton.testing.do_bench median, best of rounds, inputs rotated over sets > 2x L2",
              "reference": "torch float64 matmul on the GPU of the same low-precision values",
              "vendor": {"bfloat16": "torch.matmul", "float8_e4m3fn": "torch._scaled_mm (bf16 out, per-tensor scales)"},
              "tolerance": TOLERANCE, "tensor_pipe_metric": NCU_METRIC}
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        header["device"], header["sm_count"] = props.name, props.multi_processor_count
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm", "--format=csv,noheader"],
                             check=False, capture_output=True, text=True, timeout=20).stdout.strip()
        header["driver"] = smi or None
    except (OSError, subprocess.TimeoutExpired):
        pass
    return header


def write_report(out_dir: Path, header: dict, records: list[dict], show: bool = True) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "sm90_bf16_ladder.json").write_text(json.dumps({"header": header, "records": records}, indent=1))
    columns = ["stage", "M x N x K", "correct", "rel_error", "TFLOP/s", "vendor TFLOP/s", "ratio", "tensor pipe %",
               "regs", "spills"]
    rows = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]

    def fmt(v, spec):
        return "-" if v is None else format(v, spec)
    for r in records:
        verdict = "ERROR" if r.get("error") else "skip" if r.get("skipped") else r["correct"]
        rows.append(f"| {r['stage']} | {r['M']}x{r['N']}x{r['K']} | {verdict} | "
                    f"{fmt(r['rel_error'], '.2e')} | {fmt(r['tflops'], '.1f')} | {fmt(r['vendor_tflops'], '.1f')} | "
                    f"{fmt(r['ratio_vs_vendor'], '.3f')} | {fmt(r['tensor_pipe_pct'], '.1f')} | "
                    f"{fmt(r['registers'], 'd')} | {fmt(r['spills'], 'd')} |")
    text = (f"# sm90 GEMM ladder on {header.get('device')}\n\n{header['date']}, torch {header['torch']}, "
            f"triton {header['triton']}, driver {header.get('driver')}\n\n`{header['command']}`\n\n"
            f"Timing: {header['timing']}. Vendor: torch.matmul (bf16), torch._scaled_mm (fp8).\n\n"
            + "\n".join(rows) + "\n")
    notes = [f"- {r['stage']} {r['M']}x{r['N']}x{r['K']}: {r.get('error') or r.get('skipped')}"
             for r in records if r.get("error") or r.get("skipped")]
    if notes:
        text += "\nErrors and skipped shapes:\n" + "\n".join(notes)
    (out_dir / "sm90_bf16_ladder.md").write_text(text + "\n")
    if show:
        log("\n" + "\n".join(rows))


def jobs_from_args(args) -> list[tuple[str, Path, dict]]:
    """(label, file, knob overrides): the --stages files at their KNOBS, then each --variants setting."""
    files = stage_files()
    wanted = [s.strip() for s in args.stages.split(",") if s.strip() and "+" not in s] if args.stages else list(files)
    jobs = [(label, files[label], {}) for label in wanted if label in files]
    for text in filter(None, (args.variants or "").split(";")):
        stage, knobs = parse_variant(text)
        if stage in files:
            jobs.append(("+".join([stage] + [f"{k}={v}" for k, v in knobs.items()]), files[stage], knobs))
    return jobs


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stages", default="", help="comma list of v00..v09, fp8 (default: all)")
    ap.add_argument("--shapes", default="", help="comma list of MxNxK (default: the five benchmark shapes)")
    ap.add_argument("--variants", default="", help="extra knob settings: 'v09:GROUP_M=16,NUM_STAGES=3;v08:...'")
    ap.add_argument("--out-dir", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--rounds", type=int, default=2, help="alternating timing rounds (ours, vendor)")
    ap.add_argument("--no-edge", action="store_true", help="skip the non-multiple edge-shape correctness check")
    ap.add_argument("--ncu", action="store_true", help="also read tensor-pipe utilisation with Nsight Compute")
    ap.add_argument("--ncu-shapes", default="8192x8192x8192", help="shapes profiled with --ncu")
    ap.add_argument("--child", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--ncu-driver", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv[1:])
    shapes = [parse_shape(s) for s in args.shapes.split(",") if s.strip()] or BENCH_SHAPES
    jobs = jobs_from_args(args)

    if args.ncu_driver:
        ncu_driver(jobs, shapes[0])
        return 0
    if args.child is not None:
        label, path, override = next(j for j in jobs if j[0] == args.child)
        measure_stage(label, path, override, shapes, args.rounds, not args.no_edge)
        return 0

    header = device_header(argv)
    log(f"device={header['device']} torch={header['torch']} triton={header['triton']} driver={header['driver']}")
    records: list[dict] = []
    for label, path, override in jobs:
        log(f"== {label} ({path.name}) knobs={override or 'defaults'}")
        cmd = [sys.executable, str(Path(__file__).resolve()), "--child", label, "--stages", label.split("+")[0],
               "--shapes", ",".join("x".join(map(str, s)) for s in shapes), "--rounds", str(args.rounds),
               "--variants", args.variants] + (["--no-edge"] if args.no_edge else [])
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": str(ROOT)}
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
        got = []
        for line in proc.stdout:
            if line.startswith("CHILD_RECORD "):
                got.append(json.loads(line[len("CHILD_RECORD "):]))
            else:
                print(line, end="", flush=True)
        proc.wait()
        done = {(r["M"], r["N"], r["K"]) for r in got}
        got += [{"stage": label, "M": s[0], "N": s[1], "K": s[2], "dtype": None, "correct": None,
                 "rel_error": None, "tflops": None, "vendor_tflops": None, "ratio_vs_vendor": None,
                 "tensor_pipe_pct": None, "registers": None, "spills": None,
                 "error": f"stage process exited with {proc.returncode} before reporting"}
                for s in shapes if s not in done]
        records.extend(got)
        write_report(Path(args.out_dir), header, records, show=False)  # kept if a later stage hangs the GPU

    if args.ncu:
        for shape in [parse_shape(s) for s in args.ncu_shapes.split(",") if s.strip()]:
            log(f"== ncu at {shape}")
            pct = run_ncu(jobs, shape, ["--variants", args.variants] if args.variants else [])
            for rec in records:
                if (rec["M"], rec["N"], rec["K"]) == shape and rec["stage"] in pct:
                    rec["tensor_pipe_pct"] = pct[rec["stage"]]
            log(f"   tensor_pipe_pct: {pct}")
    write_report(Path(args.out_dir), header, records)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
