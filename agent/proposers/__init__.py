"""Proposers: where candidate kernels come from. All share the small interface of this module;
`agent.proposers.factory.make_proposer` builds the one a run is configured with.

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
from typing import Protocol

from ..ideas import Plan, TriedIdea

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
    slots: tuple[int, ...] = ()     # the step's request numbers to fill (empty: 1..count)
    slots_total: int = 0            # how many requests the step has in all (0: count)
    plan: Plan | None = None        # the step's ideas (K > 1 with a planning proposer)

    def request_slots(self) -> tuple[tuple[int, ...], int]:
        """(request numbers to fill, the step's total), defaulting to 1..count of count."""
        slots = self.slots or tuple(range(1, self.count + 1))
        return slots, max(self.slots_total or self.count, max(slots))


@dataclass(frozen=True)
class PlanRequest:
    """A step's planning request: the evidence of its best parent, how many ideas, and what was tried."""

    context: ProposalContext
    count: int
    tried: tuple[TriedIdea, ...] = ()


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


EXIT_AWAITING_REPLIES = 6   # the manual proposer wrote prompts whose replies have not come (resume later)


class AwaitingReplies(ProposerStopped):
    """Prompts are written and their replies not there yet: the run stops, to be resumed once they are.
    `waiting` holds (prompt file, reply file) pairs."""

    exit_code = EXIT_AWAITING_REPLIES

    def __init__(self, waiting: tuple[tuple[str, str], ...], waited_s: float):
        self.waiting = waiting
        self.waited_s = waited_s
        files = "; ".join(f"{prompt} -> write {reply}" for prompt, reply in waiting)
        super().__init__(f"waiting for {len(waiting)} reply file(s) after {waited_s:g} s: {files}")

    @classmethod
    def combine(cls, stops: list[AwaitingReplies]) -> AwaitingReplies:
        return cls(tuple(pair for s in stops for pair in s.waiting), max(s.waited_s for s in stops))
