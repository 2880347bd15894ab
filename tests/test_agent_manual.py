"""`--proposer manual` end to end: prompt files appear under RUN/prompts/, replies written next to them are
taken, the ledger holds what the llm proposer's would; a run killed (-9) while waiting and resumed picks up
the same prompts. Real compiles of the gfx950 v00 stage, real git ledgers; the replies are written by the
test, acting as the model."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from agent_support import REPO, V00, file_at, fsck_clean, git, json_at, knobs_line, nearpeak, need, trailers_at
from fakellm import plan_text

from agent.ledger import Ledger
from agent.proposers import EXIT_AWAITING_REPLIES

pytestmark = pytest.mark.slow  # end to end: real compiles, sandboxed evaluations and a git ledger


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    path = tmp_path_factory.mktemp("start") / "v00.py"
    path.write_text(need(V00).read_text())
    return path


def knob_reply(source: str, key: str, old: int, new: int, why: str) -> str:
    line = knobs_line(source)
    return (f"{why}\n\n<<<<<<< SEARCH\n" + line + "=======\n" + line.replace(f'"{key}": {old}', f'"{key}": {new}')
            + ">>>>>>> REPLACE\n")


def answer(prompts: Path, name: str, text: str) -> None:
    """Write a reply as the prompt file asks: under another name, then renamed into place."""
    reply = prompts / f"{name}.reply.md"
    temporary = reply.with_name(reply.name + ".part")
    temporary.write_text(text)
    os.replace(temporary, reply)


def manual(capsys, start, runs, *extra, run_id="manual"):
    return nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "manual", "--runs-dir", runs,
                    "--run-id", run_id, *extra)


def test_prompt_files_replies_and_the_ledger_of_a_planned_step(capsys, start, tmp_path):
    source = start.read_text()
    code, out, err = manual(capsys, start, tmp_path, "--steps", "1", "--candidates", "2", "--reply-wait", "0")
    run = tmp_path / "manual"
    prompts = run / "prompts" / "step-1"
    # K = 2: the planning request comes first, as its own self-contained prompt file; the run stops at once.
    assert code == EXIT_AWAITING_REPLIES, err
    plan_prompt = (prompts / "plan.prompt.md").read_text()
    assert str(prompts / "plan.reply.md") in plan_prompt and '{"ideas": [' in plan_prompt and "```json" in plan_prompt
    assert "## Its hot loop" in plan_prompt and "## Ideas tried earlier in this run" in plan_prompt
    assert f"nearpeak run --resume {run}" in err and "plan.reply.md" in err
    assert sorted(p.name for p in prompts.iterdir()) == ["plan.prompt.md"]

    answer(prompts, "plan", plan_text("Halve BLOCK_K", "Eight waves"))
    code, _, err = nearpeak(capsys, "run", "--resume", run, "--reply-wait", "0")
    assert code == EXIT_AWAITING_REPLIES, err
    assert {p.name for p in prompts.iterdir()} >= {"req-1.prompt.md", "req-2.prompt.md"}   # K prompts at once
    second = (prompts / "req-2.prompt.md").read_text()
    assert "implements idea 2: Eight waves" in second and "- idea 1: Halve BLOCK_K" in second
    assert str(prompts / "req-2.reply.md") in second and "<<<<<<< SEARCH" in second   # the edit formats

    # Request 2's first reply has no edit: it is answered, like the llm proposer's, with a follow-up prompt.
    answer(prompts, "req-1", knob_reply(source, "BLOCK_K", 64, 32, "Halve BLOCK_K."))
    answer(prompts, "req-2", "I would use eight waves.")
    code, _, err = nearpeak(capsys, "run", "--resume", run, "--reply-wait", "0")
    assert code == EXIT_AWAITING_REPLIES, err
    follow_up = (prompts / "req-2.try-2.prompt.md").read_text()
    assert "I would use eight waves." in follow_up and "no edit found" in follow_up
    answer(prompts, "req-2.try-2", knob_reply(source, "num_warps", 4, 8, "Eight waves."))
    code, out, err = nearpeak(capsys, "run", "--resume", run, "--reply-wait", "5", "--json")
    assert code == 0, err
    entries = {(e["step"], e["candidate"]): e for e in json.loads(out)["entries"]}
    assert set(entries) == {(0, 0), (1, 1), (1, 2)}

    ledger = Ledger(run)
    by_candidate = {e.candidate: e for e in ledger.entries() if e.step == 1}
    first, second = by_candidate[1], by_candidate[2]
    assert first.trailers["Proposer"] == "manual" and first.trailers["Idea"] == "1 - Halve BLOCK_K"
    assert second.trailers["Idea"] == "2 - Eight waves" and second.trailers["LLM-Tries"] == "2"
    assert "characters/4, not a count" in first.trailers["Tokens-Estimate"]
    step1 = json_at(run, first.sha, "step.json")
    assert step1["proposal"]["edit_format"] == "search-replace" and step1["idea"]["title"] == "Halve BLOCK_K"
    assert [i["title"] for i in step1["plan"]["ideas"]] == ["Halve BLOCK_K", "Eight waves"]
    assert file_at(run, first.sha, "reply.md") == (prompts / "req-1.reply.md").read_text()
    assert file_at(run, first.sha, "prompt.md") == (prompts / "req-1.prompt.md").read_text()
    # The planning request is kept once, with the step's first commit.
    holders = [e.candidate for e in (first, second) if "plan_request" in json_at(run, e.sha, "step.json")]
    assert len(holders) == 1
    assert file_at(run, by_candidate[holders[0]].sha, "plan.reply.md") == (prompts / "plan.reply.md").read_text()
    assert '"BLOCK_K": 32' in knobs_line(file_at(run, first.sha, "kernel.py"))
    code, out, _ = nearpeak(capsys, "history", run)
    header = next(line for line in out.splitlines() if line.startswith("step "))
    assert code == 0 and "idea" in header and "2 Eight waves" in out
    fsck_clean(run)
    assert (run / "prompts").is_dir() and git(run, "status", "--porcelain") == ""   # kept, and git ignores it


def test_kill_9_while_waiting_and_resume_pick_up_the_same_prompts(capsys, start, tmp_path):
    source = start.read_text()
    run = tmp_path / "runs" / "killed"
    prompts = run / "prompts" / "step-1"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    child = subprocess.Popen(
        [sys.executable, "-m", "agent.cli", "run", "--target", "gfx950", "--from", str(start), "--proposer", "manual",
         "--runs-dir", str(tmp_path / "runs"), "--run-id", "killed", "--steps", "1", "--candidates", "2",
         "--reply-wait", "600"],
        cwd=REPO, env={**env, "PYTHONPATH": str(REPO)}, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE)

    def wait_for(condition, what: str) -> None:
        deadline = time.monotonic() + 180
        while not condition():
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, what
            time.sleep(0.2)

    try:
        wait_for(lambda: (prompts / "plan.prompt.md").exists(), "no planning prompt was written")
        answer(prompts, "plan", plan_text("Halve BLOCK_K", "Eight waves"))
        wait_for(lambda: (prompts / "req-2.prompt.md").exists() and (prompts / "req-1.prompt.md").exists(),
                 "the two implementation prompts were not written")
        answer(prompts, "req-1", knob_reply(source, "BLOCK_K", 64, 32, "Halve BLOCK_K."))
        wait_for(lambda: run.is_dir() and len(Ledger(run).proposals() + Ledger(run).attempts()) >= 1,
                 "the first reply was never committed")
        child.send_signal(signal.SIGKILL)   # while request 2 waits for its reply
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
    prompt_two = (prompts / "req-2.prompt.md").read_text()
    before = sorted(p.name for p in prompts.iterdir())
    fsck_clean(run)

    # The resumed run writes no new prompt: it waits on request 2's own file and stops (exit 6) at once.
    code, _, err = nearpeak(capsys, "run", "--resume", run, "--reply-wait", "0")
    assert code == EXIT_AWAITING_REPLIES, err
    assert sorted(p.name for p in prompts.iterdir()) == before
    assert (prompts / "req-2.prompt.md").read_text() == prompt_two and "req-2.reply.md" in err
    answer(prompts, "req-2", knob_reply(source, "num_warps", 4, 8, "Eight waves."))
    code, _, err = nearpeak(capsys, "run", "--resume", run, "--reply-wait", "5")
    assert code == 0, err
    step1 = sorted((e for e in Ledger(run).entries() if e.step == 1), key=lambda e: e.candidate)
    assert [e.summary.split(" - ", 1)[1] for e in step1] == ["Halve BLOCK_K.", "Eight waves."]
    assert [json_at(run, e.sha, "step.json")["proposal"]["request"] for e in step1] == [1, 2]
    assert trailers_at(run, step1[1].ref)["Idea"] == "2 - Eight waves"
    assert not Ledger(run).proposals()
    fsck_clean(run)
