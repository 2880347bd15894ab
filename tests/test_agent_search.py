"""Beam search over a real run ledger: parent choice, admission, main on the best lineage, population and
retired refs, deterministic commit order whatever order results arrive in.

Evaluation is scripted (a fake executor that returns static records from a table) so that which kernel wins
is known in advance; everything else (loop, search, git ledger, history, replay) is the real code.
"""
from __future__ import annotations

import io
import re
import threading
import time
from concurrent.futures import Future

import pytest
from agent_support import fsck_clean, git, nearpeak, refs
from loop_support import FAKE_RATIO_ERROR

from agent.config import RunConfig
from agent.evaluation import MEASURED, OBJECTIVES, STATIC
from agent.executors import MeasuredResult
from agent.ledger import MAIN, Ledger
from agent.loop import Budget, Optimizer, baseline_commit
from agent.progress import QUIET, Progress
from agent.proposers import Candidate
from agent.search import BEAM, GREEDY, Member, Search, ranked

ROOT = "# root kernel\n"


def record(efficiency: float) -> dict:
    """A static record as the evaluator writes one (only the fields the judgement and trailers read)."""
    return {"status": "ok", "target": "gfx950", "triton_version": "3.6.0", "message": None, "line": None,
            "static": {"estimated_efficiency": efficiency, "estimated_tflops": efficiency * 1000, "registers": 128,
                       "spills": 0, "hot_loop_spills": 0, "shared_bytes": 0,
                       "throughput": {"ratio_error": FAKE_RATIO_ERROR}}}


def later(delay: float, value) -> Future:
    """A future that gets `value` after `delay` seconds unless it was cancelled first."""
    future = Future()

    def finish():
        if future.set_running_or_notify_cancel():
            future.set_result(value)

    threading.Timer(delay, finish).start()
    return future


class ScriptedExecutor:
    """Static records from a table keyed by source; results arrive later the lower the candidate number, so
    the loop sees them in reverse order."""

    description = "scripted"

    def __init__(self, table: dict[str, float]):
        self.table = table
        self.jobs = []

    def submit_static(self, job) -> Future:
        self.jobs.append(job)
        return later(0.05 * max(0, 4 - job.number), record(self.table[job.source]))

    def submit_measured(self, job, static_record):
        raise AssertionError("a static run never measures")

    def close(self) -> None:
        pass


class ScriptedProposer:
    """Children per parent source, handed out in order."""

    name = "scripted"

    def __init__(self, children: dict[str, list[str]]):
        self.children = {k: list(v) for k, v in children.items()}
        self.asked = []

    def propose(self, context):
        self.asked.append((context.step, context.incumbent_source, context.count))
        queue = self.children.get(context.incumbent_source, [])
        taken, self.children[context.incumbent_source] = queue[:context.count], queue[context.count:]
        return [Candidate(source=s, rationale=f"scripted {s.strip()}", title=s.strip("# \n")) for s in taken]

    def observe(self, candidate, outcome) -> None:
        pass


def seed_with_second_parent(rank: int, step: int, count: int, size: int) -> int:
    """A seed for which the second candidate of `step` is drawn from the population member of `rank`."""
    members = [Member(sha=str(i), step=0, candidate=i, merit=-i) for i in range(size)]
    return next(seed for seed in range(1000)
                if Search(BEAM, size, seed).parents(members, step, count)[1] is members[rank - 1])


def make_run(tmp_path, strategy: str, beam: int, candidates: int, steps: int, seed: int) -> tuple[Ledger, RunConfig]:
    config = RunConfig(run_id="beam", target="gfx950", source_file="root.py", proposer="scripted", steps=steps,
                       candidates=candidates, min_gain=0.01, max_spills=0, seed=seed, mode=STATIC,
                       objective=OBJECTIVES[STATIC], strategy=strategy, beam=beam)
    files, message = baseline_commit(config, ROOT, record(0.30))
    return Ledger.create(tmp_path / "runs" / "beam", files, message), config


def kernel(name: str) -> str:
    return f"# {name}\n"


@pytest.fixture()
def beam_run(tmp_path):
    """Beam of 2, two candidates a step, three steps:

    step 1: both children of the root pass (a 0.40, b 0.35): a on main, b on refs/population;
    step 2: a's child d (0.38) loses to a, b's child c (0.50) wins: main jumps to root -> b -> c, a stays in
            the population (its ref moves nowhere; b leaves refs/population, now on main's lineage);
    step 3: c's child e (0.60) wins, the other candidate (g 0.10 from c, or f 0.20 from a) is rejected:
            population {e, c}, both on main's lineage; a retired.
    """
    seed = seed_with_second_parent(rank=2, step=2, count=2, size=2)
    ledger, config = make_run(tmp_path, BEAM, beam=2, candidates=2, steps=3, seed=seed)
    a, b, c, d, e, f, g = (kernel(x) for x in "abcdefg")
    proposer = ScriptedProposer({ROOT: [a, b], a: [d, f], b: [c], c: [e, g]})
    table = {a: 0.40, b: 0.35, c: 0.50, d: 0.38, e: 0.60, f: 0.20, g: 0.10}
    executor = ScriptedExecutor(table)
    out = io.StringIO()
    result = Optimizer(ledger, config, proposer, executor, Budget(), Progress(out, heartbeat=0)).run()
    return ledger, result, out.getvalue().splitlines(), proposer, executor


def labels(ledger: Ledger, shas) -> list[str]:
    by_sha = {e.sha: f"{e.step}.{e.candidate}" for e in ledger.entries()}
    return [by_sha[s] for s in shas]


def test_parents_are_best_first_then_weighted_and_reproducible():
    members = [Member(sha=str(i), step=1, candidate=i, merit=10 - i) for i in range(4)]
    search = Search(BEAM, 4, seed=3)
    picks = search.parents(members, step=5, count=400)
    assert picks[0] is members[0]
    counts = [sum(p is m for p in picks) for m in members]
    assert counts[0] > counts[1] > counts[3] > 0          # exploration reaches the worst member
    assert search.parents(members, 5, 400) == picks       # same seed and step: same parents
    assert Search(BEAM, 4, seed=4).parents(members, 5, 400) != picks


def test_beam_admits_the_passers_that_rank_in_the_population_greedy_only_the_best():
    old = [Member("r", 0, 0, 1.0), Member("a", 1, 1, 3.0)]
    passers = [Member("x", 2, 1, 2.0, score=(2.0,)), Member("y", 2, 2, 0.5, score=(0.5,)),
               Member("z", 2, 3, 4.0, score=(4.0,))]
    assert [m.sha for m in Search(BEAM, 3, 0).admit(old, passers)] == ["x", "z"]
    assert [m.sha for m in Search(GREEDY, 1, 0).admit(old[1:], passers)] == ["z"]
    assert [m.sha for m in ranked(old + passers)] == ["z", "a", "x", "r", "y"]


def test_beam_run_keeps_the_best_lineage_on_main_and_the_rest_on_population_refs(beam_run):
    ledger, result, lines, _, _ = beam_run
    assert result.steps_run == [1, 2, 3]
    entries = {f"{e.step}.{e.candidate}": e for e in ledger.entries()}
    assert {k: e.verdict for k, e in entries.items()} == {
        "0.0": "baseline", "1.1": "accepted", "1.2": "accepted", "2.1": "rejected", "2.2": "accepted",
        "3.1": "accepted", "3.2": "rejected"}
    # main: root -> b (1.2) -> c (2.2) -> e (3.1); a (1.1) was the best kernel when c was proposed from b.
    assert labels(ledger, ledger.first_parent_chain(ledger.resolve(MAIN))) == ["0.0", "1.2", "2.2", "3.1"]
    assert {r: labels(ledger, [s])[0] for r, s in refs(ledger.path).items() if not r.startswith("refs/heads")} == {
        "refs/attempts/2-1": "2.1", "refs/attempts/3-2": "3.2", "refs/retired/1-1": "1.1"}
    assert ledger.refs("refs/retired/") == {"refs/retired/1-1": entries["1.1"].sha}
    assert ledger.refs("refs/population/") == {}  # population {e, c}: both on main's lineage
    step2 = entries["2.2"]
    assert step2.trailers["Parent"] == entries["1.2"].sha
    judged = [line for line in lines if "candidate 2 c: passed" in line and "[step 2/" in line]
    assert judged and judged[0].endswith("; parent: step 1.2]")
    assert "accepted step 2.2; promoted candidate 2 to main" in "\n".join(lines)
    # every commit's parent is the kernel it was proposed from
    assert entries["2.1"].parent == entries["1.1"].sha and entries["3.1"].parent == entries["2.2"].sha
    fsck_clean(ledger.path)
    assert git(ledger.path, "status", "--porcelain") == ""


def test_results_are_committed_in_candidate_order_whatever_order_they_arrive_in(beam_run):
    _, _, lines, _, executor = beam_run
    committed = [line.split("] candidate ")[1].split(" ")[0] for line in lines if "; parent: " in line]
    assert committed == ["1", "2"] * 3
    assert [j.number for j in executor.jobs] == [1, 2] * 3


def test_history_draws_the_search_tree_and_replay_follows_any_lineage(beam_run, capsys):
    ledger = beam_run[0]
    code, out, err = nearpeak(capsys, "history", ledger.path)
    assert code == 0, err
    tree = out.split("search tree of accepted kernels")[1]
    assert "0.0 300.0 TFLOP/s (static est.) *" in tree
    assert "├─ 1.1 400.0 TFLOP/s (static est.) retired/1-1" in tree
    assert "└─ 1.2 350.0 TFLOP/s (static est.) *" in tree and "   └─ 2.2" in tree
    code, out, err = nearpeak(capsys, "replay", ledger.path, "--lineage", "2.1")
    assert code == 0, err
    steps = [line.split()[0] for line in out.splitlines() if re.match(r"\d+\.\d+ ", line)]  # rows, not wrapped reasons
    assert steps == ["0.0", "1.1", "2.1"]
    code, _, err = nearpeak(capsys, "replay", ledger.path, "--lineage", "9.9")
    assert code == 2 and "no step 9.9" in err


def test_resume_admits_a_step_whose_admission_a_kill_interrupted(tmp_path):
    ledger, config = make_run(tmp_path, BEAM, beam=2, candidates=2, steps=1, seed=0)
    a, b = kernel("a"), kernel("b")
    optimizer = Optimizer(ledger, config, ScriptedProposer({ROOT: [a, b]}), ScriptedExecutor({a: 0.4, b: 0.35}),
                          Budget(), QUIET)
    optimizer._finish_step = lambda step: None  # as if killed right after the step's last candidate
    optimizer.run()
    assert set(ledger.refs("refs/attempts/")) == {"refs/attempts/1-1", "refs/attempts/1-2"}
    resumed = Optimizer(ledger, config, ScriptedProposer({}), ScriptedExecutor({}), Budget(), QUIET)
    assert resumed.run().steps_run == []
    assert labels(ledger, ledger.first_parent_chain(ledger.resolve(MAIN))) == ["0.0", "1.1"]
    assert ledger.refs("refs/population/") == {"refs/population/1-2": ledger.off_main()[0].sha}
    assert ledger.attempts() == []


def test_wall_budget_stops_a_step_and_commits_only_what_was_judged(tmp_path):
    ledger, config = make_run(tmp_path, BEAM, beam=2, candidates=3, steps=1, seed=0)
    a, b, c = kernel("a"), kernel("b"), kernel("c")

    class Slow(ScriptedExecutor):
        def submit_static(self, job):
            return later(2.0 * job.number, record(self.table[job.source]))

    optimizer = Optimizer(ledger, config, ScriptedProposer({ROOT: [a, b, c]}), Slow({a: 0.4, b: 0.5, c: 0.6}),
                          Budget(max_wall=2.5), QUIET)
    started = time.monotonic()
    result = optimizer.run()
    assert "wall-clock budget" in result.stop_reason
    assert time.monotonic() - started < 5.9  # candidate 3 (due at 6 s) was not waited for
    numbers = sorted(e.candidate for e in ledger.entries() if e.step == 1)
    assert numbers and numbers == list(range(1, len(numbers) + 1)) and len(numbers) < 3
    fsck_clean(ledger.path)


class MeasuredScript(ScriptedExecutor):
    """Measured mode: each kernel's absolute TFLOP/s and its A/B speedup over its parent come from the table."""

    def submit_measured(self, job, static_record) -> Future:
        tflops, speedup = self.table[job.source]
        measured = {**static_record, "runtime": {"correct": True, "tflops": tflops, "device": "Scripted GPU"}}
        comparison = {"speedup": speedup, "ci_low": speedup * 0.99, "ci_high": speedup * 1.01, "accepted": True,
                      "method": "scripted A/B"}
        return later(0.01, MeasuredResult(measured, comparison, {}))

    def submit_static(self, job) -> Future:
        return later(0.01, record(0.5))


def test_measured_beam_ranks_lineages_by_chained_ab_speedups_not_separate_timings(tmp_path):
    config = RunConfig(run_id="m", target="gfx950", source_file="root.py", proposer="scripted", steps=2, candidates=2,
                       min_gain=0.01, max_spills=0, seed=0, mode=MEASURED, objective=OBJECTIVES[MEASURED],
                       strategy=BEAM, beam=3)
    root = {**record(0.5), "runtime": {"correct": True, "tflops": 500.0}}
    files, message = baseline_commit(config, ROOT, root)
    ledger = Ledger.create(tmp_path / "m", files, message)
    a, b, c = kernel("a"), kernel("b"), kernel("c")
    # a is 1.30x the root in its A/B session but its separate timing reads low; b is 1.20x and reads high.
    table = {a: (600.0, 1.30), b: (700.0, 1.20), c: (650.0, 1.10)}
    proposer = ScriptedProposer({ROOT: [a, b], a: [c], b: [c]})
    Optimizer(ledger, config, proposer, MeasuredScript(table), Budget(), QUIET).run()
    by_label = {f"{e.step}.{e.candidate}": e for e in ledger.entries()}
    assert by_label["1.1"].ref == MAIN or by_label["1.1"].sha in ledger.first_parent_chain(ledger.resolve(MAIN))
    # c (1.10x over a, so 1.43x the root) beats both step-1 kernels: main ends root -> a -> c.
    chain = labels(ledger, ledger.first_parent_chain(ledger.resolve(MAIN)))
    assert chain[:2] == ["0.0", "1.1"] and len(chain) == 3 and by_label[chain[2]].parent == by_label["1.1"].sha
    assert ledger.refs("refs/population/") == {"refs/population/1-2": by_label["1.2"].sha}
