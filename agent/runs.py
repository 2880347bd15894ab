"""Creating and resuming runs: the one place that decides where a run lives and what it starts from.

A new run is built in a hidden staging directory next to its final place and renamed into place only once its
root commit is written, so a kill at any moment leaves either a complete run (`--resume` continues it) or
no run at all (the same `--run-id` can be used again). Staging directories left by killed processes are
removed by the next run created in the same runs directory.
"""
from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from evaluator.request import DEFAULT_TIMING, Problem, Shape
from evaluator.targets import DEFAULT_TARGET

from .config import RunConfig
from .evaluation import MEASURED, OBJECTIVES, STATIC, Evaluator, describe_failure
from .ledger import Ledger
from .loop import KERNEL, baseline_commit
from .progress import Progress
from .proposers.ladder import default_ladder_dir, stage_paths
from .proposers.llm import DEFAULT_MODEL, endpoint_configured
from .reading import run_config
from .source import declaration

STAGING_PREFIX = ".creating-"


class CommandError(Exception):
    """A problem with what the user asked for: printed without a traceback, exit code 2."""


class StartFailure(Exception):
    """The starting kernel itself fails to evaluate: a candidate problem (exit 1), not a usage one."""


@dataclass(frozen=True)
class NewRun:
    """What `nearpeak run` was asked for when it creates a run (the parsed command line, without argparse)."""

    runs_dir: Path
    target: str | None = None
    from_file: str | None = None
    proposer: str | None = None
    run_id: str | None = None
    steps: int | None = None
    candidates: int = 1
    model: str | None = None
    base_url: str | None = None
    min_gain: float = 0.01
    max_spills: int = 0
    max_tokens: int | None = None
    max_wall: float | None = None
    seed: int = 0
    request_timeout: float = 120.0
    retries: int = 3
    retry_backoff: float = 2.0
    max_idle_steps: int = 3
    ladder_dir: str | None = None
    timeout: float = 600.0
    strategy: str = "greedy"
    beam: int = 4
    tune_budget: int = 0
    knob_choices: dict | None = None
    profile: bool = True
    shapes: tuple[tuple[Shape, float], ...] = ()   # --shape M,N,K[:W]: the objective (default: the start's first)
    check_shapes: tuple[Shape, ...] = ()            # --check-shape: also correct on these
    timing: str = DEFAULT_TIMING                    # --timing: which timing decides a measured A/B


@dataclass(frozen=True)
class Resume:
    """What may change when a run is continued."""

    run: str
    runs_dir: Path
    steps: int | None = None
    base_url: str | None = None
    model: str | None = None
    max_tokens: int | None = None
    max_wall: float | None = None
    timeout: float | None = None


def run_path(run: str, runs_dir: str | Path) -> Path:
    """A run named by path or by id under `runs_dir`."""
    path = Path(run)
    if path.is_dir():
        return path
    candidate = Path(runs_dir) / run
    if candidate.is_dir():
        return candidate
    raise CommandError(f"no run {run!r} (looked for the directory {path} and {candidate})")


def open_run(run: str, runs_dir: str | Path) -> Ledger:
    return Ledger(run_path(run, runs_dir))


def require_endpoint(base_url: str | None) -> None:
    if not endpoint_configured(base_url):
        raise CommandError("the llm proposer needs an endpoint: set OPENAI_API_KEY (and OPENAI_BASE_URL) or "
                           "pass --base-url")


def _starting_file(request: NewRun, say: Progress) -> tuple[str, Path]:
    """(target, kernel file): a bare `nearpeak run` starts from the first stage of the target's main ladder
    (evaluator.targets.DEFAULT_TARGET by default, which needs neither a GPU nor an API key)."""
    target = request.target
    if request.from_file:
        return target, Path(request.from_file)
    target = target or DEFAULT_TARGET
    stages = stage_paths(default_ladder_dir(target))
    if not stages:
        raise CommandError(f"no --from given and no reference stages in {default_ladder_dir(target)}")
    say(f"no --from given: starting from {stages[0]}")
    return target, stages[0]


def create_run(request: NewRun, say: Progress) -> tuple[Ledger, RunConfig]:
    """Evaluate the starting kernel and create the run repository atomically; the ledger comes back locked."""
    target, kernel = _starting_file(request, say)
    if not kernel.is_file():
        raise CommandError(f"no kernel file {kernel}")
    source = kernel.read_text()
    declared = declaration(source, "TARGET")
    target = target or declared
    if declared != target:
        raise CommandError(f"{kernel} declares TARGET = {declared!r}, not {target!r}")
    proposer = request.proposer or ("llm" if endpoint_configured(request.base_url) else "ladder")
    if proposer == "llm":
        require_endpoint(request.base_url)
    run_id = request.run_id or f"{kernel.stem}-{target}-{datetime.now(timezone.utc):%Y%m%d-%H%M%S}"
    path = Path(request.runs_dir) / run_id
    _refuse_taken(path, run_id)

    problem = run_problem(request, source, kernel)
    say(f"the run's problem: {problem.describe()} (fixed for the whole run; candidates' SHAPES do not change it)")
    evaluator = Evaluator(target, request.seed, request.timeout, problem)
    with tempfile.TemporaryDirectory(prefix="nearpeak-start-") as tmp, \
            say.task(f"evaluating the starting kernel {kernel} for {target}"):
        copy = Path(tmp) / KERNEL
        copy.write_text(source)
        record = evaluator.record(copy, run=None)
        if record.get("status") != "ok":
            raise StartFailure(f"the starting kernel does not evaluate: {describe_failure(record)}")
        mode = MEASURED if record.get("runtime") else STATIC
        aa_check = self_check(evaluator, copy, request.min_gain, say) if mode == MEASURED else None
    model = (request.model or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL) if proposer == "llm" else None
    if proposer == "manual":
        model = request.model  # who answers the prompt files, when the user names it
    config = RunConfig(
        run_id=run_id, target=target, source_file=str(kernel), proposer=proposer, steps=request.steps or 3,
        candidates=request.candidates, max_spills=request.max_spills, seed=request.seed,
        min_gain=aa_check["min_gain"] if aa_check else request.min_gain, problem=problem.to_dict(),
        aa_check=aa_check,
        mode=mode, objective=OBJECTIVES[mode], model=model, base_url=request.base_url,
        request_timeout=request.request_timeout, retries=request.retries, retry_backoff=request.retry_backoff,
        max_idle_steps=request.max_idle_steps, strategy=request.strategy, beam=request.beam,
        tune_budget=request.tune_budget, knob_choices=request.knob_choices, profile=request.profile,
        ladder_dir=request.ladder_dir, max_tokens=request.max_tokens,
        max_wall=request.max_wall, candidate_timeout=request.timeout,
        created_utc=datetime.now(timezone.utc).isoformat(timespec="seconds"),
        triton_version=str(record.get("triton_version")))
    files, message = baseline_commit(config, source, record)
    ledger = create_atomically(path, files, message)
    say(f"created run {path} ({mode} mode: {config.objective})")
    return ledger, config


def run_problem(request: NewRun, source: str, kernel: Path) -> Problem:
    """The problem the run owns: the --shape options (weighted), else the starting kernel's benchmark shape
    (its first SHAPES entry); --check-shape adds shapes every candidate must also be correct on."""
    shapes = list(request.shapes)
    if not shapes:
        declared = declaration(source, "SHAPES")
        if not declared or not isinstance(declared, (list, tuple)):
            raise CommandError(f"{kernel} declares no literal SHAPES list; give the run's shape with --shape M,N,K")
        shapes = [(tuple(declared[0]), 1.0)]
    return Problem.of(shapes, request.check_shapes, request.timing)


AA_ROUNDS, AA_CALLS = 10, 5   # the short A/A of a measured run's start: a few seconds of GPU time


def self_check(evaluator: Evaluator, start: Path, min_gain: float, say: Progress) -> dict:
    """The start kernel against a byte-identical copy of itself, at the run's problem, before any step.

    An interval that excludes 1.0 means this machine's A/B noise exceeds its interval here: the run warns and
    widens its margin to cover the discrepancy seen, so a step must clear what an A/A could show.
    """
    copy = start.parent / "start_copy" / KERNEL
    copy.parent.mkdir(exist_ok=True)
    copy.write_text(start.read_text())
    with say.task("A/A self-check: the starting kernel against its own copy"):
        result = evaluator.self_compare(start, copy, AA_ROUNDS, AA_CALLS)
    low, high, speedup = result.get("ci_low"), result.get("ci_high"), result.get("speedup")
    check = {"speedup": speedup, "ci_low": low, "ci_high": high, "method": result.get("method"),
             "launch_bound": result.get("launch_bound"), "min_gain_asked": min_gain, "min_gain": min_gain,
             "error": result.get("error"), "covers_one": None}
    if low is None or high is None:
        say(f"warning: A/A self-check failed ({result.get('error')}: {result.get('message')}); margin unchanged")
        return check
    check["covers_one"] = low <= 1.0 <= high
    if not check["covers_one"]:
        widened = max(min_gain, abs(speedup - 1.0) + (high - low) / 2)
        check["min_gain"] = round(widened, 4)
        say(f"warning: the start kernel against its own copy measured {speedup:.4f}x [{low:.4f}, {high:.4f}], "
            f"an interval that excludes 1.0: --min-gain widened {min_gain} -> {check['min_gain']}")
    return check


def _refuse_taken(path: Path, run_id: str) -> None:
    if path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise CommandError(f"{path} already exists; pick another --run-id or continue it with --resume {run_id}")


def create_atomically(path: Path, files: dict[str, bytes], message: str) -> Ledger:
    """Write the run's root commit in a staging directory, then rename it to `path` (locked on return)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_staging(path.parent)
    staging = path.parent / f"{STAGING_PREFIX}{path.name}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    Ledger.create(staging, files, message).unlock()
    try:
        _refuse_taken(path, path.name)
        if path.is_dir():
            path.rmdir()  # an empty directory of that name: take its place
        os.rename(staging, path)
    except (CommandError, OSError):
        shutil.rmtree(staging, ignore_errors=True)
        raise
    ledger = Ledger(path)
    ledger.lock()
    return ledger


def remove_stale_staging(runs_dir: Path) -> list[Path]:
    """Delete staging directories whose creating process is gone (killed mid-creation); returns them."""
    removed = []
    for staging in runs_dir.glob(f"{STAGING_PREFIX}*"):
        pid = staging.name.rsplit("-", 1)[-1]
        if pid.isdigit() and _alive(int(pid)):
            continue
        shutil.rmtree(staging, ignore_errors=True)
        removed.append(staging)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def resume_run(request: Resume, say: Progress) -> tuple[Ledger, RunConfig]:
    """Open, lock and repair a run; apply what may change on resume. The ledger comes back locked."""
    ledger = open_run(request.run, request.runs_dir)
    ledger.lock()
    cleaned = ledger.recover()
    if cleaned:
        say(f"recovered {ledger.path}: {', '.join(cleaned)}")
    config = run_config(ledger)
    overrides = {k: v for k, v in {"steps": request.steps, "base_url": request.base_url, "model": request.model,
                                   "max_tokens": request.max_tokens, "candidate_timeout": request.timeout}.items()
                 if v is not None}
    # The wall-clock budget is per invocation: a run stopped by it must not stop again at once on resume.
    config = dataclasses.replace(config, **overrides, max_wall=request.max_wall)
    say(f"resuming {ledger.path} ({config.proposer} proposer, {config.mode} mode, up to step {config.steps})")
    return ledger, config
