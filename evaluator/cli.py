"""`nearpeak eval` (the scorer, also `python -m evaluator`) and `nearpeak ladder`."""
from __future__ import annotations

import argparse
import json
import sys

from .errors import EXIT_OK, EXIT_USAGE, NearpeakError, UsageError
from .targets import known_targets


def _shape(text: str) -> tuple[int, int, int]:
    try:
        dims = tuple(int(d) for d in text.replace("x", ",").split(","))
    except ValueError:
        dims = ()
    if len(dims) != 3 or min(dims) <= 0:
        raise argparse.ArgumentTypeError(f"expected M,N,K (three positive integers), got {text!r}")
    return dims  # type: ignore[return-value]


def _knob(text: str) -> tuple[str, int]:
    name, _, value = text.partition("=")
    try:
        return name, int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAME=INT, got {text!r}") from None


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="kernel file (the kernel contract, or any Gluon file with --entry)")
    p.add_argument("--target", choices=known_targets(), help="GPU target (default: the file's TARGET)")
    p.add_argument("--shape", type=_shape, help="problem M,N,K (default: the file's benchmark shape)")
    p.add_argument("--knob", type=_knob, action="append", default=[], metavar="NAME=INT",
                   help="override one of the file's KNOBS (repeatable)")
    p.add_argument("--json", action="store_true", help="print the evaluation record as JSON (docs/eval-schema.md)")
    p.add_argument("--dump", metavar="DIR", help="write ttgir, llir, amdgcn/ptx and sass into DIR")
    p.add_argument("--entry", help="host function to call for a file that does not follow the contract")
    p.add_argument("--arg", action="append", default=[], metavar="NAME=SHAPE:DTYPE[:T]",
                   help="argument of --entry: a tensor (e.g. a=4096x8192:float16, ':T' = transposed) or NAME=INT")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--run", dest="run", action="store_true", default=None,
                     help="also check and time on a GPU (default: automatic when a GPU of the target is present)")
    run.add_argument("--static-only", dest="run", action="store_false", help="never run on a GPU")
    p.add_argument("--profile", action="store_true", help="with --run: profile the matrix unit (ncu / rocprofv3)")
    p.add_argument("--seed", type=int, help="seed of the random inputs (default: fresh)")
    p.add_argument("--timeout", type=float, default=600.0, help="wall-clock limit for a runtime evaluation, s")


def run_eval(args) -> int:
    from .api import evaluate, evaluate_foreign

    try:
        if args.entry:
            if not args.target:
                raise UsageError("--entry needs --target (a foreign file declares none)")
            record = evaluate_foreign(args.file, args.entry, args.arg, args.target, dump_dir=args.dump)
        else:
            if args.arg:
                raise UsageError("--arg is only for --entry")
            record = evaluate(args.file, target=args.target, shape=args.shape, knobs=dict(args.knob) or None,
                              run=args.run, seed=args.seed, profile=args.profile, timeout_s=args.timeout,
                              dump_dir=args.dump)
    except NearpeakError as err:  # raised only for usage problems; candidate failures come back as records
        if args.json:
            print(json.dumps(err.to_dict(), indent=2))
        else:
            print(f"nearpeak eval: {err}", file=sys.stderr)
        return err.exit_code
    if args.json:
        print(json.dumps(record, indent=2, default=str))
    else:
        from .report import format_record

        out = sys.stdout if record["status"] == "ok" else sys.stderr
        print(format_record(record), file=out)
    return record_exit_code(record)


def record_exit_code(record: dict) -> int:
    from .errors import EXIT_CANDIDATE, EXIT_NO_DEVICE

    status = record.get("status")
    if status == "ok":
        return EXIT_OK
    if status in ("usage_error", "not_found"):
        return EXIT_USAGE
    if status == "no_device":
        return EXIT_NO_DEVICE
    return EXIT_CANDIDATE


def run_ladder(args) -> int:
    from .ladder import ladder_main

    return ladder_main(args)


def register(subparsers) -> None:
    p = subparsers.add_parser("eval", help="compile, check and profile one kernel file (the scorer)",
                              description="Evaluate one Gluon kernel: static analysis of the compiled code on any "
                                          "machine; correctness and timing on a GPU of its target.")
    add_eval_arguments(p)
    p.set_defaults(func=run_eval)
    q = subparsers.add_parser("ladder", help="evaluate every reference stage of a target's ladder",
                              description="One row per reference stage: static metrics beside published figures.")
    q.add_argument("--target", choices=known_targets(), required=True)
    q.add_argument("--json", action="store_true", help="one record per stage plus the correlation, as JSON")
    q.add_argument("--run", action="store_true", help="also measure each stage on a GPU of the target")
    q.add_argument("--jobs", type=int, default=1, help="compile this many stages in parallel")
    q.set_defaults(func=run_ladder)


def eval_main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m evaluator", description="nearpeak's scorer (= nearpeak eval)")
    add_eval_arguments(parser)
    args = parser.parse_args(argv)
    return run_eval(args)


if __name__ == "__main__":
    sys.exit(eval_main())
