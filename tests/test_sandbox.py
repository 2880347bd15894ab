"""evaluator.sandbox: a fresh process per call, killed as a group, with bounded output and a minimal env."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evaluator.sandbox import SandboxWorker, classify, run_isolated

M = "tests.adversarial.misbehave"
ROOT = Path(__file__).resolve().parents[1]


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _wait_until(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _lingering(info: Path, seconds: float = 120) -> tuple[int, int, Path]:
    assert _wait_until(info.exists, seconds), "the sandboxed call never started"
    assert _wait_until(lambda: len(info.read_text().split()) == 3, 5)
    pid, child, cwd = info.read_text().split()
    return int(pid), int(child), Path(cwd)


def _reap_leftovers(*pids: int) -> None:
    for pid in pids:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_kill_9_of_the_caller_ends_its_sandboxed_children_and_their_scratch(tmp_path):
    info = tmp_path / "info"
    code = (f"from evaluator.sandbox import run_isolated; "
            f"run_isolated('{M}:linger_with_child', {{'info_file': '{info}'}}, timeout_s=600)")
    caller = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        pid, child, scratch = _lingering(info)
        assert scratch.is_dir()
        caller.kill()  # SIGKILL: the caller runs no cleanup at all
        caller.wait()
        dead = _wait_until(lambda: _gone(pid) and _gone(child), 10)
        _reap_leftovers(pid, child)
        assert dead, "a sandboxed process outlived its killed caller"
        assert _wait_until(lambda: not scratch.exists(), 10), "scratch directory left behind"
    finally:
        caller.kill()


def test_a_worker_that_dies_takes_its_children_and_the_call_reports_it(tmp_path):
    info = tmp_path / "info"
    with SandboxWorker(preload=()) as worker:
        import threading

        outcome = {}
        call = threading.Thread(target=lambda: outcome.update(
            result=worker.run(f"{M}:linger_with_child", {"info_file": str(info)}, timeout_s=600)))
        call.start()
        pid, child, _ = _lingering(info)
        os.kill(worker.pid, signal.SIGKILL)
        call.join(30)
        dead = _wait_until(lambda: _gone(pid) and _gone(child), 10)
        _reap_leftovers(pid, child)
        assert dead and outcome["result"].verdict == "crashed"
        assert "worker" in outcome["result"].message
        assert worker.run(f"{M}:echo", {"x": 1}, timeout_s=60).value == {"x": 1}  # a fresh worker takes over


def test_one_worker_serves_concurrent_calls():
    import concurrent.futures

    with SandboxWorker(preload=()) as worker, concurrent.futures.ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda i: worker.run(f"{M}:echo", {"i": i}, timeout_s=60), range(8)))
    assert [r.value for r in results] == [{"i": i} for i in range(8)]


def test_value_and_arguments_travel_as_json():
    result = run_isolated(f"{M}:echo", {"shape": [4096, 4096, 8192], "name": "x", "f": 1.5}, timeout_s=30)
    assert result.verdict == "ok" and result.exit_code == 0 and result.signal is None
    assert result.value == {"shape": [4096, 4096, 8192], "name": "x", "f": 1.5}


def test_child_gets_a_minimal_environment_and_its_own_scratch(monkeypatch):
    monkeypatch.setenv("NEARPEAK_TEST_SECRET", "do-not-pass")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    result = run_isolated(f"{M}:report_environment", {}, timeout_s=30)
    env, cwd = result.value["env"], result.value["cwd"]
    assert "NEARPEAK_TEST_SECRET" not in env
    assert env["CUDA_VISIBLE_DEVICES"] == "3"
    assert env["HOME"] == cwd and env["TMPDIR"] == cwd
    assert env["TRITON_CACHE_DIR"]  # compiles stay cached although HOME moved
    assert Path(env["PYTHONPATH"], "evaluator", "sandbox.py").is_file()
    assert not Path(cwd).exists()  # the fresh scratch directory is removed afterwards


def test_caller_scratch_dir_is_used_and_kept(tmp_path):
    result = run_isolated(f"{M}:report_environment", {}, timeout_s=30, scratch_dir=str(tmp_path / "s"))
    assert result.value["cwd"] == str((tmp_path / "s").resolve())
    assert (tmp_path / "s").is_dir()


def test_timeout_kills_the_group_promptly():
    started = time.monotonic()
    result = run_isolated(f"{M}:spin_forever", {}, timeout_s=1.5)
    assert result.verdict == "timeout" and result.signal == signal.SIGKILL
    assert time.monotonic() - started < 5


def test_segfault_is_a_crash_with_its_signal():
    result = run_isolated(f"{M}:segfault", {}, timeout_s=30)
    assert (result.verdict, result.signal) == ("crashed", signal.SIGSEGV)
    assert "SIGSEGV" in result.message


def test_forked_child_is_killed_with_the_group(tmp_path):
    pid_file = tmp_path / "pid"
    result = run_isolated(f"{M}:fork_and_linger", {"pid_file": str(pid_file)}, timeout_s=30)
    assert result.verdict == "ok"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            break
        if state == "Z":
            break
        time.sleep(0.05)
    else:
        os.kill(pid, signal.SIGKILL)
        pytest.fail(f"forked child {pid} outlived the sandbox")


def test_endless_output_is_bounded_and_keeps_head_and_tail():
    result = run_isolated(f"{M}:endless_output", {}, timeout_s=30, output_keep=1000, flood_bytes=1 << 20)
    assert result.verdict == "output_flood"
    assert result.stdout_tail.startswith("all work and no play")
    assert "bytes not kept" in result.stdout_tail
    assert len(result.stdout_tail) < 2100


def test_exception_carries_type_message_and_traceback():
    result = run_isolated(f"{M}:raise_error", {}, timeout_s=30)
    assert result.verdict == "error"
    assert result.message == "ValueError: candidate raised on purpose"
    assert "misbehave.py" in result.stderr_tail


def test_memory_limit_turns_a_huge_allocation_into_an_error():
    result = run_isolated(f"{M}:allocate", {"megabytes": 4096}, timeout_s=30, memory_mb=1024)
    assert result.verdict == "error" and result.message.startswith("MemoryError")
    assert run_isolated(f"{M}:allocate", {"megabytes": 64}, timeout_s=30, memory_mb=1024).value == 64 << 20


def test_data_rlimit_is_the_gpu_friendly_alternative():
    result = run_isolated(f"{M}:allocate", {"megabytes": 4096}, timeout_s=30, memory_mb=1024, memory_rlimit="data")
    assert result.verdict == "error" and result.message.startswith("MemoryError")
    with pytest.raises(ValueError):
        run_isolated(f"{M}:echo", {}, timeout_s=5, memory_rlimit="rss")


def test_forged_result_without_token_is_not_believed():
    result = run_isolated(f"{M}:forge_result", {}, timeout_s=30)
    assert result.verdict == "crashed" and result.value is None


def test_unknown_function_is_an_error_not_a_crash():
    result = run_isolated(f"{M}:no_such_function", {}, timeout_s=30)
    assert result.verdict == "error" and "AttributeError" in result.message


@pytest.mark.parametrize(("result", "returncode", "stderr", "verdict"), [
    ({"ok": True, "value": 1}, 0, "", "ok"),
    ({"ok": False, "type": "RuntimeError", "message": "CUDA error: misaligned address"}, 0, "", "runtime_fault"),
    ({"ok": False, "type": "RuntimeError", "message": "HIP error: hipErrorIllegalAddress"}, 0, "", "runtime_fault"),
    ({"ok": False, "type": "KeyError", "message": "'x'"}, 0, "", "error"),
    (None, -11, "", "crashed"),
    (None, -6, "Memory access fault by GPU node-1 on address 0x0\n", "runtime_fault"),
    (None, 0, "", "crashed"),
    (None, 2, "", "crashed"),
])
def test_classify(result, returncode, stderr, verdict):
    got, _, message = classify(result, returncode=returncode, timed_out=False, flooded=False, stderr=stderr,
                               timeout_s=10)
    assert got == verdict
    assert (message is None) == (verdict == "ok")


def test_classify_prefers_flood_then_timeout():
    ok = {"ok": True, "value": 1}
    assert classify(ok, returncode=-9, timed_out=True, flooded=True, stderr="", timeout_s=1)[0] == "output_flood"
    assert classify(ok, returncode=-9, timed_out=True, flooded=False, stderr="", timeout_s=1)[0] == "timeout"


def test_a_process_that_escaped_the_group_does_not_block_the_caller(tmp_path):
    pid_file = tmp_path / "pid"
    started = time.monotonic()
    result = run_isolated(f"{M}:escape_group", {"pid_file": str(pid_file)}, timeout_s=30)
    elapsed = time.monotonic() - started
    os.kill(int(pid_file.read_text()), signal.SIGKILL)  # not contained (see the threat model): clean up ourselves
    assert result.verdict == "ok"
    assert elapsed < 10


def test_values_without_a_json_type_come_back_as_text():
    result = run_isolated(f"{M}:unusual_values", {}, timeout_s=60)
    assert result.value == {"dtype": "torch.bfloat16", "set": [1, 3], "path": "/x", "scalar": 2.5}
