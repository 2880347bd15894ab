"""The loop's decisions against a fake evaluator (tests/loop_support.py): no compiles, a real git ledger.

The end-to-end tests (test_agent_*.py) cover the same paths through real compiles and sandboxes.
"""
from __future__ import annotations

import json

import pytest
from loop_support import BASE, FakeEvaluator, ScriptedProposer, make_run, optimize

from agent.evaluation import MEASURED
from agent.ledger import MAIN, attempt_ref
from agent.loop import KERNEL, STEP, Budget
from agent.proposers import FailedProposal


def step_data(ledger, ref) -> dict:
    return json.loads(ledger.read(ledger.resolve(ref), STEP))


def main_sources(ledger) -> list[str]:
    return [ledger.read(e.sha, KERNEL).decode() for e in ledger.main_line()]


def test_static_mode_accepts_a_better_estimate_and_keeps_a_worse_one_as_an_attempt(tmp_path):
    ledger, config = make_run(tmp_path, steps=2)
    result, _, log = optimize(ledger, config, ScriptedProposer(["EFF = 0.5\n"], ["EFF = 0.4\n"]))
    assert result.stop_reason == "all 2 steps done" and result.steps_run == [1, 2]
    assert main_sources(ledger) == [BASE, "EFF = 0.5\n"]
    rejected = step_data(ledger, attempt_ref(2, 1))
    assert rejected["verdict"] == "rejected" and not rejected["screened_out"]
    assert rejected["reason"].startswith("estimated 400.0 TFLOP/s not above incumbent 500.0")
    assert "static estimate" in rejected["reason"]
    assert "candidate 1 idea 1: passed" in log and "promoted candidate 1 to main" in log
    assert "candidate 1 idea 1: rejected" in log and "; parent: step 1.1]" in log


def test_the_static_objective_travels_as_a_trailer_into_the_history_the_proposer_reads(tmp_path):
    ledger, config = make_run(tmp_path, steps=2)
    proposer = ScriptedProposer(["EFF = 0.5\n"], ["EFF = 0.4\n"])
    optimize(ledger, config, proposer)
    assert [e.trailers.get("TFLOPS-Estimate") for e in ledger.main_line()] == ["300", "500"]
    assert ledger.main_line()[-1].trailers["TFLOPS-Measured"] == "n/a (no GPU run)"
    seen = {(a.step, a.candidate): a.headline for a in proposer.contexts[1].history}
    assert seen[(1, 1)].startswith("500 TFLOPS static est., eff 0.5 static est.")


def test_the_best_of_several_passing_candidates_is_promoted(tmp_path):
    ledger, config = make_run(tmp_path, steps=1, candidates=3)
    proposer = ScriptedProposer(["EFF = 0.6\n", "EFF = 0.8\n", "EFF = 0.7\n"])
    optimize(ledger, config, proposer)
    assert main_sources(ledger)[-1] == "EFF = 0.8\n"
    promoted = step_data(ledger, MAIN)
    assert promoted["candidate"] == 2 and promoted["reason"].startswith("best of 3 passing candidate(s)")
    assert ledger.resolve(attempt_ref(1, 2)) is None  # moved to main in the same transaction
    assert {step_data(ledger, attempt_ref(1, n))["verdict"] for n in (1, 3)} == {"passed"}
    assert proposer.outcomes == [("idea 1", "passed"), ("idea 2", "passed"), ("idea 3", "passed")]


def test_the_best_passer_is_promoted_whatever_its_place_in_the_step(tmp_path):
    ledger, config = make_run(tmp_path, steps=1, candidates=2)
    optimize(ledger, config, ScriptedProposer(["EFF = 0.6\n", "EFF = 0.9\n"]))
    assert step_data(ledger, MAIN)["candidate"] == 2
    assert step_data(ledger, MAIN)["reason"].startswith("best of 2 passing candidate(s): estimated 900.0 TFLOP/s > "
                                                        "incumbent 300.0")


@pytest.mark.parametrize("kernel, reason", [
    ('STATUS = "compile_error"\nMESSAGE = "bad layout"\n', "compile_error: bad layout"),
    ("EFF = 0.9\nSPILLS = 3\n", "3 spill instructions in the hot loop (budget 0)"),
    ("CRASH = True\n", "evaluator_error: RuntimeError: the evaluator itself broke"),
    ("EFF = 0.9\nSHARED = 300000\n", ("does not fit on gfx950: 300000 bytes of shared memory/LDS per CTA, above the "
                                    "limit of 163840; it would fail at launch")),
])
def test_the_screen_rejects_without_runtime_work(tmp_path, kernel, reason):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=1)
    _, evaluator, _ = optimize(ledger, config, ScriptedProposer([kernel]))
    rejected = step_data(ledger, attempt_ref(1, 1))
    assert rejected["verdict"] == "rejected" and rejected["screened_out"] and rejected["reason"] == reason
    assert [run for source, run in evaluator.records if source == kernel] == [False]  # never run on the GPU
    assert evaluator.compares == []


def test_measured_mode_accepts_on_the_interval_and_records_the_comparison(tmp_path):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=2)
    _, evaluator, _ = optimize(ledger, config, ScriptedProposer(["EFF = 0.3\nSPEEDUP = 1.25\n"],
                                                                ["EFF = 0.9\nSPEEDUP = 1.255\n"]))
    accepted = step_data(ledger, MAIN)
    assert accepted["step"] == 1 and accepted["comparison"]["speedup"] == pytest.approx(1.25)
    # Step 2 is judged against the new incumbent (1.255 / 1.25 is inside the noise), whatever its estimate.
    assert evaluator.compares[-1][1] == "EFF = 0.3\nSPEEDUP = 1.25\n"
    assert "does not clear 1 + 0.01" in step_data(ledger, attempt_ref(2, 1))["reason"]
    trailers = ledger.main_line()[-1].trailers
    assert trailers["Speedup-Measured"].startswith("1.2500 (95% CI 1.2375-1.2625")


def test_measured_mode_rejects_incorrect_results_without_an_interleaved_comparison(tmp_path):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=1)
    _, evaluator, _ = optimize(ledger, config, ScriptedProposer(["EFF = 0.9\nSPEEDUP = 2.0\nCORRECT = False\n"]))
    rejected = step_data(ledger, attempt_ref(1, 1))
    assert rejected["screened_out"] and rejected["reason"].startswith("incorrect results (measured)")
    assert evaluator.compares == []


def test_a_broken_comparison_rejects_the_candidate_and_the_run_goes_on(tmp_path):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=2)
    result, _, _ = optimize(ledger, config, ScriptedProposer(["SPEEDUP = 0\n"], ["SPEEDUP = 1.5\n"]))
    assert step_data(ledger, attempt_ref(1, 1))["reason"].startswith("measured evaluation failed: RuntimeError")
    assert main_sources(ledger)[-1] == "SPEEDUP = 1.5\n" and result.steps_run == [1, 2]


def test_a_duplicate_is_committed_but_not_evaluated_again(tmp_path):
    ledger, config = make_run(tmp_path, steps=2)
    _, evaluator, _ = optimize(ledger, config, ScriptedProposer(["EFF = 0.2\n"], ["EFF = 0.2\n"]))
    assert [source for source, _ in evaluator.records].count("EFF = 0.2\n") == 1
    assert step_data(ledger, attempt_ref(2, 1))["reason"] == "duplicate of step 1.1: the same source; not re-evaluated"


def test_a_failed_proposal_is_recorded_with_the_incumbent_kernel(tmp_path):
    ledger, config = make_run(tmp_path, steps=1)
    optimize(ledger, config, ScriptedProposer([FailedProposal("no applicable edit after 4 tries")]))
    entry = ledger.attempts()[0]
    assert entry.verdict == "proposal-failed" and ledger.read(entry.sha, KERNEL).decode() == BASE
    assert entry.trailers["Reason"] == "no applicable edit after 4 tries"


def test_a_proposer_with_nothing_left_stops_the_run(tmp_path):
    ledger, config = make_run(tmp_path, steps=3)
    result, _, _ = optimize(ledger, config, ScriptedProposer(["EFF = 0.5\n"]))
    assert result.steps_run == [1]
    assert result.stop_reason == "the scripted proposer has nothing left to propose"


def test_a_zero_wall_budget_stops_before_any_candidate(tmp_path):
    ledger, config = make_run(tmp_path, steps=2)
    proposer = ScriptedProposer(["EFF = 0.5\n"])
    result, evaluator, _ = optimize(ledger, config, proposer, budget=Budget(max_wall=0))
    assert result.stop_reason == "wall-clock budget of 0 s reached"
    assert evaluator.records == [] and proposer.contexts == [] and len(ledger.entries()) == 1


def test_resume_after_an_interrupt_judges_what_was_already_proposed(tmp_path):
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=1, candidates=3)
    # Ctrl-C during candidate 2's comparison: candidate 1 is judged, 2 and 3 are committed proposals.
    proposals = ["SPEEDUP = 1.5\n", "SPEEDUP = 1.8\nINTERRUPT = True\n", "SPEEDUP = 1.2\n"]
    with pytest.raises(KeyboardInterrupt):
        optimize(ledger, config, ScriptedProposer(proposals), FakeEvaluator(interrupt=True))
    assert [(e.candidate, e.verdict) for e in ledger.entries() if e.step == 1] == [(1, "passed")]
    resumed = ScriptedProposer(["SPEEDUP = 9.0\n"])
    result, _, _ = optimize(ledger, config, resumed)
    assert resumed.contexts == []  # nothing new is asked for: the step's proposals are all in the ledger
    assert result.steps_run == [1]
    assert [(e.candidate, e.verdict) for e in ledger.entries() if e.step == 1] == \
        [(1, "passed"), (2, "accepted"), (3, "passed")]
    assert main_sources(ledger)[-1] == proposals[1]


def test_the_proposer_sees_what_was_tried(tmp_path):
    ledger, config = make_run(tmp_path, steps=2)
    proposer = ScriptedProposer(["EFF = 0.1\n"], ["EFF = 0.5\n"])
    optimize(ledger, config, proposer)
    second = proposer.contexts[1]
    assert second.step == 2 and second.incumbent_source == BASE
    assert second.last_source == "EFF = 0.1\n" and [a.verdict for a in second.history] == ["rejected"]
    assert len(second.tried) == 2
