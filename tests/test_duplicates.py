"""No duplicate evaluation: candidates whose compiled kernels equal an earlier evaluation of the run (the start
kernel included) or a sibling's share that evaluation: rejected as duplicates before any GPU time, marked so in
the ledger and in `history`.

The first test is the loop's logic on a fake evaluator in measured mode (the fake kernel states what it compiles
to); the second is end to end with real gfx950 compiles, three LLM replies over real HTTP (tests/fakellm.py)
that differ in text but compile to the start kernel's own kernel."""
import json

import pytest
from agent_support import V00, json_at, nearpeak, need, trailers_at
from fakellm import FakeLLM, Reply, plan_text
from loop_support import FakeEvaluator, ScriptedProposer, make_run, optimize

from agent.evaluation import MEASURED
from agent.ledger import Ledger, attempt_ref


def step_data(ledger, ref):
    return json.loads(ledger.read(ledger.resolve(ref), "step.json"))


def test_compiled_twins_share_one_evaluation_and_none_gets_gpu_time_twice(tmp_path):
    base = 'COMPILED = "start"\nEFF = 0.30\n'
    ledger, config = make_run(tmp_path, mode=MEASURED, steps=1, candidates=4, base=base)
    script = ['COMPILED = "start"\nEFF = 0.30\n# reworded docstring\n',
              'COMPILED = "start"\n\nEFF = 0.30\n',
              'COMPILED = "new"\nEFF = 0.40\nSPEEDUP = 1.3\n',
              'COMPILED = "new"\nEFF = 0.40\nSPEEDUP = 1.3\n# the same change, other words\n']
    evaluator = FakeEvaluator()
    result, evaluator, log = optimize(ledger, config, ScriptedProposer(script), evaluator)
    assert result.steps_run == [1]
    # Four static screens (they are what finds the twins), one GPU evaluation and one comparison.
    assert len([r for r in evaluator.records if r[1] is False]) == 4
    assert [source for source, run in evaluator.records if run] == [script[2]]
    assert [candidate for candidate, _ in evaluator.compares] == [script[2]]
    marks = {n: step_data(ledger, attempt_ref(1, n)).get("duplicate_of") for n in (1, 2, 4)}
    assert marks == {1: "0.0", 2: "0.0", 4: "1.3"}
    assert "duplicate of step 0.0 (the start kernel): the same compiled kernels" in \
        step_data(ledger, attempt_ref(1, 1))["reason"]
    assert step_data(ledger, attempt_ref(1, 4))["verdict"] == "rejected"
    accepted = [e for e in ledger.entries() if e.verdict == "accepted"]
    assert [(e.step, e.candidate) for e in accepted] == [(1, 3)]


def _twins(source: str) -> list[str]:
    """Three rewrites of the start kernel that the compiler cannot tell from it."""
    docstring = source.replace('"""v00 naive:', '"""v00 naive (as rewritten by a model):', 1)
    comment = source.replace("    pid = gl.program_id(0)\n", "    # one program per output tile\n\n    pid = gl.program_id(0)\n", 1)
    renamed = source.replace("pid = gl.program_id(0)", "tile = gl.program_id(0)", 1).replace(
        "pid // num_pid_n", "tile // num_pid_n").replace("pid % num_pid_n", "tile % num_pid_n")
    twins = [docstring, comment, renamed]
    assert len(set(twins + [source])) == 4
    return twins


@pytest.mark.slow
def test_three_text_twins_of_the_start_kernel_are_all_marked_duplicates(capsys, tmp_path):
    start = tmp_path / "v00.py"
    start.write_text(need(V00).read_text())
    titles = ("Reword the docstring", "Comment the tile mapping", "Rename pid")
    replies = [Reply(plan_text(*titles))] + [Reply(f"{t}.\n```python\n{twin}```\n")
                                             for t, twin in zip(titles, _twins(start.read_text()))]
    with FakeLLM(replies) as server:
        code, out, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "llm",
                                  "--base-url", server.base_url, "--runs-dir", tmp_path, "--run-id", "twins",
                                  "--steps", "1", "--candidates", "3")
        asked = len(server.requests)
    assert code == 0 and asked == 4, err
    run = tmp_path / "twins"
    step1 = [e for e in Ledger(run).entries() if e.step == 1]
    assert len(step1) == 3
    for entry in step1:
        assert entry.trailers["Verdict"] == "rejected" and entry.trailers["Duplicate-Of"] == "0.0"
        assert "the same compiled kernels" in entry.trailers["Reason"]
        assert json_at(run, entry.sha, "step.json")["proposal"]["edit_format"] == "whole-file"
    root = Ledger(run).main_line()[0]
    assert {e.trailers["Compiled-Sha256"] for e in step1} == {root.trailers["Compiled-Sha256"]}
    assert len({e.trailers["Kernel-Sha256"] for e in step1 + [root]}) == 4   # four different texts
    code, out, _ = nearpeak(capsys, "history", run, "--json")
    rows = [r for r in json.loads(out)["entries"] if r["step"] == 1]
    assert [r["duplicate_of"] for r in rows] == ["0.0"] * 3 and all(r["idea"] for r in rows)
    code, out, _ = nearpeak(capsys, "history", run)
    header = next(line for line in out.splitlines() if line.startswith("step"))
    assert "dup of" in header
    assert sum(1 for line in out.splitlines() if line.startswith("1.") and " 0.0 " in line.split("rejected", 1)[1]) == 3
    assert trailers_at(run, "refs/heads/main")["Step"] == "0"
