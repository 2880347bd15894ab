"""`nearpeak run | history | show | replay`: launching an optimization run and reading it back."""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

from evaluator.errors import EXIT_CANDIDATE, EXIT_OK, EXIT_USAGE
from evaluator.targets import TARGETS

from .config import RunConfig
from .evaluation import MEASURED, OBJECTIVES, STATIC, Evaluator, describe_failure
from .ledger import MAIN, Ledger, LedgerError
from .loop import KERNEL, Budget, Optimizer, baseline_commit
from .prompt import PlaybookEntry
from .proposers.ladder import LadderProposer, default_ladder_dir, load_stages, stage_paths
from .proposers.llm import LLMProposer, LLMSettings, endpoint_configured
from .proposers.tune import TuneCache, TuneProposer
from .reading import format_table, history, history_json, plot, run_config, show, verify
from .source import declaration

DEFAULT_MODEL = "gpt-4o"
TUNE_CACHE = "tune-cache.json"


class CommandError(Exception):
    """A problem with what the user asked for: printed without a traceback, exit code 2."""


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _non_negative(kind):
    def parse(text: str):
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
        return value
    return parse


def register(subparsers) -> None:
    run = subparsers.add_parser("run", help="optimize a kernel: propose, evaluate, accept, commit to a run ledger",
                                description="Start an optimization run (or --resume one). Each run is a git "
                                            "repository under --runs-dir; see docs/ledger-format.md.")
    run.add_argument("--target", choices=sorted(TARGETS),
                     help="GPU family to optimize for (default: the starting kernel's TARGET)")
    run.add_argument("--from", dest="from_file", metavar="KERNEL_FILE",
                     help="starting kernel (contract file; default: stage v00 of the target's ladder, gfx950 if "
                          "no target is given)")
    run.add_argument("--proposer", choices=("llm", "ladder", "tune"),
                     help="where candidates come from (default: llm when an endpoint is configured through "
                          "OPENAI_API_KEY, OPENAI_BASE_URL or --base-url, else ladder)")
    run.add_argument("--steps", type=_positive_int, help="steps to run (default 3; with --resume: the new total)")
    run.add_argument("--candidates", type=_positive_int, default=1, help="candidates per step (default 1)")
    run.add_argument("--model", help=f"LLM model name (default: $OPENAI_MODEL or {DEFAULT_MODEL})")
    run.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    run.add_argument("--runs-dir", default="runs", help="where run repositories live (default ./runs)")
    run.add_argument("--run-id", help="name of the new run (default: KERNEL-TARGET-UTCTIME)")
    run.add_argument("--resume", metavar="RUN", help="continue a run (a path, or a run id under --runs-dir)")
    run.add_argument("--min-gain", type=_non_negative(float), default=0.01,
                     help="measured mode: accept when the speedup's 95%% lower bound exceeds 1 + this (default 0.01)")
    run.add_argument("--max-spills", type=_non_negative(int), default=0,
                     help="spill instructions allowed in the hot loop by the static screen (default 0)")
    run.add_argument("--max-tokens", type=_positive_int,
                     help="stop once the run has used this many LLM tokens (checked between candidates)")
    run.add_argument("--max-wall", type=_non_negative(float), metavar="SECONDS",
                     help="stop after this many seconds of this invocation (checked between candidates)")
    run.add_argument("--seed", type=int, default=0, help="seed for LLM sampling and runtime inputs (default 0)")
    run.add_argument("--request-timeout", type=_non_negative(float), default=120.0,
                     help="seconds per LLM request (default 120)")
    run.add_argument("--retries", type=_non_negative(int), default=3,
                     help="LLM retries per candidate after the first try (default 3)")
    run.add_argument("--retry-backoff", type=_non_negative(float), default=2.0,
                     help="seconds before the first LLM retry after a transport error; doubles (default 2)")
    run.add_argument("--ladder-dir", help="ladder of reference stages (default: kernels/<target>/<dtype>)")
    run.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    run.set_defaults(func=cmd_run)

    hist = subparsers.add_parser("history", help="every step and attempt of a run, with verdicts and figures")
    hist.add_argument("run", metavar="RUN", help="run path or id")
    hist.add_argument("--runs-dir", default="runs")
    hist.add_argument("--json", action="store_true")
    hist.set_defaults(func=cmd_history)

    sh = subparsers.add_parser("show", help="the diff and evaluation of one step (3) or candidate (3.2)")
    sh.add_argument("run", metavar="RUN")
    sh.add_argument("step", metavar="STEP")
    sh.add_argument("--runs-dir", default="runs")
    sh.set_defaults(func=cmd_show)

    rep = subparsers.add_parser("replay", help="walk a run's accepted steps; re-check or plot them")
    rep.add_argument("run", metavar="RUN")
    rep.add_argument("--verify", action="store_true", help="re-evaluate each accepted step and flag drift")
    rep.add_argument("--plot", metavar="FILE.png", help="draw the climb with matplotlib")
    rep.add_argument("--runs-dir", default="runs")
    rep.set_defaults(func=cmd_replay)


def _guarded(func):
    """Turn user-facing failures into a message and an exit code instead of a traceback."""
    def wrapper(args) -> int:
        try:
            return func(args)
        except (CommandError, LedgerError) as exc:
            _say(f"nearpeak {args.command}: error: {exc}")
            return EXIT_USAGE
        except KeyboardInterrupt:
            _say(f"nearpeak {args.command}: interrupted")
            return 130
    wrapper.__doc__ = func.__doc__
    return wrapper


def _run_path(run: str, runs_dir: str) -> Path:
    path = Path(run)
    if path.is_dir():
        return path
    candidate = Path(runs_dir) / run
    if candidate.is_dir():
        return candidate
    raise CommandError(f"no run {run!r} (looked for the directory {path} and {candidate})")


def _open(run: str, runs_dir: str) -> Ledger:
    return Ledger(_run_path(run, runs_dir))


def _require_endpoint(base_url: str | None) -> None:
    if not endpoint_configured(base_url):
        raise CommandError("the llm proposer needs an endpoint: set OPENAI_API_KEY (and OPENAI_BASE_URL) or "
                           "pass --base-url")


# -- run -----------------------------------------------------------------------------------------------------


def _new_run(args) -> tuple[Ledger, RunConfig]:
    if not args.from_file:
        # A bare `nearpeak run` starts from the first reference stage of the target's main ladder (gfx950 by
        # default, which needs neither a GPU nor an API key: the ladder proposer and the static objective).
        args.target = args.target or "gfx950"
        stages = stage_paths(default_ladder_dir(args.target))
        if not stages:
            raise CommandError(f"no --from given and no reference stages in {default_ladder_dir(args.target)}")
        args.from_file = str(stages[0])
        print(f"no --from given: starting from {args.from_file}", file=sys.stderr)
    kernel = Path(args.from_file)
    if not kernel.is_file():
        raise CommandError(f"no kernel file {kernel}")
    source = kernel.read_text()
    declared = declaration(source, "TARGET")
    args.target = args.target or declared
    if declared != args.target:
        raise CommandError(f"{kernel} declares TARGET = {declared!r}, not {args.target!r}")
    proposer = args.proposer or ("llm" if endpoint_configured(args.base_url) else "ladder")
    if proposer == "llm":
        _require_endpoint(args.base_url)
    run_id = args.run_id or f"{kernel.stem}-{args.target}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    path = Path(args.runs_dir) / run_id
    if path.exists() and any(path.iterdir()):
        raise CommandError(f"{path} already exists; pick another --run-id or continue it with --resume {run_id}")

    _say(f"evaluating the starting kernel {kernel} for {args.target} ...")
    evaluator = Evaluator(args.target, args.seed)
    with tempfile.TemporaryDirectory(prefix="nearpeak-start-") as tmp:
        copy = Path(tmp) / KERNEL
        copy.write_text(source)
        record = evaluator.record(copy, run=None)
    if record.get("status") != "ok":
        raise StartFailure(f"the starting kernel does not evaluate: {describe_failure(record)}")
    mode = MEASURED if record.get("runtime") else STATIC
    config = RunConfig(
        run_id=run_id, target=args.target, source_file=str(kernel), proposer=proposer, steps=args.steps or 3,
        candidates=args.candidates, min_gain=args.min_gain, max_spills=args.max_spills, seed=args.seed, mode=mode,
        objective=OBJECTIVES[mode], model=(args.model or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL)
        if proposer == "llm" else None, base_url=args.base_url, request_timeout=args.request_timeout,
        retries=args.retries, retry_backoff=args.retry_backoff, ladder_dir=args.ladder_dir,
        max_tokens=args.max_tokens, max_wall=args.max_wall,
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        triton_version=str(record.get("triton_version")))
    files, message = baseline_commit(config, source, record)
    ledger = Ledger.create(path, files, message)
    _say(f"created run {path} ({mode} mode: {config.objective})")
    return ledger, config


def _resumed_run(args) -> tuple[Ledger, RunConfig]:
    ledger = _open(args.resume, args.runs_dir)
    ledger.lock()
    cleaned = ledger.recover()
    if cleaned:
        _say(f"recovered {ledger.path}: {', '.join(cleaned)}")
    config = run_config(ledger)
    overrides = {k: v for k, v in {"steps": args.steps, "base_url": args.base_url, "model": args.model,
                                   "max_tokens": args.max_tokens}.items() if v is not None}
    # The wall-clock budget is per invocation: a run stopped by it must not stop again at once on resume.
    config = dataclasses.replace(config, **overrides, max_wall=args.max_wall)
    _say(f"resuming {ledger.path} ({config.proposer} proposer, {config.mode} mode, up to step {config.steps})")
    return ledger, config


class StartFailure(Exception):
    """The starting kernel itself fails to evaluate: a candidate problem (exit 1), not a usage one."""


def make_proposer(config: RunConfig, runs_dir: Path, dtype: str | None):
    """The configured proposer; `dtype` (the starting kernel's DTYPE) picks the target's ladder."""
    if config.proposer == "tune":
        return TuneProposer(TuneCache(runs_dir / TUNE_CACHE))
    ladder = Path(config.ladder_dir) if config.ladder_dir else default_ladder_dir(config.target, dtype)
    if config.proposer == "ladder":
        if not ladder.is_dir():
            raise CommandError(f"no ladder directory {ladder}")
        return LadderProposer(ladder)
    _require_endpoint(config.base_url)
    playbook = [PlaybookEntry(s.name, s.technique) for s in load_stages(ladder)] if ladder.is_dir() else []
    settings = LLMSettings(model=config.model or DEFAULT_MODEL, base_url=config.base_url,
                           request_timeout=config.request_timeout, retries=config.retries,
                           backoff=config.retry_backoff, seed=config.seed)
    return LLMProposer(settings, playbook, config.objective)


@_guarded
def cmd_run(args) -> int:
    """Start or resume a run; progress on stderr, the summary table (or JSON) on stdout."""
    if args.resume and (args.target or args.from_file or args.run_id):
        raise CommandError("--resume continues an existing run; do not combine it with --target, --from or --run-id")
    try:
        ledger, config = _resumed_run(args) if args.resume else _new_run(args)
    except StartFailure as exc:
        _say(f"nearpeak run: {exc}")
        return EXIT_CANDIDATE
    try:
        root = ledger.main_line()[0].sha
        proposer = make_proposer(config, ledger.path.parent, declaration(ledger.read(root, KERNEL).decode(), "DTYPE"))
        budget = Budget(max_tokens=config.max_tokens, max_wall=config.max_wall)
        optimizer = Optimizer(ledger, config, proposer, Evaluator(config.target, config.seed), budget, _say)
        result = optimizer.run()
    finally:
        ledger.unlock()
    _say(f"run stopped: {result.stop_reason}")
    if args.json:
        print(json.dumps({**history_json(ledger), "stop_reason": result.stop_reason, "steps_run": result.steps_run},
                         indent=1))
    else:
        print(f"run: {ledger.path}\nmode: {config.mode} ({config.objective})\nstopped: {result.stop_reason}\n")
        print(format_table(history(ledger)))
    return EXIT_OK


# -- reading -------------------------------------------------------------------------------------------------


@_guarded
def cmd_history(args) -> int:
    ledger = _open(args.run, args.runs_dir)
    if args.json:
        print(json.dumps(history_json(ledger), indent=1))
        return EXIT_OK
    config = run_config(ledger)
    print(f"run: {ledger.path}\ntarget: {config.target}  proposer: {config.proposer}  mode: {config.mode}\n"
          f"accept rule: {config.objective}\n")
    print(format_table(history(ledger)))
    return EXIT_OK


@_guarded
def cmd_show(args) -> int:
    ledger = _open(args.run, args.runs_dir)
    try:
        text = show(ledger, args.step)
    except LookupError as exc:
        raise CommandError(str(exc.args[0])) from None
    print(text, end="")
    return EXIT_OK


@_guarded
def cmd_replay(args) -> int:
    ledger = _open(args.run, args.runs_dir)
    config = run_config(ledger)
    if args.plot:
        try:
            import matplotlib  # noqa: F401 - only checking that it is there
        except ImportError:
            raise CommandError("--plot needs matplotlib: pip install 'nearpeak[plot]'") from None
    rows = [r for r in history(ledger) if r.ref == MAIN]
    print(f"run: {ledger.path} ({config.mode} mode)\n")
    print(format_table(rows))
    status = EXIT_OK
    if args.verify:
        _say(f"re-evaluating {len(rows)} accepted step(s) for {config.target} ...")
        drifts = verify(ledger, Evaluator(config.target, config.seed))
        print()
        for drift in drifts:
            notes = "".join(f" (note: {n})" for n in drift.notes)
            print(f"step {drift.step} ({drift.commit[:12]}): " + ("; ".join(drift.problems) or "reproduced") + notes)
        bad = [d for d in drifts if d.problems]
        print(f"\nverify: {len(drifts) - len(bad)}/{len(drifts)} accepted step(s) reproduced")
        intact, detail = ledger.fsck()
        print("repository: git fsck clean" if intact else f"repository: git fsck FAILED: {detail}")
        status = EXIT_CANDIDATE if bad or not intact else EXIT_OK
    if args.plot:
        plot(ledger, Path(args.plot))
        print(f"plot: {args.plot}")
    return status

