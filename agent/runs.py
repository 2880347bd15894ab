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

    evaluator = Evaluator(target, request.seed, request.timeout)
    with tempfile.TemporaryDirectory(prefix="nearpeak-start-") as tmp, \
            say.task(f"evaluating the starting kernel {kernel} for {target}"):
        copy = Path(tmp) / KERNEL
        copy.write_text(source)
        record = evaluator.record(copy, run=None)
    if record.get("status") != "ok":
        raise StartFailure(f"the starting kernel does not evaluate: {describe_failure(record)}")
    mode = MEASURED if record.get("runtime") else STATIC
    model = (request.model or os.environ.get("OPENAI_MODEL") or DEFAULT_MODEL) if proposer == "llm" else None
    if proposer == "manual":
        model = request.model  # who answers the prompt files, when the user names it
    config = RunConfig(
        run_id=run_id, target=target, source_file=str(kernel), proposer=proposer, steps=request.steps or 3,
        candidates=request.candidates, min_gain=request.min_gain, max_spills=request.max_spills, seed=request.seed,
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
