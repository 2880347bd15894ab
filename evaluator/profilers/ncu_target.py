"""The program the profilers run: launch one candidate a few times on fresh random inputs, then exit.

    python -m evaluator.profilers.ncu_target FILE --shape M N K [--knobs JSON] [--seed S] [--launches N] [--vendor]

It does nothing else on the GPU besides filling inputs, so a profiler filtered by the candidate's kernel
names sees only the candidate's launches. The launches are bracketed by cudaProfilerStart/Stop, so a profiler
started with `--profile-from-start off` sees them alone, whatever their kernels are called. `--vendor`
launches the fair vendor baseline on the same operands instead (`evaluator.runtime.timing.vendor_call`), to
profile the library a candidate is compared against. `driver_command` is that command line and `run_profiler` runs a
profiler's argv wrapped around it; both profilers (ncu, rocprofv3) use them.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys

from ..sandbox import PROJECT_ROOT


def driver_command(path: str, shape, knobs: dict, seed: int, launches: int, python: str = sys.executable) -> list[str]:
    """argv that runs this driver on a candidate: the command a profiler wraps."""
    return [python, "-m", "evaluator.profilers.ncu_target", str(path), "--shape", *(str(d) for d in shape),
            "--knobs", json.dumps(knobs), "--seed", str(seed), "--launches", str(launches)]


def run_profiler(cmd: list[str], timeout_s: float) -> subprocess.CompletedProcess | None:
    """Run a profiler around the driver from the project root (where `-m evaluator...` resolves); None when it
    ran past `timeout_s`."""
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False, cwd=PROJECT_ROOT)
    except subprocess.TimeoutExpired:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.profilers.ncu_target")
    parser.add_argument("file")
    parser.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"))
    parser.add_argument("--knobs", default="{}", help="JSON object of knob overrides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launches", type=int, default=3)
    parser.add_argument("--vendor", action="store_true", help="launch the fair vendor baseline instead")
    args = parser.parse_args(argv)

    import torch

    from ..contract import load_candidate
    from ..runtime.correctness import generator_for, make_arguments, shape_seed
    from ..runtime.timing import vendor_call

    module, spec = load_candidate(args.file)
    shape = tuple(args.shape or spec.benchmark_shape)
    knobs = {**spec.knobs, **json.loads(args.knobs)}
    device = torch.device("cuda", torch.cuda.current_device())
    launch_args = make_arguments(spec, shape, device, generator_for(device, shape_seed(args.seed, shape)))
    if args.vendor:
        call, name = vendor_call(spec, launch_args)
        if call is None:
            print(json.dumps({"error": name}), file=sys.stderr)
            return 2
    else:
        def call():
            module.launch(**launch_args, **knobs)
    call()  # warm-up outside the profiled range: JIT compile, library heuristics
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStart()
    for _ in range(args.launches):
        call()
    torch.cuda.synchronize()
    torch.cuda.cudart().cudaProfilerStop()
    finite = None if args.vendor else bool(torch.isfinite(launch_args["c"].float()).all())
    print(json.dumps({"launches": args.launches, "shape": list(shape), "output_finite": finite,
                      "vendor": name if args.vendor else None}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
