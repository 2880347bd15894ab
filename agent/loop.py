"""The optimization loop: propose, screen, evaluate, judge, commit; one step at a time.

The loop is the driver: proposers and the search strategy (agent/search.py) decide what to evaluate, an
executor (agent/executors/) evaluates it wherever its workers are, and only this process writes the ledger.
It owns no state between steps: the population, attempts, tokens spent and the LLM's count of steps without
a usable reply are read back from the ledger, which is what makes `--resume` after a kill work.

A step: pick each candidate's parent from the population, ask the proposer for children of each parent (plus
up to `--tune-budget` knob settings of each proposed kernel), then judge them. A kill loses only requests and
evaluations in flight (and every token spent is counted):

* each proposal is committed the moment it arrives, on `refs/proposals/<step>-<n>` (its parent is the
  population member it was proposed from), and `--resume` judges whatever is still waiting;
* every waiting candidate's static screen is submitted at once; those that pass go to a GPU worker (measured
  mode); each judged commit replaces its proposal ref, in candidate order whatever order results arrive in;
* a candidate that fails the screen or the accept rule against its parent goes to `refs/attempts/<step>-<n>`
  (rejected); one that passes goes there too (passed);
* when the step's candidates are all in, the search admits the passers that rank in the population: each is
  re-committed as accepted (its attempt ref deleted), and `main`, `refs/population/*` and `refs/retired/*`
  move in the same ref transaction so that `main` holds the best kernel's lineage.
"""
from __future__ import annotations

import json
import re
import shutil
import time
import traceback
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field, replace
from pathlib import Path

from .config import RunConfig
from .evaluation import MEASURED, Judgement, compiled_digest, judge_measured, judge_static, screen, with_shape_note
from .executors import Executor, Job, MeasuredResult
from .executors.jobs import CANDIDATE_DIR, PARENT_DIR, SCRATCH_PREFIX
from .figures import commit_message, headline, trailers
from .ideas import Plan, TriedIdea
from .ledger import (
    MAIN,
    POPULATION,
    RETIRED,
    SCRATCH,
    Entry,
    Ledger,
    RefChange,
    attempt_ref,
    population_ref,
    proposal_ref,
    retired_ref,
)
from .progress import Progress
from .proposers import (
    Attempt,
    AwaitingReplies,
    Candidate,
    FailedProposal,
    Outcome,
    PlanRequest,
    ProposalContext,
    Proposer,
    ProposerStopped,
)
from .proposers.llm_client import EndpointUnreachable
from .proposers.tune import TuneCache, knob_candidates, record_outcome
from .search import GREEDY, Member, Search, chained_merit, ranked, static_merit
from .source import compact_diff, sha256

KERNEL, RECORD, STEP, RUN = "kernel.py", "evaluation.json", "step.json", "run.json"
ACCEPTED, PASSED, REJECTED, FAILED, BASELINE = "accepted", "passed", "rejected", "proposal-failed", "baseline"
PROPOSED = "proposed"
PENDING_STATUS = "pending"      # evaluation.json of a received, not yet judged candidate
IDLE_STEPS_TRAILER = "LLM-Idle-Steps"  # on a step's last LLM proposal: steps in a row without a usable reply
COMPILED_TRAILER = "Compiled-Sha256"   # the static record's compiled_sha256: duplicates are found with it
CARRIED = ("plan", "idea", "plan_request")   # step.json keys a proposal's judged commit keeps


def dump(data: dict) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True, default=str) + "\n").encode()


# A path inside an evaluation's scratch directory (agent.executors.jobs), up to its candidate/ or parent/ folder.
_SCRATCH_PATH = re.compile(rf"(?:/[^/\s\"'():,]+)*/{re.escape(SCRATCH_PREFIX)}[a-z]+\d+-[^/\s\"'():,]+/"
                           rf"({re.escape(CANDIDATE_DIR)}|{re.escape(PARENT_DIR)})(?:/|\b)")


def in_run_paths(data, parent: str | None = None):
    """`data` (a record, a comparison: any JSON value) with every path inside an evaluation's scratch directory
    named by the kernel's place in the run instead: the candidate's files relative to its own commit
    (`kernel.py`, beside the record; its folder `.`), the parent's as `<parent commit>:kernel.py` (what
    `git show` reads). The
    scratch directory is gone once the evaluation ends and differs on every machine; the commit is not."""
    if isinstance(data, dict):
        return {key: in_run_paths(value, parent) for key, value in data.items()}
    if isinstance(data, list):
        return [in_run_paths(value, parent) for value in data]
    if isinstance(data, str):
        return _SCRATCH_PATH.sub(lambda m: _place(m, parent), data)
    return data


def _place(match: re.Match, parent: str | None) -> str:
    if match.group(1) == PARENT_DIR:
        return f"{parent or 'parent'}:"
    return "" if match.group().endswith("/") else "."   # inside the candidate's folder, or the folder itself


def normalize_record(record: dict, parent: str | None = None) -> dict:
    """The record as the ledger keeps it: the kernel is always kernel.py, wherever it was evaluated, and no
    path names the evaluation's scratch directory (`in_run_paths`)."""
    return {**in_run_paths(record, parent), "file": KERNEL}


@dataclass(frozen=True)
class Budget:
    max_tokens: int | None = None      # over the whole run (tokens already in the ledger count)
    max_wall: float | None = None      # seconds, for this invocation


@dataclass
class RunResult:
    path: Path
    stop_reason: str
    steps_run: list[int] = field(default_factory=list)
    exit_code: int = 0              # non-zero when the proposer stopped the run (e.g. endpoint unavailable)


@dataclass(frozen=True)
class Parent:
    """A population member a candidate is proposed from and judged against."""

    member: Member
    rank: int                  # 1 = the best kernel of the run when the step began
    source: str
    record: dict


@dataclass(frozen=True)
class Planned:
    """A received candidate of a step waiting to be judged, numbered in arrival order (the commit order)."""

    number: int
    proposal: Candidate
    parent: Parent
    waiting_ref: str                   # its refs/proposals/ ref, replaced by the judged commit
    variant_of: int | None = None      # the candidate whose knob setting this is (--tune-budget)
    duplicate: bool = False            # the same source was evaluated (or received) before: not re-evaluated
    duplicate_of: str = ""             # the step.candidate label of the source it repeats
    carried: dict = field(default_factory=dict)   # step.json keys of the proposal kept when it is judged


@dataclass
class Result:
    record: dict
    judgement: Judgement
    seconds: dict = field(default_factory=dict)
    duplicate_of: str = ""     # the step.candidate label whose compiled kernels this candidate's equal


@dataclass
class StepPlan:
    """The step's plan as the loop holds it: `recorded` once a commit of the step carries the planning request."""

    plan: Plan
    recorded: bool


class Optimizer:
    """Runs the steps of one run over its ledger."""

    def __init__(self, ledger: Ledger, config: RunConfig, proposer: Proposer, executor: Executor,
                 budget: Budget, progress: Progress, tune_cache: TuneCache | None = None):
        self.ledger = ledger
        self.config = config
        self.proposer = proposer
        self.executor = executor
        self.budget = budget
        self.progress = progress
        self.tune_cache = tune_cache
        self.search = Search(config.strategy, config.beam, config.seed)
        self.scratch = ledger.path / SCRATCH
        self.started = time.monotonic()
        self.run_file = ledger.read(ledger.main_line()[0].sha, RUN)   # run.json, the same in every commit
        self._merits: dict[str, float] = {}
        self._compiled: dict[str, str] = {}    # compiled_sha256 -> first evaluation (step.candidate) of the run
        self._judging = 0                      # the step whose candidates are being judged

    # -- reading the ledger ------------------------------------------------------------------------------

    def _json(self, sha: str, name: str) -> dict:
        data = self.ledger.read(sha, name)
        return json.loads(data) if data else {}

    def _member(self, entry: Entry) -> Member:
        return Member(sha=entry.sha, step=entry.step, candidate=entry.candidate, merit=self._merit(entry),
                      score=tuple(self._json(entry.sha, STEP).get("score") or ()))

    def _merit(self, entry: Entry) -> float:
        """The figure of merit the population is ranked by (agent.search); commits never change, so it is kept."""
        if entry.sha not in self._merits:
            if self.config.mode != MEASURED:
                value = static_merit(self._json(entry.sha, RECORD))
            elif entry.parent is None:
                value = 1.0  # the starting kernel
            else:
                value = chained_merit(self._merit(self._entry(entry.parent)),
                                      self._json(entry.sha, STEP).get("comparison"))
            self._merits[entry.sha] = value
        return self._merits[entry.sha]

    def _entry(self, sha: str) -> Entry:
        """The accepted kernel with commit `sha` (every parent is one)."""
        return next(e for e in self.ledger.main_line() + self.ledger.off_main() if e.sha == sha)

    def accepted(self) -> list[Member]:
        """Every kernel the run has accepted (the root included), on main or off it."""
        entries = self.ledger.main_line() + self.ledger.off_main()
        return [self._member(e) for e in entries if e.verdict in (ACCEPTED, BASELINE)]

    def population(self) -> list[Member]:
        return self.search.population(self.accepted(), self.ledger.resolve(MAIN))

    def tokens_spent(self) -> int:
        return sum(int(e.trailers.get(key, "0") or 0) for e in self.ledger.entries() + self.ledger.proposals()
                   for key in ("Tokens", "Plan-Tokens"))

    def _context(self, step: int, count: int, parent: Parent, slots: tuple[int, ...] = (),
                 plan: Plan | None = None) -> ProposalContext:
        entries = self.ledger.entries()
        waiting = self.ledger.proposals()   # received, not yet judged: in the history as "proposed"
        history = tuple(Attempt(step=e.step, candidate=e.candidate, verdict=e.verdict,
                                reason=e.trailers.get("Reason", ""), summary=e.summary.split(" - ", 1)[-1],
                                source_sha256=e.trailers.get("Kernel-Sha256", ""),
                                headline=_trailer_headline(e), diff=self._diff(e))
                        for e in sorted(entries + waiting, key=lambda e: (e.step, e.candidate)) if e.step > 0)
        last = entries[-1]
        last_record = self._json(last.sha, RECORD) if last.step > 0 else None
        last_source = (self.ledger.read(last.sha, KERNEL) or b"").decode() if last.step > 0 else None
        tried = frozenset(e.trailers.get("Kernel-Sha256", "") for e in entries + waiting)
        return ProposalContext(target=self.config.target, step=step, count=count,
                               incumbent_source=parent.source, incumbent_record=parent.record,
                               last_record=last_record, last_source=last_source, history=history, tried=tried,
                               slots=slots, slots_total=self.config.candidates, plan=plan)

    def _diff(self, entry: Entry) -> str:
        """What an evaluated candidate changed in the incumbent it was judged against."""
        if entry.parent is None or entry.verdict == FAILED:
            return ""
        return compact_diff((self.ledger.read(entry.parent, KERNEL) or b"").decode(),
                            (self.ledger.read(entry.sha, KERNEL) or b"").decode())

    def next_step(self) -> int:
        entries = self.ledger.entries()
        last = max(e.step for e in entries)
        if last == 0 or self._step_complete(last, entries):
            return last + 1
        return last

    def _step_complete(self, step: int, entries: list[Entry]) -> bool:
        if any(e.step == step for e in self.ledger.proposals()):
            return False
        mine = [e for e in entries if e.step == step]
        return any(e.verdict == ACCEPTED for e in mine) or _primaries(mine) >= self.config.candidates

    # -- the loop ----------------------------------------------------------------------------------------

    def budget_stop(self, tokens: bool = True) -> str | None:
        """Why the run must stop now, if it must; `tokens=False` checks only the clock (judging a candidate
        already received costs no tokens)."""
        if self.budget.max_wall is not None and time.monotonic() - self.started >= self.budget.max_wall:
            return f"wall-clock budget of {self.budget.max_wall:g} s reached"
        if tokens and self.budget.max_tokens is not None:
            spent = self.tokens_spent()
            if spent >= self.budget.max_tokens:
                return f"token budget of {self.budget.max_tokens} reached ({spent} spent)"
        return None

    def run(self) -> RunResult:
        result = RunResult(path=self.ledger.path, stop_reason=f"all {self.config.steps} steps done")
        step = self.next_step()
        if step > 1:
            self._finish_step(step - 1)  # a kill may have come between a step's last commit and its admission
        while step <= self.config.steps:
            stop = self.budget_stop()
            if stop:
                result.stop_reason = stop
                break
            try:
                outcome = self.run_step(step)
            except ProposerStopped as exc:
                result.stop_reason, result.exit_code = str(exc) + self._resume_hint(exc), exc.exit_code
                break
            if outcome is not None:
                result.stop_reason = outcome
                break
            result.steps_run.append(step)
            step += 1
        shutil.rmtree(self.scratch, ignore_errors=True)
        return result

    def _resume_hint(self, exc: ProposerStopped) -> str:
        """Where the run is and how to continue it, for a stop that a later invocation can get past."""
        if isinstance(exc, AwaitingReplies):
            return f"; once they are written, continue with: nearpeak run --resume {self.ledger.path}"
        if isinstance(exc, EndpointUnreachable):
            return (f"; the run is kept at {self.ledger.path}: continue it with nearpeak run --resume "
                    f"{self.ledger.path} --base-url URL")
        return ""

    def run_step(self, step: int) -> str | None:
        """Do (or finish) one step; returns a stop reason when the run cannot go on.

        Raises ProposerStopped (after judging what was received) when the proposer says the run must end.
        """
        judged = [e for e in self.ledger.entries() if e.step == step]
        waiting = [e for e in self.ledger.proposals() if e.step == step]
        need = self.config.candidates - _primaries(judged) - _primaries(waiting)
        stopped = None
        if need > 0:
            first = max((e.candidate for e in judged + waiting), default=0) + 1
            try:
                received = self._receive(step, self.population(), need, first)
            except ProposerStopped as exc:
                received, stopped = None, exc
            if received == 0 and not judged and not waiting:
                return f"the {self.proposer.name} proposer has nothing left to propose"
            waiting = [e for e in self.ledger.proposals() if e.step == step]
        planned = self._waiting(waiting)
        stop = None
        if planned:
            with self.progress.task(f"[step {step}/{self.config.steps}] judging {len(planned)} candidate(s) on "
                                    f"{self.executor.description}", report_end=False):
                stop = self._evaluate(step, planned)
        # What passed so far is still admitted: a budget ends the run, not the step's result.
        self._finish_step(step)
        if stopped is not None:
            raise stopped
        return stop

    # -- receiving proposals -----------------------------------------------------------------------------

    def _parent(self, member: Member, rank: int) -> Parent:
        return Parent(member, rank, self.ledger.read(member.sha, KERNEL).decode(), self._json(member.sha, RECORD))

    def _receive(self, step: int, population: list[Member], need: int, first: int) -> int:
        """Ask for `need` children spread over parents drawn from the population and commit each proposal (and
        its knob settings) the moment it arrives; returns how many proposals arrived. With K > 1 and a proposer
        that plans, the step's plan comes first (or is read back from a proposal already committed)."""
        tag = f"[step {step}/{self.config.steps}]"
        numbers = iter(range(first, first + 10 ** 6))
        seen = {e.trailers.get("Kernel-Sha256", "") for e in self.ledger.entries() + self.ledger.proposals()}
        wanted = {m.sha: 0 for m in population}
        for m in self.search.parents(population, step, need):
            wanted[m.sha] += 1
        slots = self._free_slots(step)
        step_plan = self._step_plan(step, population)
        received = carry = 0
        for rank, member in enumerate(population, start=1):  # best first; what one cannot fill passes on
            ask = wanted[member.sha] + carry
            if ask == 0:
                continue
            parent = self._parent(member, rank)
            mine = tuple(next(slots) for _ in range(ask))
            self.progress(f"{tag} asking {self.proposer.name} for {ask} candidate(s) from "
                          f"{kernel_name(member.label)}" + (f" (rank {rank} of {len(population)} in the population)"
                                                            if len(population) > 1 else ""))
            got = 0
            context = self._context(step, ask, parent, mine, step_plan.plan if step_plan else None)
            for proposal in self.proposer.propose(context):
                if got == ask:
                    break
                got += 1
                number = next(numbers)
                if isinstance(proposal, FailedProposal):
                    self._commit_failure(step, number, proposal, parent, step_plan)
                    self.progress(f"{tag} candidate {number}: {FAILED}: {proposal.reason}")
                    continue
                self._commit_proposal(step, number, proposal, parent, None, step_plan)
                self.progress(f"{tag} candidate {number} received: {proposal.title}")
                seen.add(sha256(proposal.source))
                if self.proposer.name == "tune":
                    continue
                for variant in self._variants(proposal.source, self.config.tune_budget, seen):
                    seen.add(sha256(variant.source))
                    self._commit_proposal(step, next(numbers), variant, parent, number)
            received += got
            carry = ask - got
        return received

    def _step_entries(self, step: int) -> list[Entry]:
        return [e for e in self.ledger.entries() + self.ledger.proposals() if e.step == step]

    def _free_slots(self, step: int):
        """The step's request numbers not yet used by a committed proposal (a resumed step asks only for the
        lost ones, under their own numbers: the manual proposer's files are named by them)."""
        used = {(self._json(e.sha, STEP).get("proposal") or {}).get("request")
                for e in self._step_entries(step) if "Variant-Of" not in e.trailers}
        n = 0
        while True:
            n += 1
            if n not in used:
                yield n

    def _step_plan(self, step: int, population: list[Member]) -> StepPlan | None:
        """The step's ideas: read back from a commit of the step, else asked for once (K > 1 only)."""
        planner = getattr(self.proposer, "plan", None)
        if self.config.candidates < 2 or planner is None:
            return None
        for entry in self._step_entries(step):
            kept = self._json(entry.sha, STEP).get("plan")
            if kept is not None:
                return StepPlan(Plan.from_dict(kept), recorded=True)
        best = self._parent(population[0], 1)
        tag = f"[step {step}/{self.config.steps}]"
        self.progress(f"{tag} asking {self.proposer.name} for a plan of {self.config.candidates} distinct ideas "
                      f"(evidence of {kernel_name(best.member.label)})")
        plan = planner(PlanRequest(self._context(step, self.config.candidates, best), self.config.candidates,
                                   self._tried_ideas(step)))
        if plan.ideas:
            self.progress(f"{tag} plan: " + "; ".join(i.label for i in plan.ideas))
        else:
            self.progress(f"{tag} no plan ({plan.cause}): the requests choose their own ideas")
        return StepPlan(plan, recorded=False)

    def _tried_ideas(self, step: int) -> tuple[TriedIdea, ...]:
        tried = []
        for entry in self.ledger.entries() + self.ledger.proposals():
            idea = self._json(entry.sha, STEP).get("idea") if 0 < entry.step < step else None
            if idea:
                tried.append(TriedIdea(entry.step, entry.candidate, idea.get("title", ""), entry.verdict,
                                       entry.trailers.get("Reason", "")[:160]))
        return tuple(sorted(tried, key=lambda t: (t.step, t.candidate)))

    def _plan_fields(self, step_plan: StepPlan | None, meta: dict) -> tuple[dict, dict[str, str]]:
        """The step.json keys (plan, the candidate's idea, once the planning request) and the files (once the
        planning prompt and reply) a proposal of a planned step carries."""
        if step_plan is None:
            return {}, {}
        plan = step_plan.plan
        fields: dict = {"plan": plan.to_dict()}
        idea = plan.idea(meta.get("request", 0)) if plan.status == "ok" else None
        if idea is not None:
            fields["idea"] = idea.to_dict()
        files: dict[str, str] = {}
        if not step_plan.recorded:
            fields["plan_request"] = plan.meta
            files = dict(plan.artifacts)
            step_plan.recorded = True
        return fields, files

    def _variants(self, source: str, count: int, seen: set[str]) -> list[Candidate]:
        if count <= 0 or self.tune_cache is None:
            return []
        return knob_candidates(source, count, self.tune_cache, self.config.target, seen, self.config.knob_choices)

    def _waiting(self, waiting: list[Entry]) -> list[Planned]:
        """The step's received candidates, in order, with their parents; repeats of a source are marked."""
        seen = {}
        for e in self.ledger.entries():
            seen.setdefault(e.trailers.get("Kernel-Sha256", ""), f"{e.step}.{e.candidate}")
        members = {e.sha: e for e in self.ledger.main_line() + self.ledger.off_main()}
        parents: dict[str, Parent] = {}
        planned = []
        for entry in waiting:
            step_data = self._json(entry.sha, STEP)
            if entry.parent not in parents:
                parents[entry.parent] = self._parent(self._member(members[entry.parent]),
                                                     step_data.get("parent_rank", 0))
            files = self.ledger.files(entry.sha)
            for name in (RUN, RECORD, STEP):
                files.pop(name, None)
            source = files.pop(KERNEL).decode()
            candidate = Candidate(source=source, rationale=step_data.get("rationale", ""),
                                  title=step_data.get("title", ""), meta=step_data.get("proposal") or {},
                                  artifacts={k: v.decode() for k, v in files.items()})
            digest = sha256(source)
            carried = {k: step_data[k] for k in CARRIED if k in step_data}
            planned.append(Planned(entry.candidate, candidate, parents[entry.parent], entry.ref,
                                   step_data.get("variant_of"), digest in seen, seen.get(digest, ""), carried))
            seen.setdefault(digest, f"{entry.step}.{entry.candidate}")
        return planned

    # -- evaluating --------------------------------------------------------------------------------------

    def _job(self, item: Planned) -> Job:
        return Job(number=item.number, source=item.proposal.source, parent_source=item.parent.source,
                   target=self.config.target, min_gain=self.config.min_gain, max_spills=self.config.max_spills,
                   timeout_s=self.config.candidate_timeout, profile=self.config.profile,
                   problem=self.config.run_problem())

    def _evaluate(self, step: int, planned: list[Planned]) -> str | None:
        """Evaluate the planned candidates on the executor and commit each, in order, as soon as it can be."""
        results: dict[int, Result | None] = {}   # None: nothing to evaluate (a duplicate)
        dropped: set[int] = set()                 # not evaluated because the budget ran out: left waiting
        in_flight: dict[Future, tuple[Planned, str]] = {}
        started: dict[int, float] = {}
        order = [item.number for item in planned]
        by_number = {item.number: item for item in planned}
        committed = 0
        stop = self.budget_stop(tokens=False)
        self._compiled, self._judging = self._compiled_so_far(), step
        for item in planned:
            started[item.number] = time.monotonic()
            if item.duplicate:
                results[item.number] = None
            elif stop:
                dropped.add(item.number)
            else:
                in_flight[self.executor.submit_static(self._job(item))] = (item, "static")
                self.progress(f"[step {step}/{self.config.steps}] candidate {item.number} {item.proposal.title}: "
                              f"evaluating ...")
        def commit_ready() -> None:
            nonlocal committed, stop
            while committed < len(order) and (order[committed] in results or order[committed] in dropped):
                number = order[committed]
                committed += 1
                if number not in dropped:
                    self._commit_result(step, by_number[number], results[number],
                                        time.monotonic() - started[number])
                    stop = stop or self.budget_stop(tokens=False)

        while True:
            commit_ready()
            if stop:
                for future in [f for f in in_flight if f.cancel()]:
                    dropped.add(in_flight.pop(future)[0].number)
            if committed == len(order) or not in_flight:
                break
            done, _ = wait(in_flight, return_when=FIRST_COMPLETED)
            for future in sorted(done, key=lambda f: in_flight[f][0].number):
                item, phase = in_flight.pop(future)
                result = self._phase_done(item, phase, future, stop is None)
                while isinstance(result, Future) and result.done():  # an executor that ran it already
                    result = self._phase_done(item, "measured", result, True)
                if isinstance(result, Future):
                    in_flight[result] = (item, "measured")
                elif result is None:
                    dropped.add(item.number)
                else:
                    results[item.number] = result
                commit_ready()
        return stop if dropped else None  # a step that finished counts as run, whatever the budget says now

    def _compiled_so_far(self) -> dict[str, str]:
        """compiled_sha256 -> the step.candidate label of the first evaluation of the run that compiled to it."""
        compiled: dict[str, str] = {}
        for e in self.ledger.entries():
            digest = e.trailers.get(COMPILED_TRAILER, "")
            if digest and "Duplicate-Of" not in e.trailers:
                compiled.setdefault(digest, f"{e.step}.{e.candidate}")
        return compiled

    def _phase_done(self, item: Planned, phase: str, future: Future, go_on: bool) -> Result | Future | None:
        """Judge a finished phase, or hand a candidate that passed its static screen to a GPU worker (None: the
        budget ran out before it could be measured). A candidate whose compiled kernels equal those of a kernel
        evaluated before in the run (the incumbent included) or of a sibling already claimed is a duplicate:
        rejected as such, before any GPU time."""
        if phase == "static":
            record = self._outcome(future)
            kept = normalize_record(record, item.parent.member.sha)
            seconds = {"static": record.get("job_seconds")}
            digest = compiled_digest(record)
            if digest and digest in self._compiled:
                label = self._compiled[digest]
                reason = (f"duplicate of {duplicate_name(label)}: the same compiled kernels (compiled_sha256 "
                          f"{digest[:12]}); not evaluated again")
                return Result(kept, Judgement(False, reason, (), False), seconds, label)
            if digest:
                self._compiled[digest] = f"{self._judging}.{item.number}"
            reason = screen(kept, self.config.max_spills)
            if reason is not None:
                return Result(kept, Judgement(False, reason, (), True), seconds)
            if self.config.mode != MEASURED:
                judgement = judge_static(kept, item.parent.record, self.config.min_gain)
                return Result(kept, with_shape_note(judgement, kept, item.parent.record), seconds)
            if not go_on:
                return None
            return self.executor.submit_measured(self._job(item), record)
        try:
            measured: MeasuredResult = future.result()
        except Exception as exc:  # noqa: BLE001 - a worker that breaks rejects this candidate only
            message = f"{type(exc).__name__}: {exc}"
            return Result({"status": "evaluator_error", "message": message, "target": self.config.target},
                          Judgement(False, f"measured evaluation failed: {message}", (), True))
        parent = item.parent.member.sha
        record = normalize_record(measured.record, parent)
        reason = screen(record, self.config.max_spills)
        if reason is not None:
            return Result(record, Judgement(False, reason, (), True), measured.seconds)
        comparison = in_run_paths(measured.comparison or {}, parent)   # step.json keeps it
        judgement = judge_measured(record, comparison, self.config.min_gain)
        return Result(record, with_shape_note(judgement, record, item.parent.record), measured.seconds)

    def _outcome(self, future: Future) -> dict:
        """An evaluator crash is a failed candidate, recorded with its traceback tail, not the end of the run."""
        try:
            return future.result()
        except Exception as exc:  # noqa: BLE001 - the loop must go on; the record says what broke
            tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]
            return {"status": "evaluator_error", "message": f"{type(exc).__name__}: {exc}", "line": None,
                    "target": self.config.target, "traceback_tail": "".join(tail)}

    # -- committing --------------------------------------------------------------------------------------

    def _commit_result(self, step: int, item: Planned, result: Result | None, elapsed: float) -> None:
        tag = f"[step {step}/{self.config.steps}] candidate {item.number}"
        proposal = item.proposal
        if item.duplicate or result is None:
            original = self._find_source(proposal.source)
            record = self._json(original.sha, RECORD) if original else {}
            label = f"{original.step}.{original.candidate}" if original else item.duplicate_of
            where = duplicate_name(label) if label else "an earlier candidate"
            result = Result(record, Judgement(False, f"duplicate of {where}: the same source; not re-evaluated",
                                              (), False), duplicate_of=label)
        verdict = PASSED if result.judgement.passed else REJECTED
        self._commit_candidate(step, item, result, verdict, elapsed)
        outcome = Outcome(verdict, result.judgement.reason, result.record, result.judgement.screened_out)
        if not item.duplicate:
            if item.variant_of is None:
                self.proposer.observe(proposal, outcome)
            elif self.tune_cache is not None:
                record_outcome(self.tune_cache, proposal, outcome)
        self.progress(f"{tag} {proposal.title}: {verdict} - {result.judgement.reason} [{headline(result.record)}; "
                      f"{elapsed:.1f} s; parent: {kernel_name(item.parent.member.label)}]")

    def _find_source(self, source: str) -> Entry | None:
        digest = sha256(source)
        return next((e for e in self.ledger.entries() if e.trailers.get("Kernel-Sha256") == digest), None)

    def _lineage(self, parent: Parent, variant_of: int | None) -> dict:
        data = {"parent": parent.member.sha, "parent_step": parent.member.label, "parent_rank": parent.rank,
                "strategy": self.config.strategy}
        if variant_of is not None:
            data["variant_of"] = variant_of
        return data

    def _commit_proposal(self, step: int, n: int, proposal: Candidate, parent: Parent, variant_of: int | None,
                         step_plan: StepPlan | None = None) -> str:
        """A received candidate, kept on its proposal ref until it is judged."""
        planned, plan_files = self._plan_fields(step_plan, proposal.meta) if variant_of is None else ({}, {})
        step_data = step_json(self.config, step=step, candidate=n, verdict=PROPOSED, reason="received, not yet judged",
                              proposer="tune" if variant_of is not None else self.proposer.name, title=proposal.title,
                              rationale=proposal.rationale, kernel_sha256=sha256(proposal.source),
                              proposal=proposal.meta, **self._lineage(parent, variant_of), **planned)
        record = {"status": PENDING_STATUS, "target": self.config.target, "triton_version": self.config.triton_version}
        return self._commit(parent.member.sha, proposal.source, record, step_data,
                            {**proposal.artifacts, **plan_files}, proposal_ref(step, n))

    def _commit_candidate(self, step: int, item: Planned, result: Result, verdict: str, elapsed: float) -> str:
        proposal, judgement = item.proposal, result.judgement
        step_data = step_json(self.config, step=step, candidate=item.number, verdict=verdict,
                              reason=judgement.reason, proposer=self._proposer_name(item), title=proposal.title,
                              rationale=proposal.rationale, kernel_sha256=sha256(proposal.source),
                              score=list(judgement.score), screened_out=judgement.screened_out,
                              comparison=judgement.comparison, proposal=proposal.meta, elapsed_s=round(elapsed, 3),
                              phases_s={k: v for k, v in result.seconds.items() if v is not None},
                              **self._lineage(item.parent, item.variant_of), **item.carried,
                              **({"duplicate_of": result.duplicate_of} if result.duplicate_of else {}))
        return self._commit(item.parent.member.sha, proposal.source, result.record, step_data, proposal.artifacts,
                            attempt_ref(step, item.number), (item.waiting_ref,))

    def _proposer_name(self, item: Planned) -> str:
        return "tune" if item.variant_of is not None else self.proposer.name

    def _commit_failure(self, step: int, n: int, failure: FailedProposal, parent: Parent,
                        step_plan: StepPlan | None = None) -> str:
        record = {"status": "no_candidate", "message": failure.reason, "target": self.config.target,
                  "triton_version": self.config.triton_version}
        planned, plan_files = self._plan_fields(step_plan, failure.meta)
        step_data = step_json(self.config, step=step, candidate=n, verdict=FAILED, reason=failure.reason,
                              proposer=self.proposer.name, title="no candidate", screened_out=True,
                              proposal=failure.meta, **self._lineage(parent, None), **planned)
        # The tree keeps the parent's kernel, so every commit of the ledger is a complete snapshot.
        return self._commit(parent.member.sha, parent.source, record, step_data,
                            {**failure.artifacts, **plan_files}, attempt_ref(step, n))

    def _commit(self, parent: str, source: str, record: dict, step_data: dict, artifacts: dict[str, str],
                ref: str, delete_refs: tuple[str, ...] = ()) -> str:
        files = {RUN: self.run_file, KERNEL: source.encode(), RECORD: dump(record), STEP: dump(step_data),
                 **{k: v.encode() for k, v in artifacts.items()}}
        return self.ledger.commit(files, self._message(step_data, record), parent=parent, ref=ref,
                                  delete_refs=delete_refs)

    def _message(self, step_data: dict, record: dict) -> str:
        summary = f"step {step_data['step']}.{step_data['candidate']}: {step_data['verdict']} - {step_data['title']}"
        return commit_message(summary, step_data["rationale"], trailer_block(self.config, step_data, record))

    # -- admitting a step's passers ------------------------------------------------------------------------

    def _finish_step(self, step: int) -> None:
        """Admit the step's passers that rank in the population, and lay out main, population and retired refs
        accordingly, all in one ref transaction. Idempotent: a step whose passers were admitted has none left."""
        head = self.ledger.resolve(MAIN)
        accepted = self.accepted()
        passing = [e for e in self.ledger.attempts() if e.step == step and e.verdict == PASSED]
        if self.search.strategy == GREEDY:  # passers outranked by the step's winner stay where they are
            passing = [e for e in passing if e.parent == head]
        admitted = self.search.admit(self.search.population(accepted, head), [self._member(e) for e in passing])
        if not admitted:
            return
        changes: list[RefChange] = []
        new_members = []
        by_score = sorted(passing, key=lambda e: (tuple(self._json(e.sha, STEP).get("score") or ()), -e.candidate),
                          reverse=True)
        for member in admitted:
            entry = next(e for e in passing if e.sha == member.sha)
            files = self.ledger.files(entry.sha)
            step_data = json.loads(files[STEP])
            rank = by_score.index(entry) + 1
            reason = f"{'best' if rank == 1 else f'number {rank}'} of {len(passing)} passing candidate(s)"
            if self.search.strategy != GREEDY:
                reason += f", ranks in the population of {self.search.beam}"
            step_data.update(verdict=ACCEPTED, reason=f"{reason}: {step_data['reason']}")
            files[STEP] = dump(step_data)
            sha = self.ledger.write_commit(files, self._message(step_data, json.loads(files[RECORD])), entry.parent)
            changes.append(RefChange(entry.ref, None, entry.sha))
            new_members.append(replace(member, sha=sha))
        members = accepted + new_members
        best = new_members[0] if self.search.strategy == GREEDY else ranked(members)[0]
        changes += self._layout(members, best, head)
        self.ledger.move_refs(changes)
        figure = (f"{best.merit:.3f}x the starting kernel, chained A/B speedups" if self.config.mode == MEASURED
                  else f"{best.merit:.4g} by static estimate")
        main = (f"promoted candidate {best.candidate} to main" if best in new_members
                else f"main holds {kernel_name(best.label)}")
        self.progress(f"[step {step}/{self.config.steps}] accepted {', '.join(f'step {m.label}' for m in new_members)}; "
                      f"{main} ({figure})")

    def _layout(self, members: list[Member], best: Member, head: str) -> list[RefChange]:
        """Ref changes that put `best` on main and every other accepted kernel on its own population ref (when
        it ranks in the population) or retired ref."""
        lineage = set(self.ledger.first_parent_chain(best.sha))
        keep = {m.sha for m in self.search.population(members, best.sha)}
        wanted = {}
        for m in members:
            if m.sha not in lineage:
                wanted[(population_ref if m.sha in keep else retired_ref)(m.step, m.candidate)] = m.sha
        current = {**self.ledger.refs(POPULATION), **self.ledger.refs(RETIRED)}
        changes = [RefChange(MAIN, best.sha, head)] if best.sha != head else []
        changes += [RefChange(ref, None, sha) for ref, sha in current.items() if wanted.get(ref) != sha]
        changes += [RefChange(ref, sha, None) for ref, sha in wanted.items() if current.get(ref) != sha]
        return changes


def step_json(config: RunConfig, *, step: int, candidate: int, verdict: str, reason: str, proposer: str,
              title: str, rationale: str = "", kernel_sha256: str = "", score: list | None = None,
              screened_out: bool = False, comparison: dict | None = None, proposal: dict | None = None,
              **extra) -> dict:
    """A commit's step.json (docs/ledger-format.md); `extra` holds the keys only some commits have."""
    return {"step": step, "candidate": candidate, "verdict": verdict, "reason": reason, "proposer": proposer,
            "title": title, "rationale": rationale, "kernel_sha256": kernel_sha256, "mode": config.mode,
            "objective": config.objective, "score": score or [], "screened_out": screened_out,
            "comparison": comparison, "proposal": proposal or {}, **extra}


def trailer_block(config: RunConfig, step_data: dict, record: dict) -> dict[str, str]:
    """The trailers of the commit that holds `step_data` and `record`."""
    extra = {"Objective": config.mode}
    problem = config.run_problem()
    if problem is not None:
        extra["Problem"] = problem.describe()
    if step_data.get("parent"):
        extra["Parent"] = step_data["parent"]
    if step_data.get("variant_of") is not None:
        extra["Variant-Of"] = str(step_data["variant_of"])
    if step_data["kernel_sha256"]:
        extra["Kernel-Sha256"] = step_data["kernel_sha256"]
    compiled = compiled_digest(record)
    if compiled:
        extra[COMPILED_TRAILER] = compiled
    if step_data.get("duplicate_of"):
        extra["Duplicate-Of"] = step_data["duplicate_of"]
    if step_data.get("idea"):
        extra["Idea"] = f"{step_data['idea']['number']} - {step_data['idea']['title']}"
    comparison = step_data.get("comparison")
    if comparison and comparison.get("speedup") is not None:
        extra["Speedup-Measured"] = (f"{comparison.get('speedup'):.4f} (95% CI {comparison.get('ci_low'):.4f}"
                                     f"-{comparison.get('ci_high'):.4f}, {comparison.get('method')})")
    meta = step_data.get("proposal") or {}
    usage = meta.get("usage")
    if usage is not None:
        extra["Tokens"] = str(usage.get("total_tokens", 0))
        if usage.get("prompt_tokens") is not None or usage.get("completion_tokens") is not None:
            extra["Tokens-Prompt"] = str(usage.get("prompt_tokens", 0))
            extra["Tokens-Completion"] = str(usage.get("completion_tokens", 0))
        extra["LLM-Tries"] = str(meta.get("tries", 0))
    estimated = meta.get("estimated_usage")
    if estimated:
        extra["Tokens-Estimate"] = f"{estimated['prompt_tokens']}+{estimated['completion_tokens']} (prompt+completion, " \
                                   "characters/4, not a count)"
    plan_usage = (step_data.get("plan_request") or {}).get("usage")
    if plan_usage:
        extra["Plan-Tokens"] = str(plan_usage.get("total_tokens", 0))
    if meta.get("idle_steps") is not None:
        extra[IDLE_STEPS_TRAILER] = str(meta["idle_steps"])
    return trailers(record, step=step_data["step"], candidate=step_data["candidate"], verdict=step_data["verdict"],
                    reason=step_data["reason"], proposer=step_data["proposer"], seed=config.seed, extra=extra)


def baseline_commit(config: RunConfig, source: str, record: dict) -> tuple[dict[str, bytes], str]:
    """Files and message of a run's root commit: the starting kernel and its evaluation."""
    step_data = step_json(config, step=0, candidate=0, verdict=BASELINE, reason="starting kernel",
                          proposer=config.proposer, title=Path(config.source_file).name,
                          kernel_sha256=sha256(source))
    files = {RUN: config.to_json().encode(), KERNEL: source.encode(), RECORD: dump(normalize_record(record)),
             STEP: dump(step_data)}
    rationale = (f"Run {config.run_id}: {config.proposer} proposer, {config.steps} step(s) of {config.candidates} "
                 f"candidate(s) on {config.target}.\nAccept rule: {config.objective}.")
    return files, commit_message(f"step 0: baseline - {step_data['title']}", rationale,
                                 trailer_block(config, step_data, record))


def idle_steps_so_far(ledger: Ledger) -> int:
    """The LLM proposer's count of consecutive steps without a usable reply, as the last step whose requests
    all came back left it (its last proposal's LLM-Idle-Steps trailer); 0 when no step has."""
    marked = [e for e in ledger.entries() + ledger.proposals() if e.trailers.get(IDLE_STEPS_TRAILER, "").isdigit()]
    if not marked:
        return 0
    return int(max(marked, key=lambda e: (e.step, e.candidate)).trailers[IDLE_STEPS_TRAILER])


def kernel_name(label: str) -> str:
    """A kernel of the run in words: "the start kernel" for 0.0, else "step 2.1"."""
    return "the start kernel (step 0)" if label in ("0.0", "0") else f"step {label}"


def duplicate_name(label: str) -> str:
    return "step 0.0 (the start kernel)" if label in ("0.0", "0") else f"step {label}"


def _primaries(entries: list[Entry]) -> int:
    """How many of `entries` came from the proposer itself (not knob settings added by --tune-budget)."""
    return sum("Variant-Of" not in e.trailers for e in entries)


def _trailer_headline(entry: Entry) -> str:
    t = entry.trailers
    parts = []
    if t.get("TFLOPS-Measured", "n/a").split()[0] != "n/a":
        parts.append(f"{t['TFLOPS-Measured']} TFLOPS measured")
    elif "TFLOPS-Estimate" in t:
        parts.append(f"{t['TFLOPS-Estimate']} TFLOPS static est.")
    parts.append(f"eff {t.get('Efficiency-Estimate', 'n/a')} static est.")
    parts.append(f"spills {t.get('Spills', 'n/a')}")
    return ", ".join(parts)
