"""The run owns the problem: shapes, weights and timing fixed at creation, never taken from a candidate.

Unit tests of the typed request (evaluator.request), then real compiles: the static stage at a problem's
shapes, and runs on real git ledgers where candidates try to move the problem by editing their own SHAPES
or SHAPE_MULTIPLE (the adversarial cases of issue 25).
"""
from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from loop_support import ScriptedProposer

from agent.cli import main
from agent.evaluation import Evaluator, shape_class_note
from agent.executors.inline import InlineExecutor
from agent.ledger import Ledger
from agent.loop import RUN, Budget, Optimizer
from agent.progress import Progress
from agent.runs import NewRun, create_run
from evaluator.errors import UsageError
from evaluator.request import EvalRequest, ObjectiveShape, Problem, parse_shape, weighted_geomean
from evaluator.stages import evaluate_static

ROOT = Path(__file__).resolve().parent.parent
V00 = ROOT / "kernels" / "gfx950" / "fp16" / "v00_naive.py"


# -- the typed request ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("text", "expected"), [
    ("16,4096,14336", ((16, 4096, 14336), 1.0)),
    ("16x4096x14336:3", ((16, 4096, 14336), 3.0)),
    (" 128,8192,8192:0.5 ", ((128, 8192, 8192), 0.5)),
])
def test_shapes_parse_with_optional_weights(text, expected):
    assert parse_shape(text) == expected


@pytest.mark.parametrize("text", ["16,4096", "a,b,c", "0,4096,4096", "16,4096,4096:-1", "16,4096,4096:x"])
def test_malformed_shapes_are_usage_errors(text):
    with pytest.raises(UsageError, match="--shape"):
        parse_shape(text)


def test_problem_round_trips_and_describes_itself():
    problem = Problem.of([((16, 4096, 14336), 3.0), ((4096, 4096, 4096), 1.0)], [(1000, 1000, 1000)], "graph")
    assert Problem.from_dict(json.loads(json.dumps(problem.to_dict()))) == problem
    assert problem.shapes == ((16, 4096, 14336), (4096, 4096, 4096), (1000, 1000, 1000))
    assert "16x4096x14336:3" in problem.describe() and "graph timing" in problem.describe()
    with pytest.raises(UsageError):
        Problem.of([((16, 16, 16), 1.0)], timing="wall")


def test_request_round_trips_through_json():
    request = EvalRequest(target="sm90", problem=Problem.of([((64, 128, 256), 2.0)]), knobs={"BLOCK_M": 64},
                          run=False, seed=7, min_gain=0.02, ab_rounds=6)
    assert EvalRequest.from_dict(json.loads(json.dumps(request.to_dict()))) == request
    assert request.shapes_for((1, 2, 3)) == (ObjectiveShape((64, 128, 256), 2.0),)
    assert EvalRequest(shape=(8, 8, 8)).shapes_for((1, 2, 3)) == (ObjectiveShape((8, 8, 8)),)
    assert EvalRequest().shapes_for((1, 2, 3)) == (ObjectiveShape((1, 2, 3)),)


def test_weighted_geomean_weights_each_shape():
    assert weighted_geomean([100.0, 400.0], [1.0, 1.0]) == pytest.approx(200.0)
    assert weighted_geomean([100.0, 400.0], [3.0, 1.0]) == pytest.approx(math.exp((3 * math.log(100)
                                                                                     + math.log(400)) / 4))


def test_shape_class_note_names_a_narrowing():
    narrowed = shape_class_note({"spec": {"shape_multiple": [256, 256, 64]}}, {"spec": {"shape_multiple": [1, 1, 1]}})
    assert narrowed and "narrows SHAPE_MULTIPLE (1, 1, 1) -> (256, 256, 64)" in narrowed
    assert shape_class_note({"spec": {"shape_multiple": [1, 1, 1]}}, {"spec": {"shape_multiple": [1, 1, 1]}}) is None


# -- the static stage at the problem's shapes (real compiles) -------------------------------------------------


def test_static_stage_estimates_every_objective_shape_and_their_weighted_mean():
    problem = Problem.of([((4096, 4096, 8192), 1.0), ((1024, 1024, 1024), 3.0)])
    record = evaluate_static(V00, EvalRequest(problem=problem))
    assert record["status"] == "ok", record["message"]
    objective = record["objective"]
    assert objective["shapes"] == [[4096, 4096, 8192], [1024, 1024, 1024]] and objective["weights"] == [1.0, 3.0]
    big, small = objective["estimated_tflops"]
    assert big == record["static"]["estimated_tflops"] and small != big
    assert objective["geomean_estimated_tflops"] == pytest.approx(weighted_geomean([big, small], [1, 3]), abs=0.06)
    assert record["shape"] == [4096, 4096, 8192] and len(objective["extra_static"]) == 1


def test_static_stage_refuses_a_kernel_that_cannot_run_the_problem(tmp_path):
    narrowed = tmp_path / "narrowed.py"
    narrowed.write_text(_narrow(V00.read_text(), "(256, 256, 64)", "[(4096, 4096, 8192)]"))
    record = evaluate_static(narrowed, EvalRequest(problem=Problem.of([((1000, 1000, 1000), 1.0)])))
    assert record["status"] == "unsupported_shape"
    assert "1000x1000x1000" in record["message"] and "(256, 256, 64)" in record["message"]


# -- runs whose candidates try to move the problem (real compiles, real ledgers) --------------------------------


def _run(tmp_path, candidates: list[str], shapes=()) -> tuple[Ledger, list[dict], str]:
    say = Progress(io.StringIO(), heartbeat=0)
    ledger, config = create_run(NewRun(runs_dir=tmp_path / "runs", from_file=str(V00), proposer="ladder",
                                       run_id="problem", steps=len(candidates), shapes=tuple(shapes)), say)
    try:
        proposer = ScriptedProposer(*[[c] for c in candidates])
        evaluator = Evaluator(config.target, config.seed, 120.0, config.run_problem())
        out = io.StringIO()
        Optimizer(ledger, config, proposer, InlineExecutor(evaluator), Budget(), Progress(out, heartbeat=0)).run()
    finally:
        ledger.unlock()
    steps = [json.loads(ledger.read(e.sha, "step.json")) for e in ledger.entries() if e.step > 0]
    return ledger, steps, out.getvalue()


def _narrow(source: str, multiple: str, shapes: str) -> str:
    """v00 with its SHAPE_MULTIPLE narrowed and its own SHAPES made to fit it (a self-consistent contract)."""
    return (source.replace("SHAPE_MULTIPLE = (1, 1, 1)", f"SHAPE_MULTIPLE = {multiple}")
            .replace("SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (1000, 1000, 1000)]", f"SHAPES = {shapes}"))


def _reorder_shapes(source: str) -> str:
    return source.replace("SHAPES = [(4096, 4096, 8192), (2048, 2048, 2048), (1000, 1000, 1000)]",
                          "SHAPES = [(2048, 2048, 2048), (1000, 1000, 1000), (4096, 4096, 8192)]")


@pytest.mark.slow
def test_candidates_that_only_rewrite_shapes_are_never_accepted(tmp_path):
    source = V00.read_text()
    reordered = _reorder_shapes(source)
    assert reordered != source
    tiny_first = source.replace("SHAPES = [(4096, 4096, 8192),", "SHAPES = [(256, 256, 64), (4096, 4096, 8192),")
    narrowed = _narrow(source, "(8192, 8192, 8192)", "[(8192, 8192, 8192)]")
    ledger, steps, _ = _run(tmp_path, [reordered, tiny_first, narrowed])
    run = json.loads(ledger.read(ledger.main_line()[0].sha, RUN))
    assert run["problem"]["objective"] == [{"shape": [4096, 4096, 8192], "weight": 1.0}]
    verdicts = {s["step"]: (s["verdict"], s["reason"]) for s in steps}
    assert [verdicts[n][0] for n in (1, 2, 3)] == ["rejected"] * 3, verdicts
    assert "cannot run the requested shape(s) 4096x4096x8192" in verdicts[3][1]
    for step in (1, 2):  # judged at the run's shape: the same kernel estimates the same
        assert "not above" in verdicts[step][1] or "duplicate" in verdicts[step][1], verdicts[step]


@pytest.mark.slow
def test_a_run_at_the_callers_shape_judges_every_candidate_there(tmp_path):
    narrowed = _narrow(V00.read_text(), "(256, 256, 64)", "[(4096, 4096, 8192)]")
    ledger, steps, _ = _run(tmp_path, [narrowed], shapes=[((1000, 1000, 1000), 1.0)])
    run = json.loads(ledger.read(ledger.main_line()[0].sha, RUN))
    assert run["problem"]["objective"] == [{"shape": [1000, 1000, 1000], "weight": 1.0}]
    [step] = steps
    assert step["verdict"] == "rejected" and "1000x1000x1000" in step["reason"]


@pytest.mark.slow
def test_cli_run_takes_weighted_shapes_and_names_them(tmp_path, capsys):
    code = main(["run", "--from", str(V00), "--runs-dir", str(tmp_path), "--run-id", "shaped", "--steps", "1",
                 "--shape", "4096,4096,8192:2", "--shape", "2048,2048,2048", "--json"])
    assert code == 0
    out = json.loads(capsys.readouterr().out)
    assert out["run"]["problem"]["objective"] == [{"shape": [4096, 4096, 8192], "weight": 2.0},
                                                  {"shape": [2048, 2048, 2048], "weight": 1.0}]
    ledger = Ledger(tmp_path / "shaped")
    for entry in ledger.entries():  # every commit names the run's problem
        assert entry.trailers["Problem"].startswith("weighted geometric mean over 4096x4096x8192:2, 2048x2048x2048")


def test_cli_run_refuses_a_malformed_shape(tmp_path, capsys):
    assert main(["run", "--from", str(V00), "--runs-dir", str(tmp_path), "--shape", "16,4096"]) == 2
    assert "--shape" in capsys.readouterr().err


class _AAEvaluator:
    """An evaluator whose A/A gives a fixed interval (the GPU's part of the self-check)."""

    def __init__(self, speedup, low, high):
        self.result = {"speedup": speedup, "ci_low": low, "ci_high": high, "method": "fake A/A"}
        self.calls = []

    def self_compare(self, kernel, copy, rounds, calls):
        self.calls.append((kernel.read_text() == copy.read_text(), rounds, calls))
        return self.result


def test_a_self_check_that_excludes_one_widens_the_margin(tmp_path):
    from agent.runs import self_check

    start = tmp_path / "kernel.py"
    start.write_text(V00.read_text())
    out = io.StringIO()
    fair = self_check(_AAEvaluator(1.001, 0.995, 1.007), start, 0.01, Progress(out, heartbeat=0))
    assert fair["covers_one"] and fair["min_gain"] == 0.01
    biased_evaluator = _AAEvaluator(0.95, 0.94, 0.96)
    biased = self_check(biased_evaluator, start, 0.01, Progress(out, heartbeat=0))
    assert biased_evaluator.calls == [(True, 10, 5)]  # a byte-identical copy, the short A/A
    assert not biased["covers_one"] and biased["min_gain"] == pytest.approx(0.06)  # |0.95-1| + half the width
    assert "widened" in out.getvalue()
