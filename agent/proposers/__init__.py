"""Proposers: where candidate kernels come from. All share one small interface; `make_proposer` builds the
one a run is configured with.

`propose(context) -> Iterable[Candidate | FailedProposal]` yields up to `context.count` new candidates for
the step, in the order they become available (the loop commits each one the moment it is yielded, so a
proposer that works concurrently should yield as results arrive); nothing at all means the proposer has
nothing left to try. A proposer that must end the run (an LLM endpoint that refuses the credentials or does
not know the model) raises `ProposerStopped`, whose `exit_code` becomes the command's. A `FailedProposal` is a proposer that tried
and could not produce a kernel (an LLM that never gave an applicable edit); the loop records it in the
ledger so the failure and its retries are not lost. `observe(candidate, outcome)` lets a proposer learn
from each verdict (the tuner's cache); it is optional.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

TUNE_CACHE = "tune-cache.json"    # the tuner's cache, shared by the runs of one runs directory


@dataclass(frozen=True)
class Candidate:
    """A proposed kernel: its full source, why it should be better, and proposer-specific data.

    `meta` is JSON-ready and lands in the commit's step.json; `artifacts` are extra files committed with
    the candidate (an LLM step's prompt.md and reply.md).
    """

    source: str
    rationale: str
    title: str
    meta: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class FailedProposal:
    """A proposer that tried and produced no kernel, with what it tried."""

    reason: str
    meta: dict = field(default_factory=dict)
    artifacts: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Attempt:
    """What a proposer may know about one earlier evaluation of this run."""

    step: int
    candidate: int
    verdict: str
    reason: str
    summary: str
    source_sha256: str
    headline: str
    diff: str = ""                  # compact diff against the incumbent it was judged against


@dataclass(frozen=True)
class ProposalContext:
    target: str
    step: int
    count: int                      # how many candidates the loop wants
    incumbent_source: str
    incumbent_record: dict
    last_record: dict | None        # the most recent evaluation (may be a failure worth explaining)
    last_source: str | None
    history: tuple[Attempt, ...]
    tried: frozenset[str]           # sha256 of every source already evaluated in this run


@dataclass(frozen=True)
class Outcome:
    """The loop's verdict on a candidate; `screened_out` marks a failure of the kernel itself (compile
    error, spills, policy, wrong results) rather than merely not beating the incumbent."""

    verdict: str
    reason: str
    record: dict
    screened_out: bool


class Proposer(Protocol):
    name: str

    def propose(self, context: ProposalContext) -> Iterable[Candidate | FailedProposal]: ...

    def observe(self, candidate: Candidate, outcome: Outcome) -> None: ...


class ProposerStopped(Exception):
    """The proposer cannot go on and the run must stop with `exit_code` (README.md lists the codes)."""

    exit_code = 1


class ProposerSetupError(ValueError):
    """A proposer that cannot be built from the run's configuration (no endpoint, no ladder directory)."""


def make_proposer(config, runs_dir: Path, dtype: str | None, progress=None) -> Proposer:
    """The proposer `config` (a RunConfig) names; `dtype` (the starting kernel's DTYPE) picks the ladder;
    `progress(message)` receives the proposer's progress lines (the LLM's requests and retries)."""
    # Imported here: each proposer module imports the records above from this package.
    from .ladder import LadderProposer, default_ladder_dir, load_stages
    from .llm import DEFAULT_MODEL, LLMProposer, LLMSettings, endpoint_configured, stderr_line
    from .tune import TuneCache, TuneProposer

    if config.proposer == "tune":
        return TuneProposer(TuneCache(runs_dir / TUNE_CACHE), config.knob_choices)
    ladder = Path(config.ladder_dir) if config.ladder_dir else default_ladder_dir(config.target, dtype)
    if config.proposer == "ladder":
        if not ladder.is_dir():
            raise ProposerSetupError(f"no ladder directory {ladder}")
        return LadderProposer(ladder)
    if not endpoint_configured(config.base_url):
        raise ProposerSetupError("the llm proposer needs an endpoint: set OPENAI_API_KEY (and OPENAI_BASE_URL) "
                                 "or pass --base-url")
    from ..evaluation import STATIC
    from ..prompt import Brief

    stages = tuple(load_stages(ladder)) if ladder.is_dir() else ()
    settings = LLMSettings(model=config.model or DEFAULT_MODEL, base_url=config.base_url,
                           request_timeout=config.request_timeout, retries=config.retries,
                           backoff=config.retry_backoff, seed=config.seed, max_idle_steps=config.max_idle_steps)
    return LLMProposer(settings, Brief(stages, static_objective=config.mode == STATIC), config.objective,
                       progress=progress or stderr_line)
