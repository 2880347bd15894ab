"""The llm proposer end to end: the real openai client over real HTTP against a scripted local server.

Each scenario starts from the gfx950 v00 stage and checks what the ledger holds afterwards: which refs
exist, the trailers of their commits, the prompt/reply files and the per-try record in step.json.
"""
import json

import pytest
from agent_support import (
    V00,
    V02,
    file_at,
    fsck_clean,
    json_at,
    knob_edit,
    knobs_line,
    nearpeak,
    need,
    refs,
    trailers_at,
)
from fakellm import FakeLLM, Reply, Status

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
    whole = "Move operands straight into LDS with async copies.\n```python\n" + need(V02).read_text() + "```\n"
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
    assert "Hot-loop ISA excerpt" in requests[0]["messages"][-1]["content"]
    assert requests[0]["model"] == "fake-model" and requests[0]["seed"] == 0
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
    assert f"closest to kernel line {line}:" in feedback


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
    whole = "Async copies into LDS.\n```python\n" + need(V02).read_text() + "```\n"
    script = [Reply(whole), Reply(knob_edit(start.read_text()))]
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
