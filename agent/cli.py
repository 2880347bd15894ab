"""`nearpeak`: one command, several subcommands; argument parsing and dispatch only.

The evaluator contributes its subcommands through `evaluator.cli.register(subparsers, argv)`; the agent's (`run`,
`history`, `show`, `replay`) are declared here and hand over to agent.runs (creating and resuming runs),
agent.loop (the optimization) and agent.reading (reading a run back). Each parser sets `func(args) -> int`,
the exit code (README.md lists them).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from evaluator import cli as evaluator_cli
from evaluator.errors import EXIT_CANDIDATE, EXIT_OK, EXIT_USAGE, UsageError
from evaluator.request import DEFAULT_TIMING, TIMINGS, parse_shape
from evaluator.targets import DEFAULT_TARGET, get_target, known_targets

from .climb import climb
from .evaluation import Evaluator
from .executors import EXECUTORS, LOCAL, RAY, ExecutorError
from .executors.factory import make_executor
from .ledger import SCRATCH, LedgerError
from .loop import KERNEL, Budget, Optimizer, idle_steps_so_far
from .progress import Progress
from .proposers import TUNE_CACHE
from .proposers.factory import ProposerSetupError, make_proposer
from .proposers.llm import DEFAULT_MODEL
from .proposers.manual import DEFAULT_REPLY_WAIT_S, ManualSettings, prompt_folder
from .proposers.tune import TuneCache
from .reading import (
    format_table,
    history,
    history_json,
    kernel_source,
    lineage,
    run_config,
    show,
    table_legend,
    tree,
    verify,
    where_the_result_is,
)
from .report import PLOT_EXTRA, REPORT_NAME, draw, html_report, needs_matplotlib, plot_available
from .runs import CommandError, NewRun, Resume, StartFailure, create_run, open_run, resume_run
from .search import DEFAULT_BEAM, STRATEGIES, default_strategy
from .source import declaration


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _terminal_input() -> bool:
    """Whether standard input is a terminal a person can paste replies into."""
    try:
        return bool(sys.stdin) and sys.stdin.isatty()
    except (OSError, ValueError, AttributeError):
        return False


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above 0, got {value:g}")
    return value


def _non_negative(kind):
    def parse(text: str):
        value = kind(text)
        if value < 0:
            raise argparse.ArgumentTypeError(f"must not be negative, got {value}")
        return value
    return parse


def register(subparsers) -> None:
    """Declare the agent's subcommands."""
    run = subparsers.add_parser("run", help="optimize a kernel: propose, evaluate, accept, commit to a run ledger",
                                description="Start an optimization run (or --resume one). Each run is a git "
                                            "repository under --runs-dir; see docs/ledger-format.md.")
    run.add_argument("--target", choices=known_targets(),
                     help="GPU family to optimize for (default: the starting kernel's TARGET)")
    run.add_argument("--from", dest="from_file", metavar="KERNEL_FILE",
                     help="starting kernel (contract file; default: stage v00 of the target's ladder, "
                          f"{DEFAULT_TARGET} if no target is given)")
    run.add_argument("--proposer", choices=("llm", "manual", "ladder", "tune"),
                     help="where candidates come from (default: llm when an endpoint is configured through "
                          "OPENAI_API_KEY, OPENAI_BASE_URL or --base-url, else ladder); manual: the llm prompts as "
                          "files under RUN/prompts/, each answered by a reply file next to it (or pasted on a terminal)")
    run.add_argument("--steps", type=_positive_int, help="steps to run (default 3; with --resume: the new total)")
    run.add_argument("--candidates", type=_positive_int, default=1, help="candidates per step (default 1)")
    run.add_argument("--model", help=f"LLM model name (default: $OPENAI_MODEL or {DEFAULT_MODEL})")
    run.add_argument("--base-url", help="OpenAI-compatible endpoint (default: $OPENAI_BASE_URL)")
    run.add_argument("--runs-dir", default="runs", help="where run repositories live (default ./runs)")
    run.add_argument("--run-id", help="name of the new run (default: KERNEL-TARGET-UTCTIME)")
    run.add_argument("--resume", metavar="RUN", help="continue a run (a path, or a run id under --runs-dir)")
    run.add_argument("--min-gain", type=_non_negative(float), default=0.01,
                     help="accept when the speedup's 95%% lower bound exceeds 1 + this (default 0.01)")
    run.add_argument("--shape", action="append", default=[], metavar="M,N,K[:WEIGHT]",
                     help="an objective shape of the run (repeatable; the objective is the weighted geometric "
                          "mean over them; default: the starting kernel's first SHAPES entry). Fixed for the whole "
                          "run: every candidate is evaluated and compared at these shapes, never at its own SHAPES")
    run.add_argument("--check-shape", action="append", default=[], metavar="M,N,K",
                     help="a shape every candidate must also run correctly (repeatable)")
    run.add_argument("--timing", choices=TIMINGS, default=DEFAULT_TIMING,
                     help="which measured timing decides the A/B: per-call device events (eager, default) or "
                          "CUDA-graph replay (graph: GPU time without host launch cost, as serving engines run "
                          "decode); both are recorded")
    run.add_argument("--max-spills", type=_non_negative(int), default=0,
                     help="spill instructions allowed in the hot loop by the static screen (default 0)")
    run.add_argument("--max-tokens", type=_positive_int,
                     help="stop once the run has used this many LLM tokens (checked between candidates)")
    run.add_argument("--max-wall", type=_non_negative(float), metavar="SECONDS",
                     help="stop after this many seconds of this invocation (checked between candidates)")
    run.add_argument("--timeout", type=_positive_float, metavar="SECONDS",
                     help="wall-clock limit per candidate evaluation (each sandboxed evaluation and each interleaved "
                          "comparison; default 600): a candidate past it is killed and rejected with status timeout")
    run.add_argument("--seed", type=int, default=0, help="seed for LLM sampling and runtime inputs (default 0)")
    run.add_argument("--request-timeout", type=_non_negative(float), default=120.0,
                     help="seconds per LLM request (default 120)")
    run.add_argument("--retries", type=_non_negative(int), default=3,
                     help="LLM retries per candidate after the first try (default 3)")
    run.add_argument("--retry-backoff", type=_non_negative(float), default=2.0,
                     help="seconds before the first LLM retry after a transport error; doubles (default 2)")
    run.add_argument("--max-idle-steps", type=_positive_int, default=3,
                     help="stop (exit 5) after this many consecutive steps without a usable LLM reply, counted "
                          "across --resume (default 3)")
    run.add_argument("--reply-wait", type=_non_negative(float), metavar="SECONDS",
                     help=f"manual proposer: how long to wait for missing reply files (default {DEFAULT_REPLY_WAIT_S:g}; "
                          "no limit on a terminal); 0 writes the prompts and stops at once; a run that stops waiting "
                          "exits 6 and prints its --resume command")
    run.add_argument("--ladder-dir", help="ladder of reference stages (default: kernels/<target>/<dtype>)")
    run.add_argument("--strategy", choices=STRATEGIES,
                     help="search: one incumbent (greedy) or a population of --beam kernels (default: beam when "
                          "--candidates > 1, else greedy)")
    run.add_argument("--beam", type=_positive_int, default=DEFAULT_BEAM,
                     help=f"population size of the beam strategy (default {DEFAULT_BEAM})")
    run.add_argument("--tune-budget", type=_non_negative(int), default=0, metavar="N",
                     help="also try up to N knob settings of every llm or ladder candidate (default 0)")
    run.add_argument("--knob", action="append", default=[], metavar="NAME=V1,V2,...",
                     help="knob choices to tune over instead of the kernel's KNOB_CHOICES entry (repeatable)")
    run.add_argument("--no-profile", dest="profile", action="store_false",
                     help="measured mode: skip the matrix-unit profile (Nsight Compute / rocprofv3) of each candidate; "
                          "the accept rule does not use it, and it costs seconds per candidate")
    run.add_argument("--executor", choices=EXECUTORS, default=LOCAL,
                     help="where evaluations run: local worker processes or Ray tasks (default local)")
    run.add_argument("--workers", type=_positive_int,
                     help="GPU workers, one per visible GPU, each pinned to its own (default: one worker that sees "
                          "what this process sees); static screens use every CPU core")
    run.add_argument("--ray-address", help="ray executor: the cluster to join (default: start a local instance "
                                           "with --workers GPUs, or all of this host's)")
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
    sh.add_argument("--kernel", action="store_true",
                    help="print only the step's kernel file, e.g. nearpeak show RUN 3 --kernel > best.py")
    sh.add_argument("--runs-dir", default="runs")
    sh.set_defaults(func=cmd_show)

    rep = subparsers.add_parser("replay", help="walk a run's accepted steps; re-check or plot them")
    rep.add_argument("run", metavar="RUN")
    rep.add_argument("--verify", action="store_true", help="re-evaluate each accepted step and flag drift")
    rep.add_argument("--lineage", metavar="STEP",
                     help="follow the lineage of this kernel (3 or 3.2) instead of main's, e.g. a population member")
    rep.add_argument("--plot", metavar="FILE.svg",
                     help="draw the climb: .svg needs nothing more, .png and .pdf need matplotlib")
    rep.add_argument("--runs-dir", default="runs")
    rep.set_defaults(func=cmd_replay)

    report = subparsers.add_parser("report", help="one self-contained HTML page: the climb plot, the history, "
                                                  "each accepted step's diff and figures")
    report.add_argument("run", metavar="RUN")
    report.add_argument("-o", "--output", metavar="FILE.html",
                        help=f"where to write it (default: {REPORT_NAME} in the run's folder)")
    report.add_argument("--runs-dir", default="runs")
    report.set_defaults(func=cmd_report)


def _guarded(func):
    """Turn user-facing failures into a message and an exit code instead of a traceback."""
    def wrapper(args) -> int:
        try:
            return func(args)
        except (CommandError, LedgerError, ProposerSetupError, ExecutorError) as exc:
            _say(f"nearpeak {args.command}: error: {exc}")
            return EXIT_USAGE
        except KeyboardInterrupt:
            _say(f"nearpeak {args.command}: interrupted")
            return 130
    wrapper.__doc__ = func.__doc__
    return wrapper


def _new_run_request(args) -> NewRun:
    return NewRun(runs_dir=Path(args.runs_dir), target=args.target, from_file=args.from_file,
                  proposer=args.proposer, run_id=args.run_id, steps=args.steps, candidates=args.candidates,
                  model=args.model, base_url=args.base_url, min_gain=args.min_gain, max_spills=args.max_spills,
                  max_tokens=args.max_tokens, max_wall=args.max_wall, seed=args.seed,
                  request_timeout=args.request_timeout, retries=args.retries, retry_backoff=args.retry_backoff,
                  max_idle_steps=args.max_idle_steps, ladder_dir=args.ladder_dir, timeout=args.timeout or 600.0,
                  strategy=args.strategy or default_strategy(args.candidates),
                  beam=args.beam, tune_budget=args.tune_budget, knob_choices=knob_choices(args.knob) or None,
                  profile=args.profile, shapes=run_shapes(args.shape),
                  check_shapes=tuple(shape for shape, _ in run_shapes(args.check_shape)), timing=args.timing)


def run_shapes(texts: list[str]) -> tuple:
    """--shape / --check-shape texts as ((M, N, K), weight) pairs; a malformed one is a usage error."""
    try:
        return tuple(parse_shape(text) for text in texts)
    except UsageError as err:
        raise CommandError(err.message) from None


def knob_choices(specs: list[str]) -> dict[str, list[int]]:
    """`--knob NAME=V1,V2` options as a KNOB_CHOICES-like dict."""
    choices = {}
    for spec in specs:
        name, sep, values = spec.partition("=")
        try:
            parsed = [int(v) for v in values.split(",") if v.strip()]
        except ValueError:
            parsed = []
        if not sep or not name.strip() or not parsed:
            raise CommandError(f"--knob wants NAME=V1,V2,... with integer values, got {spec!r}")
        choices[name.strip()] = parsed
    return choices


def _executor(args, config, ledger):
    if args.workers and args.executor == RAY and args.ray_address:
        raise CommandError("--workers sizes the local workers or a local Ray instance, not a Ray cluster given by "
                           "--ray-address (its GPUs are what it has)")
    return make_executor(args.executor, workers=args.workers,
                         device_variable=get_target(config.target).toolchain.visible_devices,
                         cache_dir=ledger.path / SCRATCH / "triton-cache", run_id=config.run_id,
                         ray_address=args.ray_address)


@_guarded
def cmd_run(args) -> int:
    """Start or resume a run; progress on stderr, the summary table (or JSON) on stdout."""
    if args.resume and (args.target or args.from_file or args.run_id):
        raise CommandError("--resume continues an existing run; do not combine it with --target, --from or --run-id")
    progress = Progress(quiet=args.json)
    try:
        if args.resume:
            ledger, config = resume_run(Resume(run=args.resume, runs_dir=Path(args.runs_dir), steps=args.steps,
                                               base_url=args.base_url, model=args.model,
                                               max_tokens=args.max_tokens, max_wall=args.max_wall,
                                               timeout=args.timeout), progress)
        else:
            ledger, config = create_run(_new_run_request(args), progress)
    except StartFailure as exc:
        _say(f"nearpeak run: {exc}")
        return EXIT_CANDIDATE
    try:
        root = ledger.main_line()[0].sha
        dtype = declaration(ledger.read(root, KERNEL).decode(), "DTYPE")
        manual = ManualSettings(prompt_folder(ledger.path), args.reply_wait,
                                interactive=_terminal_input() and not args.json)
        proposer = make_proposer(config, ledger.path.parent, dtype, progress, idle_steps_so_far(ledger), manual)
        budget = Budget(max_tokens=config.max_tokens, max_wall=config.max_wall)
        executor = _executor(args, config, ledger)
        progress(f"{config.strategy} search; evaluations on {executor.description}")
        try:
            optimizer = Optimizer(ledger, config, proposer, executor, budget, progress,
                                  tune_cache=TuneCache(ledger.path.parent / TUNE_CACHE))
            result = optimizer.run()
        finally:
            executor.close()
    except KeyboardInterrupt:
        # Everything judged so far is committed; only the candidate in flight is lost.
        _say(f"nearpeak run: interrupted; continue with: nearpeak run --resume {ledger.path}")
        return 130
    finally:
        ledger.unlock()
    if result.exit_code:  # an error stop is said on stderr too, whatever --json does with stdout
        _say(f"nearpeak run: error: {result.stop_reason} (exit {result.exit_code})")
    if args.json:
        print(json.dumps({**history_json(ledger), "stop_reason": result.stop_reason, "steps_run": result.steps_run,
                          "exit_code": result.exit_code},
                         indent=1))
    else:
        print(f"run: {ledger.path}\nmode: {config.mode} ({config.objective})\nstopped: {result.stop_reason}\n")
        print(format_table(history(ledger)))
        print(f"{table_legend(config.target)}\n\n{where_the_result_is(ledger)}")
    return result.exit_code


@_guarded
def cmd_history(args) -> int:
    ledger = open_run(args.run, args.runs_dir)
    if args.json:
        print(json.dumps(history_json(ledger), indent=1))
        return EXIT_OK
    config = run_config(ledger)
    problem = config.run_problem()
    print(f"run: {ledger.path}\ntarget: {config.target}  proposer: {config.proposer}  mode: {config.mode}\n"
          + (f"problem: {problem.describe()}\n" if problem else "") + f"accept rule: {config.objective}\n")
    print(format_table(history(ledger)))
    print(table_legend(config.target))
    print(f"\nsearch tree of accepted kernels (* = main's lineage):\n{tree(ledger)}")
    print(f"\n{where_the_result_is(ledger)}")
    return EXIT_OK


@_guarded
def cmd_show(args) -> int:
    ledger = open_run(args.run, args.runs_dir)
    try:
        text = kernel_source(ledger, args.step) if args.kernel else show(ledger, args.step)
    except LookupError as exc:
        raise CommandError(str(exc.args[0])) from None
    print(text, end="")
    return EXIT_OK


@_guarded
def cmd_replay(args) -> int:
    ledger = open_run(args.run, args.runs_dir)
    config = run_config(ledger)
    if args.plot:
        if needs_matplotlib(Path(args.plot)) and not plot_available():
            raise CommandError(f"--plot {args.plot} needs matplotlib ({PLOT_EXTRA}); an .svg plot needs nothing")
        _writable(Path(args.plot))
    try:
        shas = {e.sha for e in lineage(ledger, args.lineage)}
    except LookupError as exc:
        raise CommandError(str(exc.args[0])) from None
    rows = [r for r in history(ledger) if r.commit in shas]
    print(f"run: {ledger.path} ({config.mode} mode)" + (f", lineage of {args.lineage}" if args.lineage else "") + "\n")
    print(format_table(rows))
    print(table_legend(config.target))
    status = EXIT_OK
    if args.verify:
        drifts = verify(ledger, Evaluator(config.target, config.seed, config.candidate_timeout, config.run_problem()),
                        Progress(),
                        args.lineage)
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
        draw(climb(ledger), Path(args.plot))
        print(f"plot: {args.plot}")
    return status


@_guarded
def cmd_report(args) -> int:
    ledger = open_run(args.run, args.runs_dir)
    if args.output:
        output = Path(args.output)
    else:  # inside the run's folder, kept out of its git ledger
        output = ledger.path / REPORT_NAME
        ledger.exclude(REPORT_NAME)
    _writable(output)
    output.write_text(html_report(ledger), encoding="utf-8")
    print(f"report: {output}")
    return EXIT_OK


def _writable(path: Path) -> None:
    """Refuse an output path that cannot be written before any work is done."""
    if path.is_dir():
        raise CommandError(f"{path} is a directory; name a file")
    if not path.parent.is_dir():
        raise CommandError(f"no directory {path.parent} to write {path.name} into")


def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The `nearpeak` parser for the command line `argv` (default sys.argv[1:]): with --json, a parse error of
    that command line prints a JSON usage_error record on stdout before argparse's message."""
    parser = argparse.ArgumentParser(
        prog="nearpeak",
        description=f"Agent-driven optimization of Gluon GEMM kernels for {', '.join(known_targets())}.")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    evaluator_cli.register(subparsers, argv)
    register(subparsers)
    # Unknown options are the top-level parser's error, whichever command they follow: with --json they too
    # print a usage_error record on stdout.
    evaluator_cli.records_for_parse_errors(parser, sys.argv[1:] if argv is None else argv)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except BrokenPipeError:  # output piped into `head` and closed early
        sys.stderr.close()
        return 0
    except KeyboardInterrupt:
        print("nearpeak: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
