"""Sweep v11's decode-path knobs (split S, reducer chunk, tile width) at LLM decode shapes on a GPU.

    PYTHONPATH=. python benchmarks/v11_decode_sweep.py [--dtype bf16,fp8] [--shapes 96x8192x8192,...]
        [--name v11_decode_sweep] [--deadline-s 240] [--out DIR] [--dry-run]

Exploration for the decision table of kernels/sm90/*/v11_*.py (issue 25), not a scored result: every
configuration is checked (two launches on fresh inputs against the float64 reference, so a counter that is not
reset shows on the second), then timed under CUDA-graph replay against the vendor library, interleaved replay by
replay, through the evaluator's own `timing.graph_times` over rotating input sets. The scored figures are
benchmarks/llm_shapes.py's (`evaluator.api.evaluate(run=True)`).
Writes NAME.json (one record per configuration, as soon as it is measured: a run cut short keeps what it
finished) and NAME.md (fastest configuration per shape vs the table's own choice); NAME is v11_decode_sweep.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks import results_meta
from evaluator.contract import load_candidate

STAGES = {"bf16": "kernels/sm90/bf16/v11_small_m.py", "fp8": "kernels/sm90/fp8/v11_fp8_small_m.py"}
# The M <= 128 shapes of benchmarks/llm_shapes.py --quick, those furthest below the vendor at stop 32 first.
SHAPES = [(64, 10240, 8192), (128, 4096, 4096), (16, 28672, 4096), (1, 6144, 4096), (32, 8192, 8192),
          (64, 3584, 18944), (16, 4096, 14336), (16, 8192, 28672)]
SPLITS = (1, 2, 3, 4, 6, 8, 12, 16)
L2_BYTES = 60 << 20      # H100/H200's L2: the input sets rotate over twice this
PER_GRAPH_MIN = 8        # calls captured per graph, at least
REPLAYS = 25


@dataclass(frozen=True)
class Config:
    """One point of the sweep: knob overrides on the stage's defaults; `table` marks the table's own choice."""

    knobs: dict
    table: bool = False

    @property
    def label(self) -> str:
        return ",".join(f"{k}={v}" for k, v in sorted(self.knobs.items())) or "table"


def configs_for(dtype: str, shape, splits=SPLITS, chunk8: bool = True) -> list[Config]:
    """The table's choice, the same with the old fixed 8-token reducer chunk, each split S, and each tile width."""
    k_steps = -(-shape[2] // 64) if dtype == "bf16" else -(-shape[2] // 128)
    out = [Config({}, table=True)] + ([Config({"SMALL_CHUNK_M": 8})] if chunk8 else [])
    out += [Config({"SMALL_SPLIT_K": s}) for s in splits if s == 1 or k_steps >= 4 * s]
    out += [Config({"SMALL_BLOCK_N": 64}), Config({"SMALL_BLOCK_N": 128})]
    return out


def plan_of(module, spec, shape, knobs: dict):
    """The schedule the stage's table makes for these knobs (no GPU needed)."""
    import inspect

    merged = {**spec.knobs, **knobs}
    wanted = [n for n in inspect.signature(module.schedule).parameters if n in merged]
    return module.schedule(*shape, 132, **{n: merged[n] for n in wanted})


def measure(module, spec, shape, config: Config, device) -> dict:
    import torch

    from evaluator.runtime import correctness as corr
    from evaluator.runtime import timing

    knobs = {**spec.knobs, **config.knobs}
    checks = []
    for salt in (1, 2):   # the second launch of a geometry finds the counters the first one left
        args = corr.make_arguments(spec, shape, device, corr.generator_for(device, corr.shape_seed(7, shape, salt)))
        check = corr.run_and_judge(module.launch, args, spec, knobs, shape, torch.cuda.synchronize)
        checks.append(check.ok)
        del args
    if not all(checks):
        return {"correct": False}
    first = corr.make_arguments(spec, shape, device, corr.generator_for(device, 11))
    per_set = sum(t.numel() * t.element_size() for t in first.values())
    count = timing.input_set_count(per_set, L2_BYTES)
    sets = [first] + [corr.make_arguments(spec, shape, device, corr.generator_for(device, 11 + i))
                      for i in range(1, count)]
    vendors = [timing.vendor_call(spec, s)[0] for s in sets]
    per_graph = max(PER_GRAPH_MIN, count)
    got = timing.graph_times({"v11": lambda i: module.launch(**sets[i % count], **knobs),
                              "vendor": lambda i: vendors[i % count]()}, device, per_graph, REPLAYS)
    if isinstance(got["v11"], str) or isinstance(got["vendor"], str):
        return {"correct": True, "error": str(got)}
    return {"correct": True, "graph_ms": got["v11"].median_ms, "vendor_graph_ms": got["vendor"].median_ms,
            "ratio_vs_vendor_graph": got["vendor"].median_ms / got["v11"].median_ms}


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    """`96x8192x8192,128x10240x8192` -> [(96, 8192, 8192), (128, 10240, 8192)], each read by the evaluator's
    `parse_shape`; ValueError for a malformed one or one with a weight (a sweep has no objective to weigh)."""
    from evaluator.errors import UsageError
    from evaluator.request import parse_shape

    shapes = []
    for item in filter(None, text.split(",")):
        if ":" in item:
            raise ValueError(f"{item!r}: a sweep shape takes no weight")
        try:
            shapes.append(parse_shape(item.lower())[0])
        except UsageError as err:
            raise ValueError(err.message) from None
    return shapes


def write_table(records: list[dict], meta: dict, out: Path, name: str) -> None:
    lines = ["# v11 decode-path sweep (exploration, not a scored result)", ""] + results_meta.markdown_lines(meta)
    lines += ["", ("Graph-replay GPU time vs the vendor, through evaluator.runtime.timing.graph_times; each row's "
              "vendor is re-timed beside it."), "",
              "| dtype | M x N x K | table's choice | table ratio | fastest | fastest ratio | incorrect |",
              "|---|---|---|---|---|---|---|"]
    keys = sorted({(r["dtype"], tuple(r["shape"])) for r in records})
    for dtype, shape in keys:
        rows = [r for r in records if r["dtype"] == dtype and tuple(r["shape"]) == shape]
        timed = [r for r in rows if r.get("ratio_vs_vendor_graph")]
        table = next((r for r in timed if r["table"]), None)
        best = max(timed, key=lambda r: r["ratio_vs_vendor_graph"], default=None)
        bad = [r["config"] for r in rows if r.get("correct") is False]
        chosen = f"{table['schedule']} | {table['ratio_vs_vendor_graph']:.3f}" if table else "- | -"
        fastest = (f"{best['config']} ({best['schedule']}) | {best['ratio_vs_vendor_graph']:.3f}" if best
                   else "- | -")
        lines.append(f"| {dtype} | {'x'.join(map(str, shape))} | {chosen} | {fastest} | {', '.join(bad) or 'none'} |")
    (out / f"{name}.md").write_text("\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", default="bf16,fp8")
    parser.add_argument("--shapes", default="", help="MxNxK,... (default: the M <= 128 shapes of llm_shapes --quick)")
    parser.add_argument("--name", default="v11_decode_sweep", help="output file stem")
    parser.add_argument("--splits", default=",".join(map(str, SPLITS)), help="split-K values to try")
    parser.add_argument("--no-chunk8", action="store_true", help="leave out the fixed 8-token reducer chunk")
    parser.add_argument("--deadline-s", type=float, default=240.0)
    parser.add_argument("--out", default=".")
    parser.add_argument("--dry-run", action="store_true", help="print the planned configurations, run nothing")
    args = parser.parse_args(argv)
    dtypes = [d for d in args.dtype.split(",") if d]
    unknown = [d for d in dtypes if d not in STAGES]
    if unknown:
        print(f"unknown dtype(s) {unknown}; choose from {sorted(STAGES)}", file=sys.stderr)
        return 2
    try:
        shapes = parse_shapes(args.shapes) or SHAPES
        splits = tuple(int(v) for v in args.splits.split(",") if v)
    except ValueError as err:
        print(f"--shapes/--splits: {err}", file=sys.stderr)
        return 2
    plan = []
    for dtype in dtypes:
        module, spec = load_candidate(STAGES[dtype])
        for shape in shapes:
            seen = set()
            for config in configs_for(dtype, shape, splits, not args.no_chunk8):
                sched = plan_of(module, spec, shape, config.knobs)
                if (sched.why, sched.chunk_m) in seen:      # the same schedule as one already planned
                    continue
                seen.add((sched.why, sched.chunk_m))
                plan.append((dtype, module, spec, shape, config, sched))
    if args.dry_run:
        for dtype, _, _, shape, config, sched in plan:
            print(f"{dtype:5} {'x'.join(map(str, shape)):>14}  {config.label:28} {sched.why}, chunk {sched.chunk_m}")
        print(f"{len(plan)} configurations")
        return 0
    import torch
    if not torch.cuda.is_available():
        print("needs a CUDA GPU (use --dry-run to see the plan)", file=sys.stderr)
        return 2
    device = torch.device("cuda")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = {**results_meta.run_metadata(), "device": torch.cuda.get_device_name(device)}
    records: list[dict] = []
    start = time.monotonic()
    for n, (dtype, module, spec, shape, config, sched) in enumerate(plan, 1):
        if time.monotonic() - start > args.deadline_s:
            print(f"deadline: {len(plan) - n + 1} configurations not run")
            break
        try:
            got = measure(module, spec, shape, config, device)
        except Exception as exc:  # noqa: BLE001 - one configuration's failure is a record, not the end of the sweep
            got = {"correct": None, "error": f"{type(exc).__name__}: {exc}"[:300]}
        record = {"dtype": dtype, "shape": list(shape), "config": config.label, "table": config.table,
                  "schedule": f"{sched.why}, chunk {sched.chunk_m}", "knobs": config.knobs, **got}
        records.append(record)
        ratio = got.get("ratio_vs_vendor_graph")
        print(f"[{n}/{len(plan)} {time.monotonic() - start:.0f}s] {dtype} {'x'.join(map(str, shape))} "
              f"{config.label}: " + (f"{ratio:.3f}" if ratio else str(got)[:160]), flush=True)
        (out / f"{args.name}.json").write_text(json.dumps({"meta": meta, "records": records}, indent=1))
    write_table(records, meta, out, args.name)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
