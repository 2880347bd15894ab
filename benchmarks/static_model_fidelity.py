"""How well the static estimate ranks kernels the way the hardware does (issue 16).

Three sets, each a list of (kernel, static estimate, reference figure):

* gfx950_published: the ten gfx950 fp16 stages plus bf8 and MXFP4 against the seed's published figures
  (measured by the seed's authors on an MI355X with their own Triton build, not by nearpeak);
* sm90_measured: the ten sm90 bf16 stages against our H200 measurements at 4096^3 and 8192^3
  (benchmarks/results/sm90_bf16_ladder.json; the earlier run sm90_bf16_ladder_run1.json gives the
  run-to-run agreement of the measurement itself);
* sm90_knob_variants: the knob variants of benchmarks/sm90_knob_variants.json (chosen before any estimate of
  them was computed) against their H200 measurement (benchmarks/results/sm90_knob_variants_h200.jsonl).

* measured sets from the GPU script (benchmarks/knob_variants_gpu.py JSONL, `--measured FILE`, repeatable; without
  it every file of MEASURED_FILES that exists): each file's header names its set (sm90_occupancy_variants and
  sm90_occupancy_variants_2 for the occupancy sets), device, commit and date. Each set is labelled in or out of
  sample (SAMPLE): occupancy set 1 is in-sample since the spill-placement change was diagnosed on it, and its
  out-of-sample figure from before that change stays on record (EARLIER_OUT_OF_SAMPLE).

For each: Spearman rho with n and a permutation p-value, pairwise ordering accuracy and, where estimate and
reference share a unit, the median absolute relative error. gfx950's clock is fitted on the ten fp16 stages'
published pairs, so their absolute TFLOP/s are also given with each stage's clock fitted without it
(leave-one-out). Last, the ratio error each target's static_error is derived from (evaluator.static_error):
the figures tests/test_static_error.py checks the targets' constants against. Writes
benchmarks/results/static_model_fidelity.{json,md}; the JSON is a list of records
{set, n, spearman, p_value, pairwise_accuracy, median_abs_error, ...}, the first record of each set being its
headline.

    python benchmarks/static_model_fidelity.py [--jobs 2] [--out-dir benchmarks/results] [--json]
        [--measured occupancy.jsonl --measured knobs.jsonl]
"""
from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
from concurrent.futures import ProcessPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
LADDER_RUNS = (RESULTS / "sm90_bf16_ladder.json", RESULTS / "sm90_bf16_ladder_run1.json")
VARIANTS = ROOT / "benchmarks" / "sm90_knob_variants.json"
VARIANT_RESULTS = RESULTS / "sm90_knob_variants_h200.jsonl"
# The measured files scored when no --measured is given (those that exist): occupancy set 1, the re-measured knob
# variants, the held-out occupancy set 2 (once the H200 run has written it).
MEASURED_FILES = (RESULTS / "sm90_occupancy_variants_h200.jsonl", RESULTS / "sm90_knob_variants_h200_stop31.jsonl",
                  RESULTS / "sm90_occupancy_variants_2_h200.jsonl")
# Whether the model has seen a set: what the figures of each measured set may be read as.
SAMPLE = {
    "sm90_knob_variants": "out of sample: chosen and committed before any estimate; nothing fitted on them",
    "sm90_occupancy_variants": "in-sample since c4d6d9e: the spill-placement mechanism was diagnosed on this set "
                               "(no constant fitted on it)",
    "sm90_occupancy_variants_2": "out of sample: held out, committed in 90607a0 before any estimate of it",
    "sm90_decode": "the v11/v10 pairs set sm90's memory-bound error (in-sample for it since); the kernels' own "
                   "estimates were never fitted on them",
}
# Occupancy set 1 against the model it was held out from (benchmarks/results/static_model_fidelity.json as of
# e0577dc, made on a3f2b0a): the out-of-sample figure, kept on record now that the set is in-sample.
EARLIER_OUT_OF_SAMPLE = [
    {"set": "sm90_occupancy_variants", "estimate": "estimated_tflops, model of a3f2b0a (before the spill change)",
     "against": "measured TFLOP/s (NVIDIA H200)", "kernels": "4096x4096x4096, out of sample", "n": 15,
     "spearman": 0.305, "p_value": 0.267, "pairwise_accuracy": 0.649, "pairs": 101, "median_abs_error": 0.197,
     "sample": "out of sample (held out until the model of a3f2b0a was scored on it)", "model_commit": "a3f2b0a",
     "source": "benchmarks/results/static_model_fidelity.json at e0577dc", "tie_threshold": 0.03,
     "dropped": [], "rows": []},
]
SM90_SHAPES = ((4096, 4096, 4096), (8192, 8192, 8192))
# Decode shapes (M <= 128): v10 and v11 of both dtypes measured under CUDA-graph replay by benchmarks/llm_shapes.py
# (stop 32), the memory-bound regime none of the other sets covers; never used to fit or choose a constant.
DECODE_RESULTS = RESULTS / "llm_shapes.json"
DECODE_MAX_M = 128
GFX950_FILES = tuple(f"kernels/gfx950/fp16/{name}.py" for name in (
    "v00_naive", "v01_buffer_load", "v02_async_copy", "v03_lds", "v04_global_prefetch", "v05_local_prefetch",
    "v06_loop_unroll", "v07_sliceN", "v08_sliceMN", "v09_beyond_hotloop")) + (
    "kernels/gfx950/bf8/v00_bf8.py", "kernels/gfx950/mxfp4/v00_mxfp4.py")


def _estimate(job: tuple[str, str, tuple | None, dict | None]) -> dict:
    """Static figures of one kernel (run in a worker process)."""
    from evaluator.api import evaluate_static

    path, target, shape, knobs = job
    record = evaluate_static(str(ROOT / path), target=target, shape=shape, knobs=knobs)
    st = record.get("static") or {}
    return {"status": record["status"], "message": record.get("message"),
            "estimated_tflops": st.get("estimated_tflops"), "estimated_efficiency": st.get("estimated_efficiency"),
            "useful_fraction": st.get("useful_fraction"), "model": st.get("model"),
            "throughput": {k: v for k, v in (st.get("throughput") or {}).items() if k != "ratio_error"}}


def _stage_of(path: str) -> str:
    stem = Path(path).stem
    return stem.split("_")[0] if "/fp16/" in path or "/bf16/" in path else Path(path).parent.name


def median_abs_error(est: list[float], meas: list[float]) -> float | None:
    """Median of |estimate / reference - 1| (estimate and reference in one unit)."""
    errors = sorted(abs(e / m - 1) for e, m in zip(est, meas) if m)
    if not errors:
        return None
    mid = len(errors) // 2
    return errors[mid] if len(errors) % 2 else (errors[mid - 1] + errors[mid]) / 2


def compare(set_name: str, estimate: str, against: str, rows: list[dict], tie: float = 0.0, absolute: bool = True,
            **extra) -> dict:
    """One fidelity record over rows {label, estimate, measured} (rows missing either value are dropped);
    `absolute`: estimate and reference share a unit, so the median absolute error means something."""
    from evaluator.stats import pairwise_accuracy, spearman, spearman_p_value

    used = [r for r in rows if r.get("estimate") is not None and r.get("measured") is not None]
    est = [float(r["estimate"]) for r in used]
    meas = [float(r["measured"]) for r in used]
    rho = spearman(est, meas) if len(used) >= 3 else None
    p = spearman_p_value(est, meas) if rho is not None else None
    accuracy, pairs = pairwise_accuracy(est, meas, tie) if len(used) >= 2 else (None, 0)
    mae = median_abs_error(est, meas) if absolute else None
    return {"set": set_name, "n": len(used), "spearman": None if rho is None else round(rho, 3),
            "p_value": None if p is None else float(f"{p:.3g}"),
            "pairwise_accuracy": None if accuracy is None else round(accuracy, 3), "pairs": pairs,
            "median_abs_error": None if mae is None else round(mae, 3),
            "tie_threshold": tie, "estimate": estimate, "against": against, **extra,
            "dropped": [r["label"] for r in rows if r not in used], "rows": used}


def gfx950_records(estimates: dict) -> list[dict]:
    from evaluator.targets import get_target

    published = get_target("gfx950").ladder.published
    rows = []
    for path in GFX950_FILES:
        stage = _stage_of(path)
        e = estimates[(path, None, None)]
        rows.append({"label": stage, "estimated_efficiency": e["estimated_efficiency"],
                     "estimated_tflops": e["estimated_tflops"], "published_efficiency": published[stage]["mfma_efficiency"],
                     "published_tflops": published[stage]["tflops"], "status": e["status"]})

    def pick(subset, est_key, pub_key):
        return [{"label": r["label"], "estimate": r[est_key], "measured": r[pub_key]} for r in subset]

    fp16 = rows[:10]
    loo = [{"label": r["label"], "estimate": _loo_tflops(estimates[(path, None, None)], i),
            "measured": r["published_tflops"]} for i, (r, path) in enumerate(zip(fp16, GFX950_FILES))]
    return [
        compare("gfx950_published", "estimated_efficiency", "published MFMA efficiency", pick(fp16, "estimated_efficiency",
                "published_efficiency"), kernels="ten fp16 stages", sample="nothing fitted on the efficiencies"),
        compare("gfx950_published", "estimated_efficiency", "published MFMA efficiency", pick(rows, "estimated_efficiency",
                "published_efficiency"), kernels="ten fp16 stages + bf8 + MXFP4"),
        compare("gfx950_published", "estimated_tflops", "published TFLOP/s", pick(fp16, "estimated_tflops",
                "published_tflops"), kernels="ten fp16 stages", sample="in-sample: the clock line is fitted on them"),
        compare("gfx950_published", "estimated_tflops", "published TFLOP/s", pick(rows, "estimated_tflops",
                "published_tflops"), kernels="ten fp16 stages + bf8 + MXFP4"),
        compare("gfx950_published", "estimated_tflops, leave-one-out clock", "published TFLOP/s", loo,
                kernels="ten fp16 stages, each with the clock line fitted on the other nine", sample="leave-one-out"),
        compare("gfx950_published", "estimated_tflops", "published TFLOP/s", pick(rows[10:], "estimated_tflops",
                "published_tflops"), kernels="bf8 + MXFP4 (out of sample: not in the clock fit)", sample="out of sample"),
    ]


def _loo_tflops(estimate: dict, index: int) -> float | None:
    """A gfx950 fp16 stage's estimate re-clocked with the clock line fitted without its own published pair."""
    from evaluator.clock import leave_one_out
    from evaluator.targets.gfx950.clocks import DATASHEET_GHZ, pairs

    tp = estimate.get("throughput") or {}
    if estimate.get("estimated_tflops") is None or not tp:
        return None
    clock = leave_one_out(pairs(), index, DATASHEET_GHZ).at(tp["matrix_utilisation"])
    return round(estimate["estimated_tflops"] * clock / tp["clock_ghz"], 1)


def _ladder_measurements(path: Path) -> dict:
    """(stage, shape) -> the measured record of one ladder run."""
    data = json.loads(path.read_text())
    return {(r["stage"], (r["M"], r["N"], r["K"])): r for r in data["records"] if r.get("tflops")}


def sm90_records(estimates: dict) -> list[dict]:
    runs = [_ladder_measurements(p) for p in LADDER_RUNS]
    stages = [f"v0{i}" for i in range(10)]
    files = {_stage_of(p): p for p in sorted(str(q.relative_to(ROOT)) for q in (ROOT / "kernels/sm90/bf16").glob("v0*.py"))}
    out = []
    for shape in SM90_SHAPES:
        rows = [{"label": s, "estimate": estimates[(files[s], shape, None)]["estimated_tflops"],
                 "measured": (runs[0].get((s, shape)) or {}).get("tflops")} for s in stages]
        out.append(compare("sm90_measured", "estimated_tflops", "measured TFLOP/s (H200)", rows, shape=list(shape),
                           measured_in=str(LADDER_RUNS[0].relative_to(ROOT)),
                           sample="in-sample: the two memory constants were fitted on it"))
    shape = SM90_SHAPES[1]
    rows = [{"label": s, "estimate": estimates[(files[s], shape, None)]["estimated_efficiency"],
             "measured": (runs[0].get((s, shape)) or {}).get("tensor_pipe_pct")} for s in stages]
    out.append(compare("sm90_measured", "estimated_efficiency", "measured tensor-pipe active % (ncu, H200)", rows,
                       absolute=False, shape=list(shape), measured_in=str(LADDER_RUNS[0].relative_to(ROOT))))
    for shape in SM90_SHAPES:  # how well one measurement ranks the other: the ceiling for any estimate
        rows = [{"label": s, "estimate": (runs[1].get((s, shape)) or {}).get("tflops"),
                 "measured": (runs[0].get((s, shape)) or {}).get("tflops")} for s in stages]
        out.append(compare("sm90_measured", "measured TFLOP/s, earlier run", "measured TFLOP/s (H200)", rows,
                           shape=list(shape), note="measurement against measurement: run-to-run agreement",
                           measured_in=str(LADDER_RUNS[0].relative_to(ROOT)),
                           estimate_from=str(LADDER_RUNS[1].relative_to(ROOT))))
    return out


def variant_measurements() -> tuple[dict, list[dict]]:
    """The variants file and the measured lines, each with `knobs_changed`: its knobs that differ from the
    stage file's KNOBS (the measured record holds the full, merged set)."""
    from evaluator.contract import read_constant

    config = json.loads(VARIANTS.read_text())
    lines = [json.loads(line) for line in VARIANT_RESULTS.read_text().splitlines() if line.strip()]
    measured = [r for r in lines if not r.get("header")]
    for r in measured:
        defaults = read_constant(ROOT / r["file"], "KNOBS") or {}
        r["knobs_changed"] = {k: v for k, v in (r.get("knobs") or {}).items() if defaults.get(k) != v}
    return config, measured


def _label(row: dict) -> str:
    knobs = ",".join(f"{k}={v}" for k, v in row["knobs_changed"].items()) or "defaults"
    return f"{row['stage']} {knobs}"


def variant_records(estimates: dict) -> list[dict]:
    config, measured = variant_measurements()
    shape = tuple(config["shape"])
    tie = config["tie_threshold"]
    rows = {"variant": [], "default": []}
    for r in measured:
        changed = r["knobs_changed"]
        entry = {"stage": r["stage"], "knobs_changed": changed}
        est = estimates.get((r["file"], shape, _knob_key(changed)))
        rows[r["role"]].append({"label": _label(entry), "estimate": (est or {}).get("estimated_tflops"),
                                "measured": r["tflops"] if r.get("status") == "ok" else None,
                                "measured_status": r.get("status")})
    return [
        compare("sm90_knob_variants", "estimated_tflops", "measured TFLOP/s (H200)", rows["variant"], tie,
                shape=list(shape), measured_in=str(VARIANT_RESULTS.relative_to(ROOT)), sample=SAMPLE["sm90_knob_variants"]),
        compare("sm90_knob_variants", "estimated_tflops", "measured TFLOP/s (H200)", rows["variant"] + rows["default"],
                tie, shape=list(shape), kernels="variants and the stage defaults measured in the same run",
                measured_in=str(VARIANT_RESULTS.relative_to(ROOT)), sample=SAMPLE["sm90_knob_variants"]),
    ]


def _knob_key(knobs: dict) -> tuple | None:
    return tuple(sorted(knobs.items())) or None


def read_measured(path: Path) -> tuple[dict, list[dict]]:
    """A JSONL file of benchmarks/knob_variants_gpu.py: its header and its rows (each with the knobs it asked for)."""
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    header = next((r for r in lines if r.get("header")), {})
    return header, [r for r in lines if not r.get("header")]


def measured_jobs(path: Path) -> list[tuple]:
    header, rows = read_measured(path)
    return [(r["file"], header.get("target", "sm90"), tuple(r["shape"]), dict(r.get("knobs") or {}) or None)
            for r in rows]


def measured_records(path: Path, estimates: dict) -> list[dict]:
    """One record per set in a measured file (header `set`, or each row's own), variants alone, then with the
    stage defaults measured in the same run; provenance from the file's header."""
    header, rows = read_measured(path)
    by_set: dict[str, list[dict]] = {}
    for r in rows:
        by_set.setdefault(r.get("set") or header.get("set") or Path(path).stem, []).append(r)
    out = []
    for name, members in by_set.items():
        table = {"variant": [], "default": []}
        for r in members:
            knobs = dict(r.get("knobs") or {})
            est = estimates.get((r["file"], tuple(r["shape"]), _knob_key(knobs)))
            label = f"{r['stage']} " + (",".join(f"{k}={v}" for k, v in knobs.items()) or "defaults")
            table[r.get("role", "variant")].append({
                "label": label, "estimate": (est or {}).get("estimated_tflops"),
                "measured": r.get("tflops") if r.get("status") == "ok" and r.get("correct") is not False else None,
                "measured_status": r.get("status"), "mechanism": r.get("mechanism")})
        provenance = {"device": header.get("device") or next((r.get("device") for r in members if r.get("device")), None),
                      "measured_commit": header.get("commit"), "measured_date": header.get("date"),
                      "measured_in": _relative(path), "sample": SAMPLE.get(name, "not stated")}
        tie = header.get("tie_threshold", 0.03)
        shape = members[0]["shape"]
        out.append(compare(name, "estimated_tflops", f"measured TFLOP/s ({provenance['device']})", table["variant"],
                           tie, shape=list(shape), **provenance))
        if table["default"]:
            out.append(compare(name, "estimated_tflops", f"measured TFLOP/s ({provenance['device']})",
                               table["variant"] + table["default"], tie, shape=list(shape),
                               kernels="variants and the stage defaults measured in the same run", **provenance))
    return out


def decode_rows() -> list[dict]:
    """llm_shapes.json's correct v10/v11 rows at M <= DECODE_MAX_M with a graph time: (file, shape, measured)."""
    if not DECODE_RESULTS.is_file():
        return []
    doc = json.loads(DECODE_RESULTS.read_text())
    return [{"file": r["file"], "shape": (r["M"], r["N"], r["K"]), "label": f"{r['label']} {r['M']}x{r['N']}x{r['K']}",
             "stage": r["label"], "measured": 2 * r["M"] * r["N"] * r["K"] / (r["graph_median_ms"] * 1e-3) / 1e12,
             "commit": r.get("commit"), "device": r.get("device")}
            for r in doc.get("records", []) if r["M"] <= DECODE_MAX_M and r.get("correct") and r.get("graph_median_ms")
            and not r.get("knobs")]


def decode_records(estimates: dict) -> list[dict]:
    """The decode set: each kernel's estimate against its graph-timed TFLOP/s, and each v11/v10 pair's estimated
    ratio against the measured one, with the share inside the sm90 ratio interval the accept rule uses."""
    from evaluator.targets import get_target

    rows = decode_rows()
    if not rows:
        return []
    for r in rows:
        r["estimate"] = (estimates.get((r["file"], r["shape"], None)) or {}).get("estimated_tflops")
    provenance = {"device": next((r["device"] for r in rows if r["device"]), None), "measured_in": _relative(
        DECODE_RESULTS), "sample": SAMPLE["sm90_decode"]}
    kernels = [{k: r[k] for k in ("label", "estimate", "measured")} for r in rows]
    out = [compare("sm90_decode", "estimated_tflops", f"measured TFLOP/s under graph replay ({provenance['device']})",
                   kernels, 0.03, kernels="v10 and v11, bf16 and fp8, at the M <= 128 shapes of llm_shapes.json",
                   **provenance)]
    error = get_target("sm90").ratio_error
    half = error.z * error.log_sigma
    by_key = {(r["stage"], r["shape"]): r for r in rows}
    pairs = []
    for (stage, shape), r in sorted(by_key.items()):
        base = by_key.get((stage.replace("v11", "v10"), shape))
        if not stage.startswith("v11") or base is None or not r["estimate"] or not base["estimate"]:
            continue
        est, meas = r["estimate"] / base["estimate"], r["measured"] / base["measured"]
        pairs.append({"label": f"{stage}/{base['stage']} {'x'.join(map(str, shape))}", "estimate": round(est, 3),
                      "measured": round(meas, 3), "inside_interval": abs(math.log(meas / est)) <= half})
    record = compare("sm90_decode", "estimated v11/v10 ratio", "measured v11/v10 ratio (graph replay)", pairs, 0.03,
                     kernels="pairs at the same shape", **provenance)
    record["inside_interval"] = f"{sum(p['inside_interval'] for p in pairs)} of {len(pairs)} (log half-width {half:.3f})"
    return out + [record]


def _relative(path: Path) -> str:
    path = Path(path).resolve()
    return str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else str(path)


def ratio_error_records(records: list[dict]) -> list[dict]:
    """The ratio error of each target's derivation set (evaluator.static_error.derive_error): gfx950 from the ten
    fp16 stages with leave-one-out clocks, sm90 from the knob variants (out of sample)."""
    from evaluator.static_error import derive_error, pair_error

    sources = {"gfx950": ("gfx950_published", "estimated_tflops, leave-one-out clock"),
               "sm90": ("sm90_knob_variants", "estimated_tflops")}
    out = []
    for target, (set_name, estimate) in sources.items():
        source = next((r for r in records if r["set"] == set_name and r["estimate"] == estimate), None)
        if source is None or source["n"] < 2:
            continue
        error = derive_error([(r["estimate"], r["measured"]) for r in source["rows"]], source["tie_threshold"])
        out.append({"set": "ratio_error", "target": target, "from_set": set_name, "from_estimate": estimate,
                    "from_kernels": source.get("kernels") or source.get("shape"), "n": source["n"],
                    "pairs": error.pairs, "log_sigma": round(error.log_sigma, 4), "rms": round(error.rms, 4),
                    "p90": round(error.p90, 4), "worst": round(error.worst, 4)})
    # The memory-bound regime's scale (sm90's memory_bound_log_sigma): each decode pair is already a ratio.
    pairs = next((r for r in records if r["set"] == "sm90_decode" and r["estimate"] == "estimated v11/v10 ratio"),
                 None)
    if pairs and pairs["n"] >= 2:
        error = pair_error([math.log(p["estimate"] / p["measured"]) for p in pairs["rows"]])
        out.append({"set": "ratio_error", "target": "sm90", "regime": "memory_bound", "from_set": "sm90_decode",
                    "from_estimate": "estimated v11/v10 ratio", "from_kernels": pairs.get("kernels"), "n": pairs["n"],
                    "pairs": error.pairs, "log_sigma": round(error.log_sigma, 4), "rms": round(error.rms, 4),
                    "p90": round(error.p90, 4), "worst": round(error.worst, 4)})
    return out


def jobs_needed(measured_files: tuple[Path, ...] = ()) -> list[tuple]:
    jobs = [(p, "gfx950", None, None) for p in GFX950_FILES]
    for p in sorted((ROOT / "kernels/sm90/bf16").glob("v0*.py")):  # the ten stages measured in both runs
        jobs += [(str(p.relative_to(ROOT)), "sm90", shape, None) for shape in SM90_SHAPES]
    config, measured = variant_measurements()
    for r in measured:
        job = (r["file"], "sm90", tuple(config["shape"]), dict(r.get("knobs_changed") or {}) or None)
        if job not in jobs:
            jobs.append(job)
    for path in measured_files:
        jobs += [job for job in measured_jobs(path) if job not in jobs]
    jobs += [job for job in {(r["file"], "sm90", r["shape"], None): None for r in decode_rows()} if job not in jobs]
    return jobs


def _job_key(job) -> tuple:
    path, target, shape, knobs = job
    return path, target, tuple(shape) if shape else None, _knob_key(knobs or {})


def render(records: list[dict], header: dict) -> str:
    out = ["# Static model fidelity", "",
           (f"- date (UTC): {header['date']}; commit {header['commit']}{' (dirty tree)' if header['dirty'] else ''}; "
           f"triton {header['triton']}"), f"- command: `{header['command']}`",
           "- every estimate is a STATIC ESTIMATE (compile-only on a CPU); reference figures as named per row", "",
           "| set | estimate | against | kernels / shape | n | Spearman rho | p | pairwise | pairs | median abs error | sample |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    errors = [r for r in records if r["set"] == "ratio_error"]
    records = [r for r in records if r["set"] != "ratio_error"]
    for r in records:
        scope = r.get("kernels") or ("x".join(map(str, r["shape"])) if r.get("shape") else "")
        out.append(f"| {r['set']} | {r['estimate']} | {r['against']} | {scope} | {r['n']} | {r['spearman']} | "
                   f"{r['p_value']} | {r['pairwise_accuracy']} | {r['pairs']} | {r.get('median_abs_error')} | "
                   f"{r.get('sample') or ''} |")
    out += ["", "Ratio error of two estimates (evaluator.static_error; the targets' `static_error` constants):", "",
            "| target | from set | estimate | n | pairs | log-sigma (1.4826 x median) | RMS | 90th pct | worst |",
            "|---|---|---|---|---|---|---|---|---|"]
    for e in errors:
        out.append(f"| {e['target']}{' (' + e['regime'] + ')' if e.get('regime') else ''} | {e['from_set']} | {e['from_estimate']} | {e['n']} | {e['pairs']} | "
                   f"{e['log_sigma']} | {e['rms']} | {e['p90']} | {e['worst']} |")
    out += ["", ("p: two-sided permutation p-value of rho. pairwise: share of pairs ordered as the reference orders "
            "them (estimate ties count one half); knob-variant pairs closer than the pre-registered tie threshold "
            "(3%) are left out. For n > 8 the p-value is sampled from 100 000 random orderings (seeded); 1e-05 is "
            "its floor: no sampled ordering reached the observed rho."), ""]
    for r in records:
        if not r["rows"]:  # a figure kept on record (its rows are in the file it names)
            continue
        scope = r.get("kernels") or ("x".join(map(str, r["shape"])) if r.get("shape") else "")
        out.append(f"## {r['set']}: {r['estimate']} vs {r['against']} ({scope})")
        out.append("")
        out.append("| kernel | estimate | reference |")
        out.append("|---|---|---|")
        for row in r["rows"]:
            out.append(f"| {row['label']} | {_fmt(row['estimate'])} | {_fmt(row['measured'])} |")
        if r.get("inside_interval"):
            out.append(f"\nmeasured ratio inside the sm90 ratio interval the static accept rule uses: "
                       f"{r['inside_interval']}")
        if r["dropped"]:
            out.append(f"\nleft out (no estimate or no measurement): {', '.join(r['dropped'])}")
        out.append("")
    return "\n".join(out)


def _fmt(value) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False).stdout.strip()


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--jobs", type=int, default=2, help="compile processes")
    p.add_argument("--out-dir", default=str(RESULTS))
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.add_argument("--cache", help="reuse the static figures saved in this file by an earlier run (else save them)")
    p.add_argument("--measured", action="append", default=[],
                   help="a JSONL file of benchmarks/knob_variants_gpu.py (repeatable): its sets are scored too "
                        "(default: the files of MEASURED_FILES that exist)")
    args = p.parse_args(argv)

    import triton

    measured = tuple(Path(m) for m in args.measured) or tuple(m for m in MEASURED_FILES if m.is_file())
    missing = [str(m) for m in measured if not m.is_file()]
    if missing:
        print(f"static_model_fidelity: no such measured file: {', '.join(missing)}", file=sys.stderr)
        return 2
    jobs = jobs_needed(measured)
    cache = Path(args.cache) if args.cache else None
    saved = json.loads(cache.read_text()) if cache and cache.is_file() else []
    done = {_job_key(job) for job, _ in saved}
    todo = [job for job in jobs if _job_key(job) not in done]
    if todo:
        print(f"static_model_fidelity: {len(todo)} static evaluations with {args.jobs} processes", file=sys.stderr)
        with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
            for n, (job, result) in enumerate(zip(todo, pool.map(_estimate, todo)), 1):
                saved.append([list(job), result])
                print(f"[{n}/{len(todo)}] {job[0]} {job[2] or ''} {job[3] or ''}: {result['status']} "
                      f"est. {result['estimated_tflops']} TFLOP/s", file=sys.stderr, flush=True)
        if cache:
            cache.write_text(json.dumps(saved))
    estimates = {(path, tuple(shape) if shape else None, _knob_key(knobs or {})): result
                 for (path, _, shape, knobs), result in saved}
    records = gfx950_records(estimates) + sm90_records(estimates) + variant_records(estimates)
    for path in measured:
        records += measured_records(path, estimates)
        if any(r["set"] == "sm90_occupancy_variants" for r in records[-2:]):
            records += EARLIER_OUT_OF_SAMPLE
    records += decode_records(estimates)
    records += ratio_error_records(records)
    header = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "commit": _git("rev-parse", "--short", "HEAD"),
              "dirty": bool(_git("status", "--porcelain", "--untracked-files=no")), "triton": triton.__version__,
              "command": "python benchmarks/static_model_fidelity.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "static_model_fidelity.json").write_text(json.dumps(
        [{**r, "provenance": header} for r in records], indent=1, default=str) + "\n")
    (out_dir / "static_model_fidelity.md").write_text(render(records, header) + "\n")
    if args.json:
        print(json.dumps(records, indent=1, default=str))
    else:
        for r in records:
            if r["set"] == "ratio_error":
                print(f"ratio_error {r['target']}: log-sigma {r['log_sigma']} p90 {r['p90']} ({r['pairs']} pairs)")
                continue
            print(f"{r['set']:20s} {r['estimate']:32s} vs {r['against']:42s} n={r['n']:2d} rho={r['spearman']} "
                  f"p={r['p_value']} pairwise={r['pairwise_accuracy']} median abs err={r.get('median_abs_error')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
