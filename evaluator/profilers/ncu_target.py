"""The program the profilers run: launch one candidate a few times on fresh random inputs, then exit.

    python -m evaluator.profilers.ncu_target FILE --shape M N K [--knobs JSON] [--seed S] [--launches N]

It does nothing else on the GPU besides filling inputs, so a profiler filtered by the candidate's kernel
names sees only the candidate's launches.
"""
from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator.profilers.ncu_target")
    parser.add_argument("file")
    parser.add_argument("--shape", type=int, nargs=3, metavar=("M", "N", "K"))
    parser.add_argument("--knobs", default="{}", help="JSON object of knob overrides")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args(argv)

    import torch

    from ..contract import load_candidate
    from ..runtime.correctness import generator_for, make_arguments, shape_seed

    module, spec = load_candidate(args.file)
    shape = tuple(args.shape or spec.benchmark_shape)
    knobs = {**spec.knobs, **json.loads(args.knobs)}
    device = torch.device("cuda", torch.cuda.current_device())
    launch_args = make_arguments(spec, shape, device, generator_for(device, shape_seed(args.seed, shape)))
    for _ in range(args.launches):
        module.launch(**launch_args, **knobs)
    torch.cuda.synchronize()
    finite = bool(torch.isfinite(launch_args["c"].float()).all())
    print(json.dumps({"launches": args.launches, "shape": list(shape), "output_finite": finite}), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
