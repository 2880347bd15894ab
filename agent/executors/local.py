"""Local executor: worker processes on this host, one per GPU (pinned) and one per CPU core for static screens.

Workers are plain processes started with `spawn` (no state inherited from the driver's threads); each
evaluation inside them still runs in fresh sandboxed processes, so a worker only dispatches and waits. GPU
workers take their device from a queue as they start, so with `--workers N` worker i sees only the i-th
visible GPU (through the toolchain's *_VISIBLE_DEVICES variable) and jobs go to whichever worker is free.
"""
from __future__ import annotations

import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

from . import ExecutorError
from .jobs import Job, configure_worker, measured_job, static_job


def visible_devices(variable: str, count: int) -> list[str]:
    """The device ids the `count` GPU workers are pinned to: the first `count` of the driver's visible list
    (its `variable`, when set), else 0..count-1."""
    listed = [d.strip() for d in os.environ.get(variable, "").split(",") if d.strip()]
    if variable in os.environ and len(listed) < count:
        raise ExecutorError(f"--workers {count} needs {count} GPUs but {variable}={os.environ[variable]!r} "
                            f"makes {len(listed)} visible")
    return listed[:count] if variable in os.environ else [str(i) for i in range(count)]


def default_cpu_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _gpu_worker_init(cache_dir: str, variable: str | None, devices) -> None:
    configure_worker(cache_dir, {variable: devices.get()} if variable else None)


class LocalExecutor:
    def __init__(self, gpu_workers: int | None, cpu_workers: int | None, device_variable: str | None,
                 cache_dir: Path):
        """`device_variable` is the driver's variable that pins a worker to one GPU (the target toolchain's)."""
        context = multiprocessing.get_context("spawn")
        cpu_workers = cpu_workers or default_cpu_workers()
        self.cpu = ProcessPoolExecutor(cpu_workers, mp_context=context, initializer=configure_worker,
                                       initargs=(str(cache_dir),))
        variable = device_variable
        if gpu_workers is None or variable is None:  # one worker that sees what the driver sees
            count, variable, ids = 1, None, []
        else:
            count, ids = gpu_workers, visible_devices(variable, gpu_workers)
        devices = context.Queue()
        for device in ids:
            devices.put(device)
        self.gpu = ProcessPoolExecutor(count, mp_context=context, initializer=_gpu_worker_init,
                                       initargs=(str(cache_dir), variable, devices))
        measured = (f"{count} GPU worker(s) pinned to {variable}={','.join(ids)}" if ids
                    else "1 worker for measured work (it sees the GPUs this process sees, if any)")
        self.description = f"local: {measured}, {cpu_workers} CPU worker(s) for static screens"

    def submit_static(self, job: Job) -> Future:
        return self.cpu.submit(static_job, job)

    def submit_measured(self, job: Job, static_record: dict) -> Future:
        return self.gpu.submit(measured_job, job, static_record)

    def close(self) -> None:
        for pool in (self.cpu, self.gpu):
            pool.shutdown(wait=True, cancel_futures=True)
