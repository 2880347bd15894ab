"""How the loop takes proposals in (fake evaluator, real git ledger, no compiles): each one is committed the
moment the proposer hands it over, a step's static screens run in parallel, and a proposer can stop the run
with its own exit code after what it handed over is judged."""
from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from loop_support import FakeEvaluator, make_run, optimize

from agent.executors.inline import InlineExecutor
from agent.ledger import attempt_ref, proposal_ref
from agent.proposers import Candidate, ProposerStopped


class MeetingEvaluator(FakeEvaluator):
    """The first `parties` static records of the step's candidates wait for each other at a barrier: they can
    only all get through if they run at the same time, however loaded the machine is."""

    def __init__(self, parties: int, candidates: list[str]):
        super().__init__()
        self.parties, self.candidates, self.calls, self.met = parties, candidates, 0, 0
        self._barrier = threading.Barrier(parties)
        self._lock = threading.Lock()

    def record(self, path, run):
        if path.read_text() not in self.candidates:   # the starting kernel is screened alone, before the step
            return super().record(path, run)
        with self._lock:
            waits, self.calls = self.calls < self.parties, self.calls + 1
        if waits:
            try:
                self._barrier.wait(timeout=60)
                with self._lock:
                    self.met += 1
            except threading.BrokenBarrierError:
                pass
        return super().record(path, run)


class ThreadedExecutor(InlineExecutor):
    """Screens on a pool of threads, as the local executor screens on a pool of processes."""

    def __init__(self, evaluator, workers: int):
        super().__init__(evaluator)
        self.pool = ThreadPoolExecutor(workers)

    def submit_static(self, job):
        return self.pool.submit(lambda: super(ThreadedExecutor, self).submit_static(job).result())


class WatchedProposer:
    """Yields candidates one by one and checks, before each next one, that the previous one is in the ledger."""

    name = "watched"

    def __init__(self, ledger, kernels, stop: ProposerStopped | None = None):
        self.ledger, self.kernels, self.stop = ledger, kernels, stop
        self.seen_waiting: list[int] = []

    def propose(self, context):
        for n, kernel in enumerate(self.kernels, start=1):
            if n > 1:
                self.seen_waiting.append(len(self.ledger.proposals()))
            yield Candidate(kernel, f"because {n}", f"idea {n}", meta={"usage": {"total_tokens": 10}})
        self.kernels = []
        if self.stop is not None:
            raise self.stop

    def observe(self, candidate, outcome):
        pass


def test_each_proposal_is_committed_before_the_next_arrives_and_screens_run_in_parallel(tmp_path):
    ledger, config = make_run(tmp_path, steps=1, candidates=3)
    kernels = ["EFF = 0.5\n", "EFF = 0.6\n", "EFF = 0.4\n"]
    proposer = WatchedProposer(ledger, list(kernels))
    # The loop hands every screen of the step to the executor before it waits for any: on an executor with as
    # many workers as the step has candidates, all of them meet.
    evaluator = MeetingEvaluator(parties=3, candidates=kernels)
    result, _, _ = optimize(ledger, config, proposer, evaluator, executor=ThreadedExecutor(evaluator, 3))
    assert proposer.seen_waiting == [1, 2]              # committed on arrival, before any evaluation
    assert evaluator.calls == 3 and evaluator.met == evaluator.parties
    assert not ledger.proposals()                       # every waiting ref replaced by its judged commit
    assert result.exit_code == 0
    assert sum(int(e.trailers["Tokens"]) for e in ledger.entries() if e.step == 1) == 30


def test_a_proposer_that_stops_the_run_gets_its_candidates_judged_and_its_exit_code(tmp_path):
    class Refused(ProposerStopped):
        exit_code = 4

    ledger, config = make_run(tmp_path, steps=3, candidates=2)
    proposer = WatchedProposer(ledger, ["EFF = 0.5\n"], stop=Refused("the endpoint refused the credentials"))
    result, _, _ = optimize(ledger, config, proposer)
    assert result.exit_code == 4 and result.stop_reason == "the endpoint refused the credentials"
    assert ledger.resolve(proposal_ref(1, 1)) is None and ledger.resolve(attempt_ref(1, 2)) is None
    assert [e.step for e in ledger.main_line()] == [0, 1]   # the one candidate received was judged and accepted
