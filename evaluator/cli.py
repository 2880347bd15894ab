"""`nearpeak eval` (the scorer, also `python -m evaluator`) and `nearpeak ladder`."""
from __future__ import annotations

import argparse
import glob
import json
import os
import sys
import time
from pathlib import Path

from .api import evaluate
from .batch import (
    DEFAULT_FILE_TIMEOUT_S,
    GLOB_CHARS,
    ScoreOptions,
    failure_record,
    plan_batch,
    run_batch,
    sandboxed_seconds,
    score_file,
    summary_table,
    target_note,
)
from .errors import EXIT_CANDIDATE, EXIT_NO_DEVICE, EXIT_OK, EXIT_USAGE, NearpeakError, UsageError
from .foreign import parse_args, parse_env
from .ladder import ladder_main
from .report import format_record
from .targets import all_targets, known_targets


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


def _config_index(text: str) -> int:
    try:
        index = int(text)
    except ValueError:
        index = -1
    if index < 0:
        raise argparse.ArgumentTypeError(f"expected a config index (0, 1, ...), got {text!r}")
    return index


def add_eval_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", metavar="PATH",
                   help="kernel file (the kernel contract, or any Gluon/Triton file with --entry); several files, "
                        "directories or globs score them all (batch mode)")
    p.add_argument("--target", choices=known_targets(), help="GPU target (default: the file's TARGET)")
    p.add_argument("--shape", type=_shape, help="problem M,N,K (default: the file's benchmark shape)")
    p.add_argument("--knob", type=_knob, action="append", default=[], metavar="NAME=INT",
                   help="override one of the file's KNOBS (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="print each evaluation record as one JSON line (docs/eval-schema.md)")
    p.add_argument("--dump", metavar="DIR", help="write ttgir, llir, amdgcn/ptx and sass into DIR")
    foreign = p.add_argument_group("files that do not follow the kernel contract")
    foreign.add_argument("--entry", help="host function to call, e.g. matmul")
    foreign.add_argument("--arg", action="append", default=[], metavar="NAME=VALUE",
                         help="argument of --entry (repeatable): a tensor SHAPE:DTYPE[:T] (a=4096x8192:fp16, ':T' = "
                              "transposed), the file's own module-level object (sched=@GroupedScheduler), or a "
                              "Python value (alpha=1.5, relu=True, tiles=(128,128), mode=fast)")
    foreign.add_argument("--path", dest="import_paths", action="append", default=[], metavar="DIR",
                         help="folder the file imports from, beside its own (repeatable; e.g. ../../utils)")
    foreign.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                         help="environment variable the file reads (repeatable); recorded in the record")
    foreign.add_argument("--config", type=_config_index, metavar="N",
                         help="score only config N of an autotuned kernel (default: every config, one record each)")
    run = p.add_mutually_exclusive_group()
    run.add_argument("--run", dest="run", action="store_true", default=None,
                     help="also check and time on a GPU (default: automatic when a GPU of the target is present)")
    run.add_argument("--static-only", dest="run", action="store_false", help="never run on a GPU")
    p.add_argument("--profile", action="store_true", help="with --run: profile the matrix unit (ncu / rocprofv3)")
    p.add_argument("--seed", type=int, help="with --run: seed of the random inputs (default: fresh)")
    p.add_argument("--timeout", type=float, metavar="S",
                   help="wall-clock limit per file, s (default: 120 static, 600 with a runtime evaluation)")
    batch = p.add_argument_group("batch mode")
    batch.add_argument("--jobs", type=int, metavar="N", help="score N files at a time (default: one per core)")
    batch.add_argument("--jsonl", metavar="OUT", help="append one JSON line per record to OUT as each file finishes")
    batch.add_argument("--resume", action="store_true", help="skip files that already have a record in --jsonl OUT")
    batch.add_argument("--manifest", metavar="FILE",
                       help="per-file entry, arguments, target, folders and environment of foreign files (TOML or "
                            "JSON; default: nearpeak-manifest.toml/.json in a directory given)")


def records_for_parse_errors(parser: argparse.ArgumentParser, argv: list[str]) -> None:
    """With --json, a malformed command line still prints a record (status usage_error) before argparse's
    usage message and exit 2: a script reading stdout always gets one."""
    report = parser.error

    def error(message: str):
        if "--json" in argv:
            print(json.dumps(failure_record(None, None, "usage_error", message)), flush=True)
        report(message)

    parser.error = error


def _is_batch(args) -> bool:
    return (len(args.paths) > 1 or args.jobs is not None or bool(args.jsonl) or args.resume or bool(args.manifest)
            or any(Path(p).is_dir() or any(c in p for c in GLOB_CHARS) for p in args.paths))


def check_mode(args, batch: bool) -> None:
    """Flags that do not apply to what was asked are usage errors, never silently ignored."""
    def refuse(flags: list[str], why: str) -> None:
        if flags:
            raise UsageError(f"{', '.join(flags)} {'does' if len(flags) == 1 else 'do'} not apply {why}")

    given = {"--run": args.run is True, "--profile": args.profile, "--seed": args.seed is not None,
             "--shape": args.shape is not None, "--knob": bool(args.knob), "--dump": bool(args.dump)}
    parse_env(args.env)  # malformed NAME=VALUE fails here, before any process starts
    if args.entry:
        refuse([f for f in ("--run", "--profile", "--seed", "--shape", "--knob") if given[f]],
               "with --entry: a foreign file is compiled through its own host function, with its own shapes "
               "(give them with --arg)")
        parse_args(args.arg)  # malformed arguments and unknown dtypes fail here, before any process starts
    elif not batch:  # in a batch they reach files whose entry the manifest names or the scorer guesses
        refuse([f for f, on in (("--arg", bool(args.arg)), ("--config", args.config is not None),
                                ("--path", bool(args.import_paths)), ("--env", bool(args.env))) if on],
               "without --entry: they are the arguments, autotune config, import folders and environment of a "
               "foreign file's host function")
    if args.profile and args.run is not True:
        raise UsageError("--profile needs --run (profiling happens on a GPU)")
    if args.dump and Path(args.dump).exists() and not Path(args.dump).is_dir():
        raise UsageError(f"--dump {args.dump}: a file is in the way; --dump names a directory to write into")
    if not batch and Path(args.paths[0]).is_file() and Path(args.paths[0]).suffix != ".py":
        raise UsageError(f"{args.paths[0]} is not a Python kernel file (a .py file following "
                         "docs/kernel-contract.md, or a Gluon/Triton file with --entry)")
    if batch:
        refuse([f for f in ("--run", "--profile", "--seed", "--dump") if given[f]],
               "to batch scoring, which is static: evaluate one file at a time for them")


def _options(args, timeout_s: float) -> ScoreOptions:
    return ScoreOptions(target=args.target, entry=args.entry, args=tuple(args.arg), config=args.config,
                        shape=args.shape, knobs=dict(args.knob), timeout_s=timeout_s, dump_dir=args.dump,
                        import_paths=tuple(str(Path(p).resolve()) for p in args.import_paths),
                        env=parse_env(args.env), manifest=args.manifest)


def _print_records(records: list[dict], as_json: bool) -> None:
    for record in records:
        if as_json:
            print(json.dumps(record, default=str))
            continue
        out = sys.stdout if record["status"] == "ok" else sys.stderr
        config = record.get("config")
        if config:
            values = "; ".join(", ".join(f"{k}={v}" for k, v in c["values"].items()) for c in config["choices"])
            print(f"config {config['index']} of {config['count']}: {values}", file=out)
        print(format_record(record), file=out)


def _gpu_node_present() -> bool:
    """Any GPU device file here: only then can a runtime evaluation happen without --run."""
    return any(glob.glob(t.toolchain.device_files) for t in all_targets())


def run_eval(args) -> int:
    try:
        batch = _is_batch(args)
        check_mode(args, batch)
        if batch:
            return run_batch_eval(args)
        path = args.paths[0]
        note = target_note(path, args.target)
        if note:
            print(f"nearpeak eval: note: {note}", file=sys.stderr)
        runtime = not args.entry and (args.run is True or (args.run is None and _gpu_node_present()))
        if runtime:
            records = [evaluate(path, target=args.target, shape=args.shape, knobs=dict(args.knob) or None,
                                run=args.run, seed=args.seed, profile=args.profile, timeout_s=args.timeout,
                                dump_dir=args.dump)]
            if note:
                records[0]["note"] = note
        else:
            records = score_file(path, _options(args, args.timeout or DEFAULT_FILE_TIMEOUT_S))
    except NearpeakError as err:  # usage problems found before anything runs; candidate failures are records
        if args.json:
            record = failure_record(err.file or args.paths[0], args.target, err.status, err.message, line=err.line)
            print(json.dumps(record))
        else:
            print(f"nearpeak eval: {err}", file=sys.stderr)
        return err.exit_code
    _print_records(records, args.json)
    return next((code for code in map(record_exit_code, records) if code != EXIT_OK), EXIT_OK)


def run_batch_eval(args) -> int:
    """`nearpeak eval PATH... [--jobs N] [--jsonl OUT] [--resume] [--manifest F]`: progress on stderr, the summary
    at the end; exit 1 (EXIT_CANDIDATE) when no file scored."""
    options = _options(args, args.timeout or DEFAULT_FILE_TIMEOUT_S)
    planned = plan_batch(args.paths, options)
    for note in filter(None, (target_note(f.path, f.options.target) for f in planned if f.skipped is None)):
        print(f"nearpeak eval: note: {note}", file=sys.stderr)
    labels = {f.path: f.label for f in planned}
    started = time.monotonic()

    def progress(path: str, records: list[dict], done: int, total: int) -> None:
        statuses = ", ".join(r["status"] + (f"#{r['config']['index']}" if r.get("config") else "") for r in records)
        wall = max(map(sandboxed_seconds, records))
        print(f"[{done}/{total}] {labels.get(path, path)}: {statuses} ({wall:.1f} s)", file=sys.stderr, flush=True)
        if args.json:
            for record in records:
                print(json.dumps(record, default=str), flush=True)

    jobs = args.jobs if args.jobs is not None else (os.cpu_count() or 1)
    records = run_batch(planned, options, jobs=jobs, jsonl=args.jsonl, resume=args.resume, on_file=progress)
    wall = time.monotonic() - started
    files = len({r["file"] for r in records})
    summary = summary_table(records) + f"\n\n{files} files in {wall:.1f} s with {jobs} jobs"
    print(summary, file=sys.stderr if args.json else sys.stdout)
    if records and not any(r.get("status") == "ok" for r in records):
        print("nearpeak eval: no file scored", file=sys.stderr)
        return EXIT_CANDIDATE
    return EXIT_OK


def record_exit_code(record: dict) -> int:
    status = record.get("status")
    if status == "ok":
        return EXIT_OK
    if status in ("usage_error", "not_found", "call_error"):
        return EXIT_USAGE
    if status == "no_device":
        return EXIT_NO_DEVICE
    return EXIT_CANDIDATE


def run_ladder(args) -> int:
    return ladder_main(args)


def register(subparsers, argv: list[str] | None = None) -> None:
    """Add `eval` and `ladder` to a command's subparsers; `argv` is the command line they will parse (default
    sys.argv[1:]), which decides whether a parse error also prints a JSON record (--json)."""
    p = subparsers.add_parser("eval", help="score kernel files: compile, check and profile (the scorer)",
                              description="Evaluate Gluon/Triton kernels: static analysis of the compiled code on any "
                                          "machine, each file in its own sandboxed process; correctness and timing "
                                          "on a GPU of its target. Several files, directories or globs are scored "
                                          "in parallel (batch mode) with a summary at the end.")
    add_eval_arguments(p)
    records_for_parse_errors(p, sys.argv[1:] if argv is None else argv)
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
    records_for_parse_errors(parser, sys.argv[1:] if argv is None else argv)
    args = parser.parse_args(argv)
    return run_eval(args)


if __name__ == "__main__":
    sys.exit(eval_main())
