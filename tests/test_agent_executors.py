"""Executors: local worker processes (GPU workers pinned one device each, CPU workers for static screens) and
Ray tasks, both driven by the loop, which alone writes the ledger."""
from __future__ import annotations

import os
import re
import sys
import time

import pytest
from agent_support import V00, fsck_clean, nearpeak, need

from agent.executors import ExecutorError, Job
from agent.executors.factory import make_executor
from agent.executors.local import LocalExecutor, visible_devices
from agent.ledger import Ledger


def worker_env() -> tuple[int, str | None, str | None]:
    """Run inside a worker: which process, device and Triton cache it has (held a moment so both get work)."""
    time.sleep(0.3)
    return os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES"), os.environ.get("TRITON_CACHE_DIR")


@pytest.fixture(scope="module")
def start(tmp_path_factory):
    """v00 with a narrow sweep (BLOCK_K x num_warps) to keep compiles few."""
    source = need(V00).read_text()
    source = re.sub(r"^KNOB_CHOICES = .*$", 'KNOB_CHOICES = {"BLOCK_K": [64, 32], "num_warps": [4, 8]}', source,
                    flags=re.MULTILINE)
    path = tmp_path_factory.mktemp("executors") / "v00_tune.py"
    path.write_text(source)
    return path


def test_gpu_workers_take_the_visible_devices_in_order(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5,7")
    assert visible_devices("CUDA_VISIBLE_DEVICES", 2) == ["3", "5"]
    with pytest.raises(ExecutorError, match="needs 4 GPUs"):
        visible_devices("CUDA_VISIBLE_DEVICES", 4)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert visible_devices("CUDA_VISIBLE_DEVICES", 2) == ["0", "1"]


def test_each_local_gpu_worker_is_pinned_to_its_own_device(monkeypatch, tmp_path):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,7")
    executor = LocalExecutor(gpu_workers=2, cpu_workers=1, device_variable="CUDA_VISIBLE_DEVICES",
                             cache_dir=tmp_path / "cache")
    try:
        seen = [f.result(timeout=60) for f in [executor.gpu.submit(worker_env) for _ in range(6)]]
        cpu = executor.cpu.submit(worker_env).result(timeout=60)
    finally:
        executor.close()
    assert "2 GPU worker(s) pinned to CUDA_VISIBLE_DEVICES=5,7" in executor.description
    by_pid = {pid: device for pid, device, _ in seen}
    assert sorted(by_pid.values()) == ["5", "7"]           # two workers, one device each
    assert {cache for *_, cache in seen} == {cpu[2]} == {str(tmp_path / "cache")}


def test_ray_missing_gives_an_install_hint(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(ExecutorError, match=r"pip install 'nearpeak\[ray\]'"):
        make_executor("ray", workers=None, device_variable="HIP_VISIBLE_DEVICES", cache_dir=tmp_path, run_id="x")


@pytest.mark.slow
def test_static_screens_share_the_runs_triton_cache(start, tmp_path):
    cache = tmp_path / "triton-cache"
    executor = LocalExecutor(gpu_workers=None, cpu_workers=1, device_variable="HIP_VISIBLE_DEVICES", cache_dir=cache)
    job = Job(number=1, source=start.read_text(), parent_source=start.read_text(), target="gfx950", min_gain=0.01,
              max_spills=0)
    try:
        first = executor.submit_static(job).result(timeout=300)
        again = executor.submit_static(job).result(timeout=300)
    finally:
        executor.close()
    assert first["status"] == "ok" and again["static"] == first["static"]
    assert any(cache.rglob("*.hsaco")), "the static stage compiled outside the run's cache"
    assert again["compile_seconds"] < first["compile_seconds"]


def _run_and_read(capsys, start, tmp_path, *extra: str) -> tuple[Ledger, str]:
    runs = tmp_path / "runs"
    code, out, err = nearpeak(capsys, "run", "--target", "gfx950", "--from", start, "--proposer", "tune",
                              "--steps", "1", "--candidates", "3", "--runs-dir", runs, "--run-id", "r", *extra)
    assert code == 0, err
    ledger = Ledger(runs / "r")
    entries = [e for e in ledger.entries() if e.step == 1]
    assert [e.candidate for e in entries] == [1, 2, 3]
    assert len({e.trailers["Kernel-Sha256"] for e in entries}) == 3   # no candidate lost or evaluated twice
    assert all(e.verdict in ("accepted", "passed", "rejected") for e in entries)
    fsck_clean(ledger.path)
    assert "stopped: all 1 steps done" in out
    return ledger, err


@pytest.mark.slow
def test_two_worker_local_run(start, tmp_path, capsys):
    _, progress = _run_and_read(capsys, start, tmp_path, "--workers", "2")
    assert "beam search; evaluations on local: 2 GPU worker(s)" in progress


@pytest.mark.slow
def test_ray_local_instance_runs_static_evaluations(start, tmp_path, capsys):
    pytest.importorskip("ray")
    _, progress = _run_and_read(capsys, start, tmp_path, "--executor", "ray")
    assert "evaluations on ray (local instance)" in progress


@pytest.mark.slow
def test_ray_measured_tasks_reuse_their_worker_process():
    """Measured jobs keep their Ray worker (and its warm sandbox) from one candidate to the next; Ray's default
    for GPU tasks would start a new process for each. Ray counts a declared GPU without touching one."""
    ray = pytest.importorskip("ray")
    from agent.executors.ray_cluster import MEASURED_TASK_OPTIONS

    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    try:
        def pid() -> int:  # defined here so Ray ships it by value to its workers
            return os.getpid()

        task = ray.remote(**MEASURED_TASK_OPTIONS)(pid)
        first = ray.get(task.remote())
        second = ray.get(task.remote())
        default = ray.remote(num_cpus=1, num_gpus=1)(pid)   # the behaviour being avoided
        third, fourth = ray.get(default.remote()), ray.get(default.remote())
    finally:
        ray.shutdown()
    assert first == second
    assert third != fourth
