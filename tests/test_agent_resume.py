"""Crash safety: `kill -9` at any moment loses at most the candidate in flight, and `--resume` carries on."""
import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from agent_support import REPO, V00, V03, fsck_clean, git, knob_edit, nearpeak, need, refs, trailers_at
from fakellm import FakeLLM, Reply, Status

from agent.ledger import MAIN, Ledger, LedgerError, attempt_ref

pytestmark = pytest.mark.slow  # end to end: killed and resumed runs, real compiles and git ledgers

WRITER = """
import sys
from agent.ledger import MAIN, Ledger, LedgerError, attempt_ref
ledger = Ledger(sys.argv[1])
ledger.lock()
ledger.recover()
while True:
    n = len(ledger.main_line())
    files = {"kernel.py": f"version = {n}\\n".encode(), "evaluation.json": (str(n) * 300000).encode()}
    head = ledger.resolve(MAIN)
    if ledger.resolve(attempt_ref(n, 1)) is None:  # a kill may have come between the two commits
        ledger.commit(files, f"attempt {n}\\n\\nStep: {n}\\nCandidate: 1\\nVerdict: rejected\\n", parent=head,
                      ref=attempt_ref(n, 1))
    ledger.commit(files, f"step {n}\\n\\nStep: {n}\\nCandidate: 2\\nVerdict: accepted\\n", parent=head, ref=MAIN)
"""


def test_ledger_survives_sigkill_at_random_moments(tmp_path):
    path = tmp_path / "run"
    Ledger.create(path, {"kernel.py": b"version = 0\n"}, "start\n\nStep: 0\nVerdict: baseline\n").unlock()
    rng = random.Random(7)
    steps = []
    for i in range(6):
        # Odd rounds kill the whole process group, so a git child dies mid-write too (stale .lock files).
        writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], cwd=REPO, start_new_session=True)
        time.sleep(rng.uniform(0.8, 1.6))
        assert writer.poll() is None, "the writer stopped on its own"
        if i % 2:
            os.killpg(writer.pid, signal.SIGKILL)
        else:
            writer.send_signal(signal.SIGKILL)
        writer.wait()
        ledger = Ledger(path)
        ledger.lock()
        ledger.recover()
        fsck_clean(path)
        main = ledger.main_line()
        for entry in main:  # every step on main is whole: its files match its trailers
            assert ledger.read(entry.sha, "kernel.py") == f"version = {entry.step}\n".encode()
        assert [e.step for e in main] == list(range(len(main)))
        assert (path / "kernel.py").read_text() == f"version = {main[-1].step}\n"
        assert git(path, "status", "--porcelain") == ""
        assert {e.step for e in ledger.attempts()} >= set(range(1, len(main)))
        steps.append(len(main))
        ledger.unlock()
    assert steps == sorted(steps) and steps[-1] > steps[0] > 1, f"the writer made no progress: {steps}"


def test_killed_run_resumes_with_a_complete_history(tmp_path, capsys):
    start = tmp_path / "v00.py"
    start.write_text(need(V00).read_text())
    edit = knob_edit(start.read_text())
    run = tmp_path / "runs" / "killed"
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    with FakeLLM([Reply(edit), Reply(edit, delay=120)]) as server:
        child = subprocess.Popen(
            [sys.executable, "-m", "agent.cli", "run", "--target", "gfx950", "--from", str(start), "--proposer", "llm",
             "--base-url", server.base_url, "--runs-dir", str(tmp_path / "runs"), "--run-id", "killed",
             "--steps", "3", "--request-timeout", "300"],
            cwd=REPO, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 180
        while len(server.requests) < 2:  # step 1 committed, step 2's request is hanging
            assert child.poll() is None, child.stderr.read().decode()
            assert time.monotonic() < deadline, "the run never reached step 2"
            time.sleep(0.2)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert set(refs(run)) == {"refs/heads/main", "refs/attempts/1-1"}
    fsck_clean(run)

    whole = "Async copies into LDS.\n```python\n" + need(V03).read_text() + "```\n"
    with FakeLLM([Reply(whole), Status(400, message="bad request")]) as server:
        code, _, err = nearpeak(capsys, "run", "--resume", run, "--base-url", server.base_url)
    assert code == 0, err
    assert "resuming" in err
    code, out, _ = nearpeak(capsys, "history", run, "--json")
    entries = json.loads(out)["entries"]
    assert [(e["step"], e["candidate"], e["verdict"]) for e in entries] == [
        (0, 0, "baseline"), (1, 1, "rejected"), (2, 1, "accepted"), (3, 1, "proposal-failed")]
    assert "http_400: " in trailers_at(run, attempt_ref(3, 1))["Reason"]
    assert (run / "kernel.py").read_text() == V03.read_text()
    assert Ledger(run).resolve(MAIN) == git(run, "rev-parse", "HEAD").strip()
    assert git(run, "status", "--porcelain") == ""
    fsck_clean(run)


def test_recover_discards_a_half_written_work_tree_and_stale_git_locks(tmp_path):
    path = tmp_path / "run"
    ledger = Ledger.create(path, {"kernel.py": b"version = 0\n"}, "start\n\nStep: 0\nVerdict: baseline\n")
    (path / "kernel.py").write_text("half written")
    (path / "stray.txt").write_text("left behind")
    (path / ".git" / "refs" / "heads" / "main.lock").write_text("stale")
    cleaned = ledger.recover()
    assert ".git/refs/heads/main.lock" in cleaned and "work tree reset to main" in cleaned
    assert (path / "kernel.py").read_text() == "version = 0\n" and not (path / "stray.txt").exists()
    head = ledger.resolve(MAIN)
    ledger.commit({"kernel.py": b"version = 1\n"}, "s1\n\nStep: 1\nVerdict: accepted\n", parent=head, ref=MAIN)
    fsck_clean(path)


def test_ledger_refuses_a_second_writer_and_a_stale_parent(tmp_path):
    path = tmp_path / "run"
    ledger = Ledger.create(path, {"kernel.py": b"version = 0\n"}, "start\n\nStep: 0\nVerdict: baseline\n")
    with pytest.raises(LedgerError, match="in use by another nearpeak process"):
        Ledger(path).lock(wait=0.2)
    root = ledger.resolve(MAIN)
    ledger.commit({"kernel.py": b"version = 1\n"}, "s1\n\nStep: 1\nVerdict: accepted\n", parent=root, ref=MAIN)
    with pytest.raises(LedgerError, match="expected"):  # main moved on: compare-and-swap refuses
        ledger.commit({"kernel.py": b"version = 2\n"}, "s2\n\nStep: 2\nVerdict: accepted\n", parent=root, ref=MAIN)
    with pytest.raises(LedgerError, match="already exists"):  # an attempt ref is written once
        for _ in range(2):
            ledger.commit({"kernel.py": b"x\n"}, "a\n\nStep: 2\nVerdict: rejected\n", parent=root,
                          ref=attempt_ref(2, 1))
