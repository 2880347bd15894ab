"""The llm proposer end to end: `nearpeak run` with the real openai client over real HTTP against the
scripted local server (tests/fakellm.py), compiling every candidate.

Each scenario starts from the gfx950 v00 stage and checks the exit code and what the ledger holds
afterwards: which refs exist, the trailers of their commits, the prompt/reply files and the per-try record
in step.json. The client and proposer alone are tested without compiles in test_agent_llm_client.py.
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import triton
from agent_support import (
    REPO,
    V00,
    V03,
    file_at,
    fsck_clean,
    git,
    json_at,
    knob_edit,
    knobs_line,
    nearpeak,
    need,
    refs,
    trailers_at,
)
from fakellm import FakeLLM, Raw, Reply, Stall, Status, plan_text

from agent.ledger import Ledger
from agent.proposers.llm import request_seed

pytestmark = pytest.mark.slow

pytestmark = pytest.mark.slow  # end to end: real compiles, sandboxed evaluations and a git ledger


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    path = tmp_path_factory.mktemp("start") / "v00.py"
    path.write_text(need(V00).read_text())
    return path


def run_llm(capsys, start, tmp_path, script, *extra, run_id="llm"):
    with FakeLLM(script) as server:
        code, out, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "llm",
                                  "--base-url", server.base_url, "--model", "fake-model", "--runs-dir", tmp_path,
                                  "--run-id", run_id, "--retry-backoff", "0.05", *extra)
    return code, out, err, server.requests, tmp_path / run_id


def exchanges(run, ref):
    return [e["outcome"] for e in json_at(run, ref, "step.json")["proposal"]["exchanges"]]


def test_good_edits_are_committed_with_prompt_reply_and_token_trailers(capsys, start, tmp_path):
    source = start.read_text()
    whole = "Move operands straight into LDS with async copies.\n```python\n" + need(V03).read_text() + "```\n"
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, [Reply(knob_edit(source)), Reply(whole)],
                                            "--steps", "2")
    assert code == 0, err
    assert set(refs(run)) == {"refs/heads/main", "refs/attempts/1-1"}
    # Step 1 (BLOCK_K 32) scores lower on the static estimate than v00: kept as a rejected attempt.
    t1 = trailers_at(run, "refs/attempts/1-1")
    assert t1["Verdict"] == "rejected" and t1["Proposer"] == "llm" and t1["Step"] == "1"
    assert t1["Tokens"] == "150" and t1["LLM-Tries"] == "1"
    assert t1["TFLOPS-Measured"].startswith("n/a") and t1["Device"].startswith("none")
    assert "static estimate" in t1["Reason"]
    assert '"BLOCK_K": 32' in knobs_line(file_at(run, "refs/attempts/1-1", "kernel.py"))
    assert file_at(run, "refs/attempts/1-1", "reply.md") == knob_edit(source)
    assert "fake-model" not in file_at(run, "refs/attempts/1-1", "prompt.md")  # the prompt, not the settings
    # Step 2 (whole file, v02) is accepted onto main; its prompt carried step 1's verdict.
    t2 = trailers_at(run, "refs/heads/main")
    assert t2["Verdict"] == "accepted" and t2["Step"] == "2" and float(t2["Efficiency-Estimate"]) > 0
    assert json_at(run, "refs/heads/main", "step.json")["proposal"]["edit_format"] == "whole-file"
    assert "step 1.1: rejected" in requests[1]["messages"][-1]["content"]
    prompt = requests[0]["messages"][-1]["content"]
    assert "## Its hot loop" in prompt and "## Matrix instructions of this kernel (float16 on gfx950)" in prompt
    assert requests[0]["model"] == "fake-model" and requests[0]["seed"] == request_seed(0, 1, 1)
    fsck_clean(run)


def test_malformed_reply_is_answered_with_the_error_and_retried(capsys, start, tmp_path):
    script = [Reply("I would make the tiles larger."), Reply(knob_edit(start.read_text()))]
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, script, "--steps", "1")
    assert code == 0, err
    assert exchanges(run, "refs/attempts/1-1") == ["bad_edit", "ok"]
    assert trailers_at(run, "refs/attempts/1-1")["LLM-Tries"] == "2"
    assert trailers_at(run, "refs/attempts/1-1")["Tokens"] == "300"
    feedback = requests[1]["messages"][-1]["content"]
    assert "no edit found" in feedback and requests[1]["messages"][-2]["content"] == "I would make the tiles larger."
    assert "no edit found" in file_at(run, "refs/attempts/1-1", "prompt.md")


def test_edit_that_does_not_apply_names_the_block_and_closest_line(capsys, start, tmp_path):
    good = knob_edit(start.read_text())
    wrong = good.replace('"BLOCK_K": 64', '"BLOCK_K": 128', 1)  # the SEARCH part misquotes the kernel
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, [Reply(wrong), Reply(good)], "--steps", "1")
    assert code == 0, err
    assert exchanges(run, "refs/attempts/1-1") == ["bad_edit", "ok"]
    feedback = requests[1]["messages"][-1]["content"]
    line = start.read_text().splitlines().index(knobs_line(start.read_text()).rstrip("\n")) + 1
    assert "block 1: the SEARCH part does not match" in feedback
    assert f"closest to kernel line {line}:" in feedback and "Did you mean these lines" in feedback


def test_rate_limit_then_success_waits_and_records_the_429(capsys, start, tmp_path):
    script = [Status(429, {"Retry-After": "0"}), Reply(knob_edit(start.read_text()))]
    code, _, err, _, run = run_llm(capsys, start, tmp_path, script, "--steps", "1")
    assert code == 0, err
    record = json_at(run, "refs/attempts/1-1", "step.json")["proposal"]["exchanges"]
    assert [e["outcome"] for e in record] == ["http_429", "ok"] and record[0]["wait_s"] == 0.0
    assert trailers_at(run, "refs/attempts/1-1")["Verdict"] == "rejected"


def test_server_errors_exhaust_the_retries_and_the_loop_goes_on(capsys, start, tmp_path):
    script = [Status(500), Status(500), Status(500), Reply(knob_edit(start.read_text()))]
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, script, "--steps", "2", "--retries", "2")
    assert code == 0, err
    assert len(requests) == 4
    failed = trailers_at(run, "refs/attempts/1-1")
    assert failed["Verdict"] == "proposal-failed" and "http_500" in failed["Reason"]
    assert exchanges(run, "refs/attempts/1-1") == ["http_500"] * 3
    assert file_at(run, "refs/attempts/1-1", "kernel.py") == start.read_text()  # the incumbent, unchanged
    assert json_at(run, "refs/attempts/1-1", "evaluation.json")["status"] == "no_candidate"
    assert trailers_at(run, "refs/attempts/2-1")["Verdict"] == "rejected"   # step 2 still ran
    assert "proposal-failed" in err


def test_slow_reply_past_the_timeout_is_retried(capsys, start, tmp_path):
    good = knob_edit(start.read_text())
    script = [Reply(good, delay=3.0), Reply(good)]
    code, _, err, _, run = run_llm(capsys, start, tmp_path, script, "--steps", "1", "--request-timeout", "0.5")
    assert code == 0, err
    assert exchanges(run, "refs/attempts/1-1") == ["timeout", "ok"]


def test_token_budget_stops_the_run_cleanly(capsys, start, tmp_path):
    good = knob_edit(start.read_text())
    code, out, err, _, run = run_llm(capsys, start, tmp_path, [Reply(good), Reply(good), Reply(good)],
                                     "--steps", "3", "--max-tokens", "200", "--json")
    assert code == 0, err
    result = json.loads(out)
    assert result["stop_reason"].startswith("token budget of 200 reached")
    assert result["steps_run"] == [1, 2]
    # Step 2 proposed the same kernel again: recorded as a duplicate, not re-evaluated.
    assert "duplicate of step 1.1" in trailers_at(run, "refs/attempts/2-1")["Reason"]


def test_best_passing_candidate_of_a_step_is_promoted_to_main(capsys, start, tmp_path):
    whole = "Async copies into LDS.\n```python\n" + need(V03).read_text() + "```\n"
    run = tmp_path / "llm"
    # The whole file arrives first: the knob edit is held until the loop has committed it as candidate 1.

    def committed() -> bool:
        return run.is_dir() and len(Ledger(run).proposals()) >= 1

    script = [Reply(plan_text("Async copies", "Halve BLOCK_K")), Reply(whole),
              Reply(knob_edit(start.read_text()), gate=committed)]
    code, _, err, _, run = run_llm(capsys, start, tmp_path, script, "--steps", "1", "--candidates", "2")
    assert code == 0, err
    # Candidate 1 passed but was not the last of its step: kept on its attempt ref until the step ended,
    # then promoted to main (and its attempt ref deleted in the same transaction); candidate 2 was rejected.
    assert set(refs(run)) == {"refs/heads/main", "refs/attempts/1-2"}
    step = json_at(run, "refs/heads/main", "step.json")
    assert step["verdict"] == "accepted" and step["candidate"] == 1
    assert step["reason"].startswith("best of 1 passing candidate(s)")
    assert trailers_at(run, "refs/heads/main")["Candidate"] == "1"
    assert trailers_at(run, "refs/attempts/1-2")["Verdict"] == "rejected"
    assert "promoted candidate 1 to main" in err
    fsck_clean(run)


def knob_change(source: str, key: str, old: int, new: int, why: str) -> str:
    line = knobs_line(source)
    assert f'"{key}": {old}' in line
    return (f"{why}\n\n<<<<<<< SEARCH\n" + line + "=======\n" + line.replace(f'"{key}": {old}', f'"{key}": {new}')
            + ">>>>>>> REPLACE\n")


def only_baseline(run) -> None:
    assert set(refs(run)) == {"refs/heads/main"}
    assert [e.step for e in Ledger(run).main_line()] == [0]
    fsck_clean(run)


@pytest.mark.parametrize("status, words", [(401, "refused the credentials"), (404, "does not know the model")])
def test_refused_credentials_or_unknown_model_stop_at_once_with_exit_4(capsys, start, tmp_path, status, words):
    code, out, err, requests, run = run_llm(capsys, start, tmp_path, [Status(status, message="nope")],
                                            "--steps", "3", "--json")
    assert code == 4, err
    assert len(requests) == 1 and words in err and "Traceback" not in err
    assert json.loads(out)["exit_code"] == 4
    only_baseline(run)


def test_an_endpoint_that_never_answers_stops_with_exit_5_and_the_ledger_intact(capsys, start, tmp_path):
    code, out, err, requests, run = run_llm(capsys, start, tmp_path, [], "--steps", "6", "--retries", "1",
                                            "--max-idle-steps", "2")
    assert code == 5, err
    assert "endpoint unavailable: no usable reply" in err and "in 2 consecutive step(s)" in out
    assert len(requests) == 4   # two steps of one try and one retry each, then the stop
    assert set(refs(run)) == {"refs/heads/main", "refs/attempts/1-1", "refs/attempts/2-1"}
    for ref in ("refs/attempts/1-1", "refs/attempts/2-1"):
        assert trailers_at(run, ref)["Verdict"] == "proposal-failed"
        assert trailers_at(run, ref)["Triton-Version"] == triton.__version__
        assert exchanges(run, ref) == ["http_503", "http_503"]
    fsck_clean(run)


def test_the_idle_count_continues_across_resume(capsys, start, tmp_path):
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, [], "--steps", "1", "--retries", "0",
                                          "--max-idle-steps", "2")
    assert code == 0 and len(requests) == 1, err
    assert trailers_at(run, "refs/attempts/1-1")["LLM-Idle-Steps"] == "1"
    # The resumed run starts at one idle step, not zero: its first idle step is the second in a row.
    with FakeLLM([]) as server:
        code, out, err = nearpeak(capsys, "run", "--resume", run, "--base-url", server.base_url, "--steps", "4")
        asked = len(server.requests)
    assert code == 5 and asked == 1, err
    assert "in 2 consecutive step(s)" in out
    assert trailers_at(run, "refs/attempts/2-1")["LLM-Idle-Steps"] == "2"
    assert "refs/attempts/3-1" not in refs(run)
    # A usable reply after another resume starts the count again.
    with FakeLLM([Reply(knob_edit(start.read_text()))]) as server:
        code, _, err = nearpeak(capsys, "run", "--resume", run, "--base-url", server.base_url, "--steps", "3")
    assert code == 0, err
    assert Ledger(run).entries()[-1].trailers["LLM-Idle-Steps"] == "0"
    fsck_clean(run)


def test_a_bad_day_of_replies_is_retried_until_an_edit_arrives(capsys, start, tmp_path):
    source = start.read_text()
    body = json.dumps({"id": "x", "choices": [{"message": {"role": "assistant", "content": "hi"}}]})
    diff = ("Halve BLOCK_K.\n```diff\n--- a/kernel.py\n+++ b/kernel.py\n@@ -45,1 +45,1 @@\n-" + knobs_line(source)
            + "+" + knobs_line(source).replace('"BLOCK_K": 64', '"BLOCK_K": 32') + "```\n")
    script = [Raw(body[:30]), Raw("<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
              Status(500), Status(429, {"Retry-After": "0.2"}), Stall(5.0), Reply(diff)]
    code, _, err, _, run = run_llm(capsys, start, tmp_path, script, "--steps", "1", "--retries", "5",
                                   "--request-timeout", "1")
    assert code == 0, err
    assert exchanges(run, "refs/attempts/1-1") == ["truncated_json", "html_body", "http_500", "http_429", "timeout",
                                                   "ok"]
    step = json_at(run, "refs/attempts/1-1", "step.json")
    assert step["proposal"]["edit_format"] == "unified-diff" and step["verdict"] == "rejected"
    assert step["proposal"]["exchanges"][3]["wait_s"] == 0.2
    assert '"BLOCK_K": 32' in knobs_line(file_at(run, "refs/attempts/1-1", "kernel.py"))
    assert "retry 3/5" in err and "http_429" in err


def test_snippets_already_applied_edits_and_python3_fences_end_to_end(capsys, start, tmp_path):
    source = start.read_text()
    snippet = "Use a larger K step:\n```python\nBLOCK_K = 128\n```\n"
    already = ("Restore the 64-wide K step.\n<<<<<<< SEARCH\n" + knobs_line(source).replace("64", "128", 1)
               + "=======\n" + knobs_line(source) + ">>>>>>> REPLACE\n")
    whole = "## Async copies\nMove operands straight into LDS.\n```python3\n" + need(V03).read_text() + "```\nDone.\n"
    script = [Reply(snippet), Reply(knob_edit(source)), Reply(already), Reply(whole)]
    code, _, err, requests, run = run_llm(capsys, start, tmp_path, script, "--steps", "2")
    assert code == 0, err
    assert exchanges(run, "refs/attempts/1-1") == ["bad_edit", "ok"]
    assert "not a whole kernel file" in requests[1]["messages"][-1]["content"]
    assert "already applied" in requests[3]["messages"][-1]["content"]
    main = json_at(run, "refs/heads/main", "step.json")
    assert main["step"] == 2 and main["verdict"] == "accepted" and main["proposal"]["edit_format"] == "whole-file"
    assert main["rationale"] == "## Async copies\nMove operands straight into LDS.\nDone."
    subject = git(run, "log", "-1", "--format=%s", "main")
    assert subject.strip() == "step 2.1: accepted - Async copies"
    fsck_clean(run)


def test_k_candidates_are_asked_concurrently_and_all_judged(capsys, start, tmp_path):
    source = start.read_text()
    # The step's planning request comes first; then no reply leaves the server before all three implementation
    # requests have arrived: sequential requests would hold the first one until the gate gives up (60 s) and
    # fail the overlap check below.
    def together() -> bool:
        return len(server.log) >= 4

    replies = [Reply(plan_text("Halve BLOCK_K", "Eight waves", "Smaller M tile")),
               Reply(knob_change(source, "BLOCK_K", 64, 32, "Halve BLOCK_K."), gate=together),
               Reply(knob_change(source, "num_warps", 4, 8, "Eight waves."), gate=together),
               Reply(knob_change(source, "BLOCK_M", 256, 128, "Smaller M tile."), gate=together)]
    with FakeLLM(replies) as server:
        code, _, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "llm",
                                "--base-url", server.base_url, "--runs-dir", tmp_path, "--run-id", "k3",
                                "--steps", "1", "--candidates", "3", "--seed", "7")
        plan, *log = server.log
    assert code == 0, err
    assert plan.body["seed"] == request_seed(7, 1, 0) and "## Task: plan step 1" in plan.messages[-1]["content"]
    seen = [(r.body.get("seed"), round(r.arrived, 3), r.finished and round(r.finished, 3)) for r in log]
    assert len(log) == 3, (seen, err)  # one request per candidate, none retried
    assert max(r.arrived for r in log) < min(r.finished for r in log), seen  # all three in flight together
    assert sorted(r.body["seed"] for r in log) == sorted(request_seed(7, 1, k) for k in (1, 2, 3)), (seen, err)
    assert len({r.messages[-1]["content"] for r in log}) == 3
    # Each implementation request was given its own idea of the plan and told the two others.
    tasks = sorted(r.messages[-1]["content"].split("## Task\n", 1)[1] for r in log)
    for k, title in enumerate(("Halve BLOCK_K", "Eight waves", "Smaller M tile"), start=1):
        mine = [t for t in tasks if f"implements idea {k}: {title}" in t]
        assert len(mine) == 1 and all(f"- idea {j}:" in mine[0] for j in {1, 2, 3} - {k}), tasks
    run = tmp_path / "k3"
    ledger = Ledger(run)
    step1 = [e for e in ledger.entries() if e.step == 1]
    assert sorted(e.candidate for e in step1) == [1, 2, 3] and not ledger.proposals()
    assert sum(int(e.trailers["Tokens"]) for e in step1) == 450
    titles = {e.summary.split(" - ", 1)[1] for e in step1}
    assert titles == {"Halve BLOCK_K.", "Eight waves.", "Smaller M tile."}
    fsck_clean(run)


def test_kill_with_several_candidates_keeps_every_reply_received(capsys, start, tmp_path):
    source = start.read_text()
    first = knob_change(source, "BLOCK_K", 64, 32, "Halve BLOCK_K.")
    second = knob_change(source, "num_warps", 4, 8, "Eight waves.")
    third = knob_change(source, "BLOCK_M", 256, 128, "Smaller M tile.")
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    run = tmp_path / "runs" / "killed"
    plan = plan_text("Halve BLOCK_K", "Eight waves", "Smaller M tile")
    with FakeLLM([Reply(plan), Reply(first), Reply(second, delay=0.3), Reply(third, delay=300)]) as server:
        child = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "run", "--target", "gfx950", "--from", str(start), "--proposer",
             "llm", "--base-url", server.base_url, "--runs-dir", str(tmp_path / "runs"), "--run-id", "killed",
             "--steps", "1", "--candidates", "3", "--request-timeout", "600"],
            cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while not (run.is_dir() and len(Ledger(run).proposals()) == 2):  # two replies in, the third hanging
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the two replies were never committed"
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
    waiting = Ledger(run).proposals()
    assert [(e.step, e.candidate, e.verdict) for e in waiting] == [(1, 1, "proposed"), (1, 2, "proposed")]
    assert [e.trailers["Tokens"] for e in waiting] == ["150", "150"]
    assert [e.trailers.get("Plan-Tokens") for e in waiting] == ["150", None]  # the plan, counted once
    assert {e.trailers["Triton-Version"] for e in waiting} == {triton.__version__}
    fsck_clean(run)

    with FakeLLM([Reply(third)]) as server:
        code, _, err = nearpeak(capsys, "run", "--resume", run, "--base-url", server.base_url)
        asked = server.requests
    assert code == 0, err
    # Only the lost request is sent again (the plan is read back from the ledger), under its own number, and
    # it is told what its two siblings already proposed.
    assert len(asked) == 1 and "## Task: plan" not in asked[0]["messages"][-1]["content"]
    task = asked[0]["messages"][-1]["content"].split("## Task\n", 1)[1]
    assert "- Halve BLOCK_K." in task and "- Eight waves." in task
    ledger = Ledger(run)
    step1 = [e for e in ledger.entries() if e.step == 1]
    assert sorted(e.candidate for e in step1) == [1, 2, 3] and not ledger.proposals()
    assert sum(int(e.trailers["Tokens"]) for e in step1) == 450
    assert {e.summary.split(" - ", 1)[1] for e in step1} == {"Halve BLOCK_K.", "Eight waves.", "Smaller M tile."}
    requests = sorted(json_at(run, e.ref, "step.json")["proposal"]["request"] for e in step1)
    assert requests == [1, 2, 3]
    fsck_clean(run)
