"""The sm90 v10 stages against the vendor library, measured through the evaluator's own runtime path.

    PYTHONPATH=. python benchmarks/sm90_v10.py [--rounds 3] [--stages bf16-v09,bf16-v10,fp8-v09,fp8-v10]
        [--variant "bf16-v10:SPLIT_K=1"] [--profile] [--out DIR] [--json]

Every figure comes from `evaluator.runtime.runtime_evaluate` (what `nearpeak eval --run` runs): correctness on
the shape plus the evaluator's small and held-out shapes, then per-call (eager) device-event timing interleaved
call by call with the fair vendor baseline over rotating input sets, host time per launch call, and per-call
GPU time under CUDA-graph replay. Vendor: torch.matmul for bf16; torch._scaled_mm with use_fast_accum=True for
fp8 (the Gluon fp8 kernels accumulate in the tensor core's own accumulator, which is what fast accumulation is).
Rounds repeat every (shape, stage) evaluation in a fresh order, each with its own seed; a record's ratio is the
median over rounds with the min and max beside it. Also checked: the non-multiple edge shape 1000x1016x1008
through the same path, and bitwise reproducibility of split-K (two launches on the same inputs). `--profile` adds
the tensor-pipe activity at 8192^3 from the evaluator's profiler path (Nsight Compute).

Writes sm90_v10.json (records: stage, dtype, M, N, K, correct, ratio_vs_vendor, ratio_vs_vendor_graph,
host_us_per_call, vendor, ...) and sm90_v10.md to --out (default $OUT or benchmarks/results).
"""
from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

STAGES = {
    "bf16-v09": "kernels/sm90/bf16/v09_tuned.py",
    "bf16-v10": "kernels/sm90/bf16/v10_split_k.py",
    "fp8-v09": "kernels/sm90/fp8/v09_fp8.py",
    "fp8-v10": "kernels/sm90/fp8/v10_fp8_split_k.py",
}
SHAPES = [(4096, 4096, 4096), (8192, 8192, 8192), (8192, 8192, 2048), (16384, 8192, 4096), (256, 8192, 8192)]
EDGE_SHAPE = (1000, 1016, 1008)
PROFILE_SHAPE = (8192, 8192, 8192)
SKINNY = (256, 8192, 8192)
SPLIT_SHAPE = (512, 1024, 16384)  # 16 full tiles, 32 half-width ones, long K: the decision table's split-K row
KEEP = ("status", "verdict", "correct", "tflops", "vendor_tflops", "median_ms", "vendor_median_ms", "ratio_vs_vendor",
        "graph_median_ms", "vendor_graph_median_ms", "ratio_vs_vendor_graph", "host_us_per_call",
        "vendor_host_us_per_call", "launch_bound", "launch_note", "vendor", "graph_note", "seed")


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def parse_variant(text: str) -> tuple[str, dict[str, int]]:
    """'bf16-v10:SPLIT_K=1,GROUP_M=4' -> ('bf16-v10', {'SPLIT_K': 1, 'GROUP_M': 4})."""
    stage, _, rest = text.partition(":")
    if stage not in STAGES:
        raise argparse.ArgumentTypeError(f"unknown stage {stage!r}; known: {', '.join(STAGES)}")
    knobs = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            knobs[key.strip()] = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"knob {item!r} must be NAME=INTEGER") from None
    return stage, knobs


def label(stage: str, knobs: dict) -> str:
    return stage + ("" if not knobs else ":" + ",".join(f"{k}={v}" for k, v in sorted(knobs.items())))


def evaluate(stage: str, knobs: dict, shape, seed: int, profile: bool = False) -> dict:
    from evaluator.runtime import runtime_evaluate

    try:
        record = runtime_evaluate(str(ROOT / STAGES[stage]), shape=shape, knobs=knobs or None, seed=seed,
                                  profile=profile)
    except Exception as exc:  # noqa: BLE001 - one failing evaluation must not stop the others
        return {"status": "error", "verdict": f"{type(exc).__name__}: {exc}", "correct": False}
    kept = {k: record.get(k) for k in KEEP}
    if profile:
        kept["tensor_pipe_pct"] = record.get("tensor_pipe_pct")
        kept["profile_ok"] = (record.get("profile") or {}).get("ok")
        kept["profile_error"] = (record.get("profile") or {}).get("error")
    return kept


def reproducible(stage: str, knobs: dict, shape, seed: int) -> dict:
    """Two launches on the same inputs give bitwise the same output (split-K's fixed-order reduction)."""
    import torch

    from evaluator.contract import load_candidate
    from evaluator.runtime import correctness as corr

    module, spec = load_candidate(str(ROOT / STAGES[stage]))
    device = torch.device("cuda", torch.cuda.current_device())
    args = corr.make_arguments(spec, shape, device, corr.generator_for(device, seed))
    outs = []
    for _ in range(3):
        corr.poison(args["c"])
        module.launch(**args, **{**spec.knobs, **knobs})
        torch.cuda.synchronize(device)
        outs.append(args["c"].clone())
    same = all(torch.equal(outs[0], o) for o in outs[1:])
    return {"stage": label(stage, knobs), "shape": list(shape), "bitwise_equal_over_3_launches": same,
            "judge": corr.judge_output(args, spec, shape).to_dict()}


def ab(dtype: str, shape, seed: int) -> dict:
    """Interleaved A/B of v10 against v09 (the accept rule's measurement) on one shape."""
    from evaluator.runtime import compare

    try:
        got = compare(str(ROOT / STAGES[f"{dtype}-v10"]), str(ROOT / STAGES[f"{dtype}-v09"]), shape=shape,
                      seed=seed, min_gain=0.01)
    except Exception as exc:  # noqa: BLE001
        return {"dtype": dtype, "shape": list(shape), "error": f"{type(exc).__name__}: {exc}"}
    log(f"[compare] {dtype} v10 vs v09 {shape}: {got['speedup']:.3f} [{got['ci_low']:.3f}, {got['ci_high']:.3f}]")
    return {"dtype": dtype, "shape": list(shape), **{k: got.get(k) for k in (
        "speedup", "ci_low", "ci_high", "accepted", "candidate_correct", "method")}}


def aggregate(runs: list[dict]) -> list[dict]:
    """One record per (stage label, shape): medians over rounds and their extremes."""
    groups: dict[tuple, list[dict]] = {}
    for run in runs:
        groups.setdefault((run["label"], tuple(run["shape"])), []).append(run)
    records = []
    for (name, shape), group in groups.items():
        stage = group[0]["stage"]
        ok = [g for g in group if g.get("status") == "ok"]
        rec = {"stage": stage.split("-")[1], "label": name, "dtype": stage.split("-")[0], "M": shape[0],
               "N": shape[1], "K": shape[2], "correct": bool(group) and all(g.get("correct") for g in group),
               "rounds": len(group), "statuses": sorted({g.get("status") for g in group}),
               "vendor": next((g.get("vendor") for g in ok), None)}
        for field in ("ratio_vs_vendor", "ratio_vs_vendor_graph", "host_us_per_call", "vendor_host_us_per_call",
                      "tflops", "vendor_tflops", "graph_median_ms", "vendor_graph_median_ms"):
            values = [g[field] for g in ok if g.get(field) is not None]
            rec[field] = statistics.median(values) if values else None
            if field in ("ratio_vs_vendor", "ratio_vs_vendor_graph") and values:
                rec[field + "_spread"] = [min(values), max(values)]
        rec["launch_bound_rounds"] = sum(1 for g in ok if g.get("launch_bound"))
        rec["verdicts"] = sorted({g.get("verdict") for g in group if g.get("status") != "ok"})
        records.append(rec)
    return records


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def summary(records: list[dict]) -> dict:
    out = {}
    for name in sorted({r["label"] for r in records}):
        rows = [r for r in records if r["label"] == name and (r["M"], r["N"], r["K"]) in SHAPES]
        eager = [r["ratio_vs_vendor"] for r in rows if r["ratio_vs_vendor"]]
        graph = [r["ratio_vs_vendor_graph"] for r in rows if r["ratio_vs_vendor_graph"]]
        out[name] = {"shapes": len(rows), "geomean_ratio_vs_vendor": geomean(eager),
                     "min_ratio_vs_vendor": min(eager) if eager else None,
                     "geomean_ratio_vs_vendor_graph": geomean(graph)}
    return out


def fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def render(meta: dict, records: list[dict], summ: dict, extra: dict) -> str:
    lines = [f"# sm90 v10 stages vs the vendor library on {meta['device']}", "",
             f"{meta['date']}, commit {meta['commit']}, torch {meta['torch']}, triton {meta['triton']}", "",
             f"`{meta['command']}`", "",
             ("Every figure from evaluator.runtime.runtime_evaluate (the path of `nearpeak eval --run`). ratio = "
             "vendor time / kernel time, per-call (eager) device events interleaved call by call with the vendor; "
             "graph ratio = the same under CUDA-graph replay (GPU time only); host us = host time per launch call. "
             f"Median over {meta['rounds']} rounds [min, max]. Vendor: torch.matmul (bf16), torch._scaled_mm "
             "use_fast_accum=True (fp8)."), "",
             ("| stage | M x N x K | correct | ratio (eager) | [min, max] | ratio (graph) | host us | vendor host us "
             "| TFLOP/s | vendor TFLOP/s | launch-bound rounds |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in records:
        sp = r.get("ratio_vs_vendor_spread")
        lines.append(f"| {r['label']} | {r['M']}x{r['N']}x{r['K']} | {r['correct']} | {fmt(r['ratio_vs_vendor'])} | "
                     f"{'-' if not sp else f'[{sp[0]:.3f}, {sp[1]:.3f}]'} | {fmt(r['ratio_vs_vendor_graph'])} | "
                     f"{fmt(r['host_us_per_call'], 1)} | {fmt(r['vendor_host_us_per_call'], 1)} | "
                     f"{fmt(r['tflops'], 1)} | {fmt(r['vendor_tflops'], 1)} | {r['launch_bound_rounds']} |")
    lines += ["", "| stage | geomean ratio (eager), five shapes | lowest | geomean ratio (graph) |", "|---|---|---|---|"]
    for name, s in summ.items():
        lines.append(f"| {name} | {fmt(s['geomean_ratio_vs_vendor'])} | {fmt(s['min_ratio_vs_vendor'])} | "
                     f"{fmt(s['geomean_ratio_vs_vendor_graph'])} |")
    if extra.get("reproducible"):
        lines += ["", "Split-K reproducibility (three launches on the same inputs, output poisoned before each):"]
        lines += [f"- {r['stage']} {'x'.join(map(str, r['shape']))}: bitwise equal {r['bitwise_equal_over_3_launches']}"
                  f", {r['judge'].get('reason') or 'correct'} (rel. error {fmt(r['judge'].get('rel_error'), 5)})"
                  for r in extra["reproducible"]]
    if extra.get("compare"):
        lines += ["", "v10 against v09, interleaved A/B (evaluator.runtime.compare, the accept rule's measurement):"]
        lines += [f"- {c['dtype']} {'x'.join(map(str, c['shape']))}: " + (c["error"] if "error" in c else
                  f"speedup {c['speedup']:.3f}, 95% CI [{c['ci_low']:.3f}, {c['ci_high']:.3f}], accepted "
                  f"{c['accepted']}") for c in extra["compare"]]
    if extra.get("profile"):
        lines += ["", f"Tensor-pipe activity at {'x'.join(map(str, PROFILE_SHAPE))} (evaluator profiler path, ncu):"]
        lines += [f"- {p['label']}: {fmt(p.get('tensor_pipe_pct'), 1)} % (profile ok: {p.get('profile_ok')}"
                  f"{'' if not p.get('profile_error') else ', ' + str(p['profile_error'])})" for p in extra["profile"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--stages", default=",".join(STAGES))
    parser.add_argument("--variant", action="append", type=parse_variant, default=[],
                        help="an extra stage with knob overrides, e.g. bf16-v10:SPLIT_K=1 (repeatable)")
    parser.add_argument("--shapes", help="comma-separated MxNxK (default: the five benchmark shapes)")
    parser.add_argument("--profile", action="store_true", help="tensor-pipe activity of the v10 stages at 8192^3")
    parser.add_argument("--compare", action="store_true",
                        help="also A/B v10 against v09 (evaluator.runtime.compare) at 4096^3 and the skinny shape")
    parser.add_argument("--seed", type=int, default=20261201)
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--json", action="store_true", help="print the JSON document instead of the table")
    args = parser.parse_args(argv)
    import torch
    import triton

    if not torch.cuda.is_available():
        log("sm90_v10.py needs an sm90 GPU")
        return 2
    stages = [parse_variant(s.strip()) for s in args.stages.split(",") if s.strip()] + args.variant
    shapes = SHAPES if not args.shapes else [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]
    runs = []
    for r in range(args.rounds):
        order = stages if r % 2 == 0 else stages[::-1]
        for shape in shapes:
            for stage, knobs in order:
                rec = evaluate(stage, knobs, shape, args.seed + r)
                runs.append({"stage": stage, "label": label(stage, knobs), "knobs": knobs, "shape": list(shape),
                             "round": r, **rec})
                log(f"[round {r}] {label(stage, knobs)} {shape}: {rec.get('status')} "
                    f"eager {fmt(rec.get('ratio_vs_vendor'))} graph {fmt(rec.get('ratio_vs_vendor_graph'))} "
                    f"host {fmt(rec.get('host_us_per_call'), 1)} us")
    # The non-multiple edge shape and the split-K regime, through the same path, with split-K forced or off.
    v10s = sorted({s for s, _ in stages if s.endswith("v10")})
    regime = [(s, k, EDGE_SHAPE) for s, k in stages] + [(s, {"SPLIT_K": 2}, EDGE_SHAPE) for s in v10s]
    regime += [(s, k, SPLIT_SHAPE) for s in v10s for k in ({}, {"SPLIT_K": 1})]
    for stage, knobs, shape in regime:
        rec = evaluate(stage, knobs, shape, args.seed)
        runs.append({"stage": stage, "label": label(stage, knobs), "knobs": knobs, "shape": list(shape),
                     "round": 0, **rec})
        log(f"[regime] {label(stage, knobs)} {shape}: {rec.get('status')} {rec.get('verdict')} "
            f"eager {fmt(rec.get('ratio_vs_vendor'))} graph {fmt(rec.get('ratio_vs_vendor_graph'))}")
    extra: dict = {"reproducible": [reproducible(s, k, shape, args.seed) for s in v10s
                                    for k, shape in (({}, SPLIT_SHAPE), ({"SPLIT_K": 2}, EDGE_SHAPE), ({}, SKINNY))]}
    if args.profile:
        extra["profile"] = []
        for stage, knobs in stages:
            if stage.endswith("v10") and not knobs:
                rec = evaluate(stage, knobs, PROFILE_SHAPE, args.seed, profile=True)
                extra["profile"].append({"label": label(stage, knobs), **rec})
                log(f"[profile] {stage}: tensor pipe {rec.get('tensor_pipe_pct')} {rec.get('profile_error') or ''}")
    if args.compare:
        extra["compare"] = [ab(dtype, shape, args.seed) for dtype in ("bf16", "fp8") for shape in (SHAPES[0], SKINNY)]
    records = aggregate(runs)
    summ = summary(records)
    commit = os.environ.get("NEARPEAK_COMMIT") or subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
        check=False).stdout.strip() or "unknown"
    meta = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "device": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
            "commit": commit, "rounds": args.rounds,
            "command": "python benchmarks/sm90_v10.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    doc = {**meta, "records": records, "summary": summ, **extra, "runs": runs}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "sm90_v10.json").write_text(json.dumps(doc, indent=1, default=str))
    text = render(meta, records, summ, extra)
    (out / "sm90_v10.md").write_text(text)
    print(json.dumps(doc, indent=1, default=str) if args.json else text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
