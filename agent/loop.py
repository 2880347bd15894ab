"""The optimization loop: propose, screen, evaluate, judge, commit; one step at a time.

The controller owns no state of its own between steps: everything it needs (incumbent, attempts, tokens
spent) is read back from the ledger, which is what makes `--resume` after a kill work. Within a step each
proposal is committed the moment it arrives, before anything evaluates it, so a kill loses only requests
still in flight (and every token spent is counted):

* a received candidate waits on `refs/proposals/<step>-<n>` until it is judged; its judged commit replaces
  that ref in one ref transaction, and `--resume` judges whatever is still waiting;
* the static screens of a step's received candidates run in parallel; judging and committing stay in order;
* a candidate that fails the screen or the accept rule goes to `refs/attempts/<step>-<n>` (rejected);
* one that passes also goes there (verdict `passed`) unless it is the step's last candidate and the best so
  far, in which case it is committed straight to `main` (accepted);
* when the step's candidates are all in, the best passing attempt is promoted to `main` (its attempt ref is
  deleted in the same ref transaction).
"""
from __future__ import annotations

import json
import os
import shutil
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from .config import RunConfig
from .evaluation import MEASURED, Evaluator, Judgement, judge_measured, judge_static, screen
from .figures import commit_message, headline, trailers
from .ledger import MAIN, SCRATCH, Entry, Ledger, attempt_ref, proposal_ref
from .progress import Progress
from .proposers import Attempt, Candidate, FailedProposal, Outcome, ProposalContext, Proposer, ProposerStopped
from .source import compact_diff, sha256

KERNEL, RECORD, STEP, RUN = "kernel.py", "evaluation.json", "step.json", "run.json"
ACCEPTED, PASSED, REJECTED, FAILED, BASELINE = "accepted", "passed", "rejected", "proposal-failed", "baseline"
PROPOSED = "proposed"
PENDING_STATUS = "pending"      # evaluation.json of a received, not yet judged candidate


def dump(data: dict) -> bytes:
    return (json.dumps(data, indent=1, sort_keys=True, default=str) + "\n").encode()


def normalize_record(record: dict) -> dict:
    """The record as the ledger keeps it: the kernel is always kernel.py, wherever it was evaluated."""
    return {**record, "file": KERNEL}


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


class Optimizer:
    """Runs the steps of one run over its ledger."""

    def __init__(self, ledger: Ledger, config: RunConfig, proposer: Proposer, evaluator: Evaluator,
                 budget: Budget, progress: Progress):
        self.ledger = ledger
        self.config = config
        self.proposer = proposer
        self.evaluator = evaluator
        self.budget = budget
        self.progress = progress
        self.scratch = ledger.path / SCRATCH
        self.started = time.monotonic()
        self.run_file = ledger.read(ledger.main_line()[0].sha, RUN)   # run.json, the same in every commit

    # -- reading the ledger ------------------------------------------------------------------------------

    def _json(self, sha: str, name: str) -> dict:
        data = self.ledger.read(sha, name)
        return json.loads(data) if data else {}

    def _incumbent(self) -> tuple[Entry, str, dict]:
        head = self.ledger.main_line()[-1]
        return head, self.ledger.read(head.sha, KERNEL).decode(), self._json(head.sha, RECORD)

    def tokens_spent(self) -> int:
        return sum(int(e.trailers.get("Tokens", "0") or 0) for e in self.ledger.entries() + self.ledger.proposals())

    def _context(self, step: int, count: int, incumbent_source: str, incumbent_record: dict) -> ProposalContext:
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
                               incumbent_source=incumbent_source, incumbent_record=incumbent_record,
                               last_record=last_record, last_source=last_source, history=history, tried=tried)

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
        if any(e.step == step and e.ref == MAIN for e in entries):
            return True
        return sum(e.step == step for e in entries) >= self.config.candidates

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
        while step <= self.config.steps:
            stop = self.budget_stop()
            if stop:
                result.stop_reason = stop
                break
            try:
                outcome = self.run_step(step)
            except ProposerStopped as exc:
                result.stop_reason, result.exit_code = str(exc), exc.exit_code
                break
            if outcome is not None:
                result.stop_reason = outcome
                break
            result.steps_run.append(step)
            step += 1
        shutil.rmtree(self.scratch, ignore_errors=True)
        return result

    def run_step(self, step: int) -> str | None:
        """Do (or finish) one step; returns a stop reason when the run cannot go on.

        Raises ProposerStopped (after judging what was received) when the proposer says the run must end.
        """
        judged = [e for e in self.ledger.entries() if e.step == step]
        head, incumbent_source, incumbent_record = self._incumbent()
        waiting = [e for e in self.ledger.proposals() if e.step == step]
        need = self.config.candidates - len(judged) - len(waiting)
        stopped = None
        if need > 0:
            self.progress(f"[step {step}/{self.config.steps}] asking {self.proposer.name} for {need} candidate(s)")
            context = self._context(step, need, incumbent_source, incumbent_record)
            try:
                received = self._receive(step, context, head, incumbent_source, len(judged) + len(waiting) + 1)
            except ProposerStopped as exc:
                received, stopped = None, exc
            if received == 0 and not judged and not waiting:
                return f"the {self.proposer.name} proposer has nothing left to propose"
            waiting = [e for e in self.ledger.proposals() if e.step == step]
        stop = self._judge_waiting(step, waiting, head, incumbent_source, incumbent_record)
        if self.ledger.resolve(MAIN) == head.sha:
            self._promote_best(step, head)
        if stopped is not None:
            raise stopped
        return stop

    def _receive(self, step: int, context: ProposalContext, head: Entry, incumbent_source: str, first: int) -> int:
        """Commit each proposal the moment the proposer hands it over; returns how many arrived."""
        count = 0
        for n, proposal in enumerate(self.proposer.propose(context), start=first):
            if count == context.count:
                break
            count += 1
            if isinstance(proposal, FailedProposal):
                self._commit_failure(step, n, proposal, head, incumbent_source)
                self.progress(f"[step {step}/{self.config.steps}] candidate {n}: {FAILED}: {proposal.reason}")
            else:
                self._commit_proposal(step, n, proposal, head)
                self.progress(f"[step {step}/{self.config.steps}] candidate {n} received: {proposal.title}")
        return count

    def _judge_waiting(self, step: int, waiting: list[Entry], head: Entry, incumbent_source: str,
                       incumbent_record: dict) -> str | None:
        """Screen the step's received candidates in parallel, then judge and commit them in order."""
        entries = [e for e in self.ledger.entries() if e.step == step]
        best: tuple | None = max((self._score_of(e) for e in entries if e.verdict == PASSED), default=None)
        proposals = [(entry, self._received(entry)) for entry in waiting]
        screens = self._static_screens(step, [(e.candidate, c.source) for e, c in proposals])
        for index, (entry, proposal) in enumerate(proposals):
            stop = self.budget_stop(tokens=False)
            if stop:
                return stop  # what passed so far is still promoted; the rest waits for --resume
            last = index == len(proposals) - 1
            score = self._handle(step, entry.candidate, proposal, head, incumbent_source, incumbent_record, last,
                                 best, screens.get(entry.candidate), entry.ref)
            if score is not None and (best is None or score > best):
                best = score
        return None

    def _static_screens(self, step: int, candidates: list[tuple[int, str]]) -> dict[int, dict]:
        """The static record of each candidate not seen before, compiled in parallel on the CPU cores."""
        seen = {e.trailers.get("Kernel-Sha256") for e in self.ledger.entries()}
        todo, digests = [], set()
        for n, source in candidates:
            digest = sha256(source)
            if digest not in seen and digest not in digests:
                digests.add(digest)
                todo.append((n, self._scratch_file(step, n, source)))
        if not todo:
            return {}
        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool, \
                self.progress.task(f"[step {step}/{self.config.steps}] static screen of {len(todo)} candidate(s)"):
            records = pool.map(lambda item: self._safe_record(item[1], run=False), todo)
            return {n: record for (n, _), record in zip(todo, records)}

    def _received(self, entry: Entry) -> Candidate:
        """The candidate a proposal commit holds."""
        files = self.ledger.files(entry.sha)
        step_data = json.loads(files.pop(STEP))
        for name in (RUN, RECORD):
            files.pop(name, None)
        source = files.pop(KERNEL).decode()
        return Candidate(source=source, rationale=step_data.get("rationale", ""), title=step_data.get("title", ""),
                         meta=step_data.get("proposal") or {}, artifacts={k: v.decode() for k, v in files.items()})

    def _score_of(self, entry: Entry) -> tuple:
        return tuple(self._json(entry.sha, STEP).get("score") or ())

    def _handle(self, step: int, n: int, proposal: Candidate, head: Entry, incumbent_source: str,
                incumbent_record: dict, last: bool, best: tuple | None, static_record: dict | None,
                waiting_ref: str) -> tuple | None:
        """Evaluate and commit one received proposal; returns its score when it passed."""
        tag = f"[step {step}/{self.config.steps}] candidate {n}"
        started = time.monotonic()
        digest = sha256(proposal.source)
        duplicate = next((e for e in self.ledger.entries() if e.trailers.get("Kernel-Sha256") == digest), None)
        if duplicate is not None:
            record = self._json(duplicate.sha, RECORD)
            judgement = Judgement(False, f"duplicate of step {duplicate.step}.{duplicate.candidate}; not re-evaluated",
                                  (), False)
        else:
            with self.progress.task(f"{tag} {proposal.title}: evaluating", report_end=False):
                record, judgement = self._evaluate(step, n, proposal.source, incumbent_source, incumbent_record,
                                                   static_record)
        elapsed = time.monotonic() - started
        passed = judgement.passed
        accept_now = passed and last and (best is None or judgement.score > best)
        verdict = ACCEPTED if accept_now else (PASSED if passed else REJECTED)
        self._commit_candidate(step, n, proposal, record, judgement, verdict, head, elapsed, waiting_ref)
        if duplicate is None:
            self.proposer.observe(proposal, Outcome(verdict, judgement.reason, record, judgement.screened_out))
        self.progress(f"{tag} {proposal.title}: {verdict} - {judgement.reason} [{headline(record)}; {elapsed:.1f} s]")
        return judgement.score if passed else None

    def _scratch_file(self, step: int, n: int, source: str) -> Path:
        path = self.scratch / f"step{step:03d}-{n}" / KERNEL
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source)
        return path

    def _evaluate(self, step: int, n: int, source: str, incumbent_source: str, incumbent_record: dict,
                  static_record: dict | None) -> tuple[dict, Judgement]:
        path = self._scratch_file(step, n, source)
        record = static_record if static_record is not None else self._safe_record(path, run=False)
        reason = screen(record, self.config.max_spills)
        if reason is None and self.config.mode == MEASURED:
            record = self._safe_record(path, run=True)
            reason = screen(record, self.config.max_spills)
        if reason is not None:
            return normalize_record(record), Judgement(False, reason, (), True)
        if self.config.mode != MEASURED:
            return normalize_record(record), judge_static(record, incumbent_record)
        incumbent_path = self.scratch / "incumbent" / KERNEL
        incumbent_path.parent.mkdir(parents=True, exist_ok=True)
        incumbent_path.write_text(incumbent_source)
        try:
            comparison = self.evaluator.compare(path, incumbent_path, None, self.config.min_gain)
        except Exception as exc:  # noqa: BLE001 - a comparison that breaks rejects this candidate only
            return normalize_record(record), Judgement(False, f"interleaved comparison failed: "
                                                              f"{type(exc).__name__}: {exc}", (), True)
        return normalize_record(record), judge_measured(record, comparison, self.config.min_gain)

    def _safe_record(self, path: Path, run: bool) -> dict:
        """An evaluator crash is a failed candidate, recorded with its traceback tail, not the end of the run."""
        try:
            return self.evaluator.record(path, run=run)
        except Exception as exc:  # noqa: BLE001 - the loop must go on; the record says what broke
            tail = traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:]
            return {"status": "evaluator_error", "message": f"{type(exc).__name__}: {exc}", "line": None,
                    "target": self.config.target, "traceback_tail": "".join(tail)}

    # -- committing --------------------------------------------------------------------------------------

    def _commit_proposal(self, step: int, n: int, proposal: Candidate, head: Entry) -> str:
        """A received candidate, kept on its proposal ref until it is judged."""
        step_data = step_json(self.config, step=step, candidate=n, verdict=PROPOSED, reason="received, not yet judged",
                              proposer=self.proposer.name, title=proposal.title, rationale=proposal.rationale,
                              kernel_sha256=sha256(proposal.source), proposal=proposal.meta, incumbent=head.sha)
        record = {"status": PENDING_STATUS, "target": self.config.target,
                  "triton_version": self.config.triton_version}
        return self._commit(head, proposal.source, record, step_data, proposal.artifacts, proposal_ref(step, n))

    def _commit_candidate(self, step: int, n: int, proposal: Candidate, record: dict, judgement: Judgement,
                          verdict: str, head: Entry, elapsed: float, waiting_ref: str) -> str:
        step_data = step_json(self.config, step=step, candidate=n, verdict=verdict, reason=judgement.reason,
                              proposer=self.proposer.name, title=proposal.title, rationale=proposal.rationale,
                              kernel_sha256=sha256(proposal.source), score=list(judgement.score),
                              screened_out=judgement.screened_out, comparison=judgement.comparison,
                              proposal=proposal.meta, incumbent=head.sha, elapsed_s=round(elapsed, 3))
        ref = MAIN if verdict == ACCEPTED else attempt_ref(step, n)
        return self._commit(head, proposal.source, record, step_data, proposal.artifacts, ref, (waiting_ref,))

    def _commit_failure(self, step: int, n: int, failure: FailedProposal, head: Entry, incumbent_source: str) -> str:
        record = {"status": "no_candidate", "message": failure.reason, "target": self.config.target,
                  "triton_version": self.config.triton_version}
        step_data = step_json(self.config, step=step, candidate=n, verdict=FAILED, reason=failure.reason,
                              proposer=self.proposer.name, title="no candidate", screened_out=True,
                              proposal=failure.meta, incumbent=head.sha)
        # The tree keeps the incumbent's kernel, so every commit of the ledger is a complete snapshot.
        return self._commit(head, incumbent_source, record, step_data, failure.artifacts, attempt_ref(step, n))

    def _commit(self, head: Entry, source: str, record: dict, step_data: dict, artifacts: dict[str, str],
                ref: str, delete_refs: tuple[str, ...] = ()) -> str:
        files = {RUN: self.run_file, KERNEL: source.encode(), RECORD: dump(record), STEP: dump(step_data),
                 **{k: v.encode() for k, v in artifacts.items()}}
        return self.ledger.commit(files, self._message(step_data, record), parent=head.sha, ref=ref,
                                  delete_refs=delete_refs)

    def _message(self, step_data: dict, record: dict) -> str:
        summary = f"step {step_data['step']}.{step_data['candidate']}: {step_data['verdict']} - {step_data['title']}"
        return commit_message(summary, step_data["rationale"], trailer_block(self.config, step_data, record))

    def _promote_best(self, step: int, head: Entry) -> None:
        passed = [e for e in self.ledger.attempts() if e.step == step and e.verdict == PASSED]
        if not passed:
            return
        best = max(passed, key=self._score_of)
        files = self.ledger.files(best.sha)
        step_data = json.loads(files[STEP])
        step_data.update(verdict=ACCEPTED, reason=f"best of {len(passed)} passing candidate(s): {step_data['reason']}")
        files[STEP] = dump(step_data)
        message = self._message(step_data, json.loads(files[RECORD]))
        self.ledger.commit(files, message, parent=head.sha, ref=MAIN, delete_refs=(best.ref,))
        self.progress(f"[step {step}/{self.config.steps}] promoted candidate {best.candidate} to main")


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
    if step_data["kernel_sha256"]:
        extra["Kernel-Sha256"] = step_data["kernel_sha256"]
    comparison = step_data.get("comparison")
    if comparison:
        extra["Speedup-Measured"] = (f"{comparison.get('speedup'):.4f} (95% CI {comparison.get('ci_low'):.4f}"
                                     f"-{comparison.get('ci_high'):.4f}, {comparison.get('method')})")
    meta = step_data.get("proposal") or {}
    usage = meta.get("usage")
    if usage is not None:
        extra["Tokens"] = str(usage.get("total_tokens", 0))
        extra["LLM-Tries"] = str(meta.get("tries", 0))
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


def _trailer_headline(entry: Entry) -> str:
    t = entry.trailers
    parts = []
    if t.get("TFLOPS-Measured", "n/a").split()[0] != "n/a":
        parts.append(f"{t['TFLOPS-Measured']} TFLOPS measured")
    parts.append(f"eff {t.get('Efficiency-Estimate', 'n/a')} static est.")
    parts.append(f"spills {t.get('Spills', 'n/a')}")
    return ", ".join(parts)
