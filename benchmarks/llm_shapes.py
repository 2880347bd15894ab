"""Every sm90 reference stage against the vendor library at the projection and MLP shapes of public LLMs.

    PYTHONPATH=. python benchmarks/llm_shapes.py --quick [--out DIR] [--deadline-s 330]
    PYTHONPATH=. python benchmarks/llm_shapes.py [--models llama-3-8b,...] [--m 1,16,...] [--stages v10,v11,...]
        [--variant "v11:SMALL_SPLIT_K=8"] [--dry-run] [--json]

The layer shapes come from the models' published configurations (Hugging Face `config.json`: hidden_size,
intermediate_size, num_attention_heads, num_key_value_heads; head_dim 128 in every one of them), as a serving
engine without tensor parallelism runs them: vLLM fuses q, k and v into one `qkv_proj` and gate and up into one
`gate_up_proj`. A layer is C[M, N] = A[M, K] @ W[N, K]^T with M the tokens of the step (decode: 1 to 128 sequences;
prefill and large batches: 256 to 8192 tokens).

| layer        | N                              | K                 |
|--------------|--------------------------------|-------------------|
| qkv_proj     | (heads + 2 x kv_heads) x 128   | hidden            |
| o_proj       | hidden                         | heads x 128       |
| gate_up_proj | 2 x intermediate               | hidden            |
| down_proj    | hidden                         | intermediate      |

Every figure comes from `evaluator.api.evaluate(path, run=True, shape=...)`, the path of `nearpeak eval --run`:
policy check, static compile, then in a sandboxed process correctness on the shape plus a small and a held-out
one, per-call (eager) device-event timing interleaved call by call with the fair vendor baseline (torch.matmul
for bf16, torch._scaled_mm with use_fast_accum=True for fp8), host time per launch call, and per-call GPU time
under CUDA-graph replay beside the vendor's. Nothing here times anything itself.

A stage "fits" a shape when its SHAPE_MULTIPLE divides it (v00 and v01 need multiples of (128, 128, 64), so they
run at M >= 128 only). Every M here is accepted by v02 and later: their multiple is (1, 8, 8), (1, 8, 16) for fp8,
and every N and K of the table is a multiple of 16.

`--quick` is the device-budget subset: stages v10 and v11 of both dtypes at twelve shapes (nine with M <= 128,
three with M >= 1024), about 48 evaluations; `--deadline-s` (330 s by default with --quick) stops starting new
evaluations once the next one would likely pass it. Results are rewritten after every evaluation into --out
(default $OUT, else benchmarks/results): llm_shapes.json (records: stage, dtype, M, N, K, correct,
ratio_vs_vendor, ratio_vs_vendor_graph, host_us_per_call, device, commit, date, ...) and llm_shapes.md, so a run
cut short keeps what it finished.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from results_meta import git_state, run_metadata

HEAD_DIM = 128
SMALL_M = 128          # the decode regime of the v11 goals
LARGE_M = 1024         # from here v11 must be no slower than v10
M_VALUES = (1, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192)
QUICK_STAGES = ("v10", "v11", "v10-fp8", "v11-fp8")
QUICK_DEADLINE_S = 330.0
CONTRACT_DTYPE = {"bf16": "bfloat16", "fp8": "float8_e4m3fn"}   # the stages' DTYPE, for the target's peaks
DTYPE_LABEL = {"bfloat16": "bf16", "float8_e4m3fn": "fp8"}


@dataclass(frozen=True)
class Model:
    name: str
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    source: str


MODELS = (
    Model("llama-3-8b", 4096, 14336, 32, 8, "huggingface.co/meta-llama/Meta-Llama-3-8B/blob/main/config.json"),
    Model("llama-3-70b", 8192, 28672, 64, 8, "huggingface.co/meta-llama/Meta-Llama-3-70B/blob/main/config.json"),
    Model("mistral-7b", 4096, 14336, 32, 8, "huggingface.co/mistralai/Mistral-7B-v0.1/blob/main/config.json"),
    Model("qwen2.5-7b", 3584, 18944, 28, 4, "huggingface.co/Qwen/Qwen2.5-7B/blob/main/config.json"),
    Model("qwen2.5-72b", 8192, 29568, 64, 8, "huggingface.co/Qwen/Qwen2.5-72B/blob/main/config.json"),
)


def layers(model: Model) -> dict[str, tuple[int, int]]:
    """(N, K) of each linear layer of one transformer block, fused as vLLM runs it."""
    q = model.heads * HEAD_DIM
    return {"qkv_proj": ((model.heads + 2 * model.kv_heads) * HEAD_DIM, model.hidden), "o_proj": (model.hidden, q),
            "gate_up_proj": (2 * model.intermediate, model.hidden), "down_proj": (model.hidden, model.intermediate)}


@dataclass(frozen=True)
class Shape:
    M: int
    N: int
    K: int
    layers: tuple[str, ...]  # "model/layer" names that run this (N, K)

    @property
    def mnk(self) -> tuple[int, int, int]:
        return (self.M, self.N, self.K)


def layer_names(models=MODELS) -> dict[tuple[int, int], tuple[str, ...]]:
    """(N, K) -> the model layers that have it, in table order (Mistral-7B's coincide with Llama-3-8B's)."""
    out: dict[tuple[int, int], list[str]] = {}
    for model in models:
        for layer, nk in layers(model).items():
            out.setdefault(nk, []).append(f"{model.name}/{layer}")
    return {nk: tuple(names) for nk, names in out.items()}


def full_shapes(models=MODELS, m_values=M_VALUES) -> list[Shape]:
    """Every distinct (N, K) of the models at every M."""
    return [Shape(m, n, k, names) for (n, k), names in layer_names(models).items() for m in m_values]


# (M, model, layer): decode steps over the four layer kinds and both model sizes, then three prefill-sized ones.
QUICK = (
    (1, "llama-3-8b", "qkv_proj"), (16, "llama-3-8b", "down_proj"), (16, "llama-3-8b", "gate_up_proj"),
    (16, "llama-3-70b", "down_proj"), (32, "llama-3-70b", "o_proj"), (64, "llama-3-70b", "qkv_proj"),
    (64, "qwen2.5-7b", "down_proj"), (128, "llama-3-8b", "o_proj"), (128, "llama-3-70b", "gate_up_proj"),
    (1024, "llama-3-8b", "gate_up_proj"), (4096, "llama-3-8b", "qkv_proj"), (8192, "llama-3-70b", "o_proj"),
)


def quick_shapes() -> list[Shape]:
    by_name = {m.name: m for m in MODELS}
    names = layer_names()
    out = []
    for m, model, layer in QUICK:
        n, k = layers(by_name[model])[layer]
        out.append(Shape(m, n, k, names[(n, k)]))
    return out


# ---------------------------------------------------------------------------------------------------------------
# Stages: discovered from the ladders, read without importing them.


@dataclass(frozen=True)
class Stage:
    name: str                            # the file's STAGE ("v11", "v10-fp8")
    path: str
    dtype: str                           # "bf16" / "fp8"
    multiple: tuple[int, int, int]
    knobs: dict = field(default_factory=dict)  # overrides of a --variant

    @property
    def label(self) -> str:
        return self.name + ("" if not self.knobs else ":" + ",".join(f"{k}={v}" for k, v in sorted(self.knobs.items())))

    def fits(self, shape: Shape) -> bool:
        return all(d % m == 0 for d, m in zip(shape.mnk, self.multiple))


def sm90_stages() -> list[Stage]:
    """Every stage file of the sm90 ladders (evaluator.ladder.stage_files), bf16 first."""
    from evaluator.contract import read_constant
    from evaluator.ladder import stage_files

    out = []
    for path in stage_files("sm90"):
        dtype = DTYPE_LABEL.get(read_constant(path, "DTYPE"))
        if dtype is None:
            continue
        out.append(Stage(read_constant(path, "STAGE") or path.stem[:3], str(path.relative_to(ROOT)), dtype,
                         tuple(read_constant(path, "SHAPE_MULTIPLE", (1, 1, 1)))))
    return out


def parse_variant(text: str, stages: list[Stage]) -> Stage:
    """'v11:SMALL_SPLIT_K=8,SMALL_BLOCK_N=64' -> that stage with those knob overrides."""
    name, _, rest = text.partition(":")
    base = next((s for s in stages if s.name == name), None)
    if base is None:
        raise ValueError(f"unknown stage {name!r}; known: {', '.join(s.name for s in stages)}")
    knobs = {}
    for item in filter(None, rest.split(",")):
        key, _, value = item.partition("=")
        try:
            knobs[key.strip()] = int(value)
        except ValueError:
            raise ValueError(f"knob {item!r} must be NAME=INTEGER") from None
    return Stage(base.name, base.path, base.dtype, base.multiple, knobs)


def plan(shapes: list[Shape], stages: list[Stage]) -> list[tuple[Shape, Stage]]:
    """The evaluations in run order: shape by shape, both dtypes, each stage that fits; the stage order flips from
    one shape to the next, so no stage always runs first after a compile or a cold cache."""
    out = []
    for i, shape in enumerate(shapes):
        order = stages if i % 2 == 0 else stages[::-1]
        out += [(shape, s) for s in order if s.fits(shape)]
    return out


# ---------------------------------------------------------------------------------------------------------------
# Records


RUNTIME_FIELDS = ("ratio_vs_vendor", "ratio_vs_vendor_graph", "host_us_per_call", "vendor_host_us_per_call",
                  "median_ms", "vendor_median_ms", "graph_median_ms", "vendor_graph_median_ms", "tflops",
                  "vendor_tflops", "vendor", "launch_bound", "graph_note", "seed", "verdict")


def make_record(shape: Shape, stage: Stage, evaluation: dict, commit: str | None, date: str,
                seconds: float) -> dict:
    """One flat row from an `evaluator.api.evaluate` record: what the table and the goals read."""
    runtime = evaluation.get("runtime") or {}
    status = runtime.get("status") if evaluation.get("status") == "ok" and runtime else evaluation.get("status")
    rec = {"stage": stage.name, "label": stage.label, "dtype": stage.dtype, "M": shape.M, "N": shape.N, "K": shape.K,
           "layers": list(shape.layers), "file": stage.path, "knobs": stage.knobs,
           "correct": bool(runtime.get("correct")), "status": status or "unknown",
           "message": evaluation.get("message"), "device": runtime.get("device"), "commit": commit, "date": date,
           "eval_seconds": round(seconds, 1)}
    rec.update({k: runtime.get(k) for k in RUNTIME_FIELDS})
    return rec


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def sm90():
    from evaluator.targets import get_target

    return get_target("sm90")


def min_bytes(rec: dict) -> float:
    """Bytes the record's GEMM must move at least (A and W read once, C written once)."""
    from evaluator.static_error import element_bytes, gemm_min_bytes

    return gemm_min_bytes((rec["M"], rec["N"], rec["K"]), element_bytes(CONTRACT_DTYPE[rec["dtype"]]))


def graph_tbps(rec: dict, field_name: str) -> float | None:
    """Memory throughput implied by a measured graph-replay time (TB/s over min_bytes), None if not measured."""
    ms = rec.get(field_name)
    return min_bytes(rec) / (ms * 1e-3) / 1e12 if ms else None


def _relative(records: list[dict], stage: str, base: str, field_name: str, select) -> list[float]:
    """stage's vendor ratio over base's at each shape both measured (how much faster than base, via the vendor)."""
    ratio = {(r["M"], r["N"], r["K"]): r[field_name] for r in records
             if r["label"] == base and r.get(field_name) and r["correct"]}
    return [r[field_name] / ratio[(r["M"], r["N"], r["K"])] for r in records
            if r["label"] == stage and r.get(field_name) and r["correct"] and select(r)
            and (r["M"], r["N"], r["K"]) in ratio]


def goals(records: list[dict]) -> list[dict]:
    """The v11 goals of issue 25, per dtype, from what was measured (None where nothing was)."""
    out = []
    for dtype, new, old in (("bf16", "v11", "v10"), ("fp8", "v11-fp8", "v10-fp8")):
        small = [r["ratio_vs_vendor_graph"] for r in records if r["label"] == new and r["M"] <= SMALL_M
                 and r["correct"] and r.get("ratio_vs_vendor_graph")]
        large = _relative(records, new, old, "ratio_vs_vendor_graph", lambda r: r["M"] >= LARGE_M)
        eager = _relative(records, new, old, "ratio_vs_vendor", lambda r: True)
        wrong = sum(1 for r in records if r["label"] == new and not r["correct"])
        # What the memory system allows: a kernel at HBM peak would be peak / vendor TB/s times the vendor.
        peak_tflops, peak_tbps = sm90().peak_tflops[CONTRACT_DTYPE[dtype]], sm90().peak_memory_tbps
        ceiling = [peak_tbps / graph_tbps(r, "vendor_graph_median_ms") for r in records if r["label"] == new
                   and r["M"] <= SMALL_M and r["correct"] and r.get("vendor_graph_median_ms")]
        # The tensor pipe's share: useful FLOPs over graph time against the dense peak (derived, not a counter).
        tensor = [2 * r["M"] * r["N"] * r["K"] / (r["graph_median_ms"] * 1e-3) / 1e12 / peak_tflops
                  for r in records if r["label"] == new and r["M"] <= SMALL_M and r["correct"]
                  and r.get("graph_median_ms")]
        out.append({"dtype": dtype, "stage": new, "small_m_shapes": len(small),
                    "min_graph_ratio_small_m": min(small) if small else None,
                    "geomean_graph_ratio_small_m": geomean(small),
                    "min_graph_vs_v10_large_m": min(large) if large else None,
                    "min_eager_vs_v10": min(eager) if eager else None, "not_correct": wrong,
                    "hbm_ceiling_geomean_small_m": geomean(ceiling),
                    "hbm_ceiling_min_small_m": min(ceiling) if ceiling else None,
                    "tensor_share_small_m": [min(tensor), max(tensor)] if tensor else None})
    return out


# ---------------------------------------------------------------------------------------------------------------
# Rendering


def fmt(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _met(value, threshold: float) -> str:
    if value is None:
        return "-"
    if value >= threshold:
        return "met"
    short = 100 * (1 - value / threshold)
    return f"missed by {short:.1f}%" if short >= 0.05 else "missed by < 0.1%"


def render(meta: dict, records: list[dict], skipped: int) -> str:
    device = next((r["device"] for r in records if r.get("device")), "no device")
    lines = [f"# sm90 stages vs the vendor library at LLM layer shapes, measured on {device}", "",
             f"- date (UTC): {meta['date_utc']}", f"- command: `{meta['command']}`",
             f"- git commit: {meta['git']['commit'] or 'unknown'}", "",
             ("Measured: every figure from evaluator.api.evaluate(run=True) (`nearpeak eval --run`). eager = vendor "
              "time / kernel time per call, device events interleaved call by call with the vendor; graph = the same "
              "under CUDA-graph replay (GPU time only, how a serving engine replays a decode step); host us = host "
              "time per launch() call. Vendor: torch.matmul (bf16), torch._scaled_mm use_fast_accum=True (fp8). "
              "Shapes: benchmarks/llm_shapes.py's docstring."), ""]
    if skipped:
        lines += [f"**Cut short: {skipped} planned evaluations were not run** (deadline).", ""]
    commits = sorted({(r.get("commit") or "unknown")[:7] for r in records})
    if len(commits) > 1:
        lines += [(f"Rows come from {len(commits)} commits ({', '.join(commits)}): see the commit column and "
                  "`sources` in the JSON."), ""]
    lines += [("TB/s: min_bytes (A and W read once, C written once) over the measured graph-replay time, for the "
               f"stage and for the vendor; the H200's HBM3e peak is {sm90().peak_memory_tbps} TB/s (datasheet). Derived from "
               "measurements, not measured counters."), "",
              ("| dtype | M x N x K | layers | stage | correct | eager | graph | TB/s | vendor TB/s | host us | "
              "vendor host us | commit |"), "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in sorted(records, key=lambda r: (r["dtype"], r["M"], r["N"], r["K"], r["label"])):
        layer = r["layers"][0] + (f" (+{len(r['layers']) - 1})" if len(r["layers"]) > 1 else "")
        correct = "yes" if r["correct"] else f"no: {r['status']}"
        lines.append(f"| {r['dtype']} | {r['M']}x{r['N']}x{r['K']} | {layer} | {r['label']} | {correct} | "
                     f"{fmt(r['ratio_vs_vendor'])} | {fmt(r['ratio_vs_vendor_graph'])} | "
                     f"{fmt(graph_tbps(r, 'graph_median_ms'), 2)} | {fmt(graph_tbps(r, 'vendor_graph_median_ms'), 2)} | "
                     f"{fmt(r['host_us_per_call'], 1)} | {fmt(r['vendor_host_us_per_call'], 1)} | "
                     f"{(r.get('commit') or 'unknown')[:7]} |")
    lines += ["", "v11 goals (issue 25), measured:", "",
              ("| dtype | M <= 128 shapes | lowest graph ratio (goal >= 1.0) | geomean graph ratio (goal >= 1.1) | "
              "lowest graph v11/v10, M >= 1024 (goal >= 1.0) | lowest eager v11/v10, all shapes (goal >= 1.0) | "
              "not correct |"), "|---|---|---|---|---|---|---|"]
    for g in goals(records):
        lines.append(f"| {g['dtype']} | {g['small_m_shapes']} | {fmt(g['min_graph_ratio_small_m'])} "
                     f"({_met(g['min_graph_ratio_small_m'], 1.0)}) | {fmt(g['geomean_graph_ratio_small_m'])} "
                     f"({_met(g['geomean_graph_ratio_small_m'], 1.1)}) | {fmt(g['min_graph_vs_v10_large_m'])} "
                     f"({_met(g['min_graph_vs_v10_large_m'], 1.0)}) | {fmt(g['min_eager_vs_v10'])} "
                     f"({_met(g['min_eager_vs_v10'], 1.0)}) | {g['not_correct']} |")
    lines += ["", ("HBM ceiling: the graph ratio a kernel moving min_bytes at the datasheet peak would reach against "
                   "the same vendor time, over the M <= 128 rows (geometric mean; lowest):")]
    lines += [f"- {g['dtype']}: {fmt(g['hbm_ceiling_geomean_small_m'])}; {fmt(g['hbm_ceiling_min_small_m'])}"
              for g in goals(records)]
    lines += ["", ("Tensor pipe at M <= 128: useful FLOPs over the graph time, as a share of the dense datasheet peak "
                   "(derived, not a counter; the stage is memory-bound there):")]
    lines += [f"- {g['dtype']}: " + (f"{100 * g['tensor_share_small_m'][0]:.1f}% to "
                                     f"{100 * g['tensor_share_small_m'][1]:.1f}%" if g["tensor_share_small_m"] else "-")
              for g in goals(records)]
    lines += ["", ("v11/v10 = v11's vendor ratio over v10's at the same shape, each from its own evaluation (the "
                   "vendor is re-timed in each), so a ratio within a few percent of 1 is inside what varies between "
                   "evaluations.")]
    return "\n".join(lines) + "\n"


def merge(paths: list[Path]) -> tuple[dict, list[dict]]:
    """Records of several llm_shapes.json files; a later file's record replaces an earlier one of the same stage
    and shape (a re-measurement on newer code). Returns (meta naming every source, records)."""
    by_key: dict[tuple, dict] = {}
    sources = []
    for path in paths:
        doc = json.loads(path.read_text())
        sources.append({"file": str(path), "command": doc.get("command"), "date_utc": doc.get("date_utc"),
                        "commit": (doc.get("git") or {}).get("commit"), "records": len(doc.get("records", []))})
        for rec in doc.get("records", []):
            by_key[(rec["label"], rec["dtype"], rec["M"], rec["N"], rec["K"])] = rec
    last = json.loads(paths[-1].read_text())
    meta = {"command": " + ".join(s["command"] or "?" for s in sources), "date_utc": last.get("date_utc"),
            "git": {"commit": ", ".join(sorted({(s["commit"] or "unknown")[:7] for s in sources}))},
            "sources": sources}
    return meta, list(by_key.values())


def write(out: Path, meta: dict, records: list[dict], skipped: list[dict]) -> None:
    """Rewrite both files (small): a run cut short at any point keeps every evaluation it finished."""
    out.mkdir(parents=True, exist_ok=True)
    doc = {**meta, "records": records, "goals": goals(records), "not_run": skipped}
    (out / "llm_shapes.json").write_text(json.dumps(doc, indent=1, default=str))
    (out / "llm_shapes.md").write_text(render(meta, records, len(skipped)))


# ---------------------------------------------------------------------------------------------------------------


def select(args) -> tuple[list[Shape], list[Stage]]:
    stages = sm90_stages()
    variants = [parse_variant(v, stages) for v in args.variant]
    if args.quick:
        shapes = quick_shapes()
        chosen = [s for s in stages if s.name in QUICK_STAGES]
    else:
        models = [m for m in MODELS if not args.models or m.name in args.models.split(",")]
        m_values = tuple(int(m) for m in args.m.split(",")) if args.m else M_VALUES
        shapes = full_shapes(models, m_values)
        names = set(args.stages.split(",")) if args.stages else None
        chosen = [s for s in stages if names is None or s.name in names]
    if args.dtype:
        chosen = [s for s in chosen if s.dtype == args.dtype]
        variants = [v for v in variants if v.dtype == args.dtype]
    return shapes, chosen + variants


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="v10 and v11 (bf16, fp8) at twelve shapes")
    parser.add_argument("--models", help=f"comma-separated, of {', '.join(m.name for m in MODELS)} (default: all)")
    parser.add_argument("--m", help=f"comma-separated token counts (default: {','.join(map(str, M_VALUES))})")
    parser.add_argument("--stages", help="comma-separated STAGE names, e.g. v10,v11,v10-fp8 (default: every stage)")
    parser.add_argument("--dtype", choices=("bf16", "fp8"))
    parser.add_argument("--variant", action="append", default=[],
                        help="an extra stage with knob overrides, e.g. v11:SMALL_SPLIT_K=8 (repeatable)")
    parser.add_argument("--deadline-s", type=float, help=f"stop starting evaluations after this (--quick: "
                        f"{QUICK_DEADLINE_S:.0f})")
    parser.add_argument("--seed", type=int, default=20261225)
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks" / "results"))
    parser.add_argument("--dry-run", action="store_true", help="print the planned evaluations, run nothing")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--merge", nargs="+", type=Path, metavar="JSON",
                        help="re-render llm_shapes.json files made earlier into one table in --out (later files' "
                             "records replace earlier ones of the same stage and shape); runs nothing")
    parser.add_argument("--notes", help="with --merge: a markdown file (what limits the figures) appended to the table")
    args = parser.parse_args(argv)
    if args.notes and not Path(args.notes).is_file():
        print(f"llm_shapes.py: no such file: {args.notes}", file=sys.stderr)
        return 2
    if args.merge:
        missing = [str(p) for p in args.merge if not p.is_file()]
        if missing:
            print(f"llm_shapes.py: no such file: {', '.join(missing)}", file=sys.stderr)
            return 2
        meta, records = merge(args.merge)
        write(Path(args.out), meta, records, [])
        if args.notes:
            md = Path(args.out) / "llm_shapes.md"
            md.write_text(md.read_text() + "\n" + Path(args.notes).read_text())
        print(f"merged {len(records)} records from {len(args.merge)} files into {Path(args.out) / 'llm_shapes.md'}")
        return 0
    try:
        shapes, stages = select(args)
    except ValueError as err:
        print(f"llm_shapes.py: {err}", file=sys.stderr)
        return 2
    todo = plan(shapes, stages)
    if args.dry_run:
        rows = [{"stage": s.label, "dtype": s.dtype, "M": sh.M, "N": sh.N, "K": sh.K, "layers": list(sh.layers)}
                for sh, s in todo]
        print(json.dumps(rows, indent=1) if args.json else
              "\n".join(f"{r['stage']:>14} {r['M']}x{r['N']}x{r['K']}  {r['layers'][0]}" for r in rows)
              + f"\n{len(rows)} evaluations")
        return 0
    from evaluator.errors import NoDeviceError
    from evaluator.runtime.device import require_device

    try:
        require_device("sm90", with_smi=False)
    except NoDeviceError as err:  # before compiling anything: every row would fail
        print(f"llm_shapes.py: {err}", file=sys.stderr)
        return err.exit_code
    from evaluator.api import evaluate

    deadline = args.deadline_s if args.deadline_s is not None else (QUICK_DEADLINE_S if args.quick else None)
    meta = {**run_metadata(argv if argv is not None else sys.argv), "deadline_s": deadline}
    commit = git_state()["commit"]
    out = Path(args.out)
    records: list[dict] = []
    started = time.monotonic()
    for n, (shape, stage) in enumerate(todo):
        elapsed = time.monotonic() - started
        per_eval = elapsed / n if n else 0.0
        if deadline is not None and elapsed + per_eval > deadline:
            skipped = [{"stage": s.label, "M": sh.M, "N": sh.N, "K": sh.K} for sh, s in todo[n:]]
            write(out, meta, records, skipped)
            print(f"deadline: {len(skipped)} evaluations not run", file=sys.stderr)
            break
        t0 = time.monotonic()
        evaluation = evaluate(str(ROOT / stage.path), shape=shape.mnk, knobs=stage.knobs or None, run=True,
                              seed=args.seed + n)
        rec = make_record(shape, stage, evaluation, commit, datetime.now(timezone.utc).isoformat(timespec="seconds"),
                          time.monotonic() - t0)
        records.append(rec)
        write(out, meta, records, [])
        print(f"[{n + 1}/{len(todo)} {time.monotonic() - started:.0f}s] {stage.label} {shape.M}x{shape.N}x{shape.K}: "
              f"{rec['status']} eager {fmt(rec['ratio_vs_vendor'])} graph {fmt(rec['ratio_vs_vendor_graph'])} "
              f"host {fmt(rec['host_us_per_call'], 1)} us", file=sys.stderr, flush=True)
    doc = json.loads((out / "llm_shapes.json").read_text()) if records else {"records": []}
    print(json.dumps(doc, indent=1, default=str) if args.json else (out / "llm_shapes.md").read_text()
          if records else "no evaluations ran")
    return 0 if records and all(r["correct"] for r in records) else 1


if __name__ == "__main__":
    sys.exit(main())
