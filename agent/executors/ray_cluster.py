"""Ray executor: each evaluation a Ray task, so a run spreads over every host of a Ray cluster.

Static screens ask for one CPU, measured evaluations for one GPU (`num_gpus=1`: Ray pins the task to a free
device and sets its *_VISIBLE_DEVICES). Without `--ray-address` a Ray instance local to this host is started
and stopped with the run. Every host of a cluster needs nearpeak and its Triton installed; each keeps its own
Triton cache per run under its temporary directory. Results travel back to the driver, the only writer of
the ledger.
"""
from __future__ import annotations

import tempfile
from concurrent.futures import Future
from pathlib import Path

from . import ExecutorError
from .jobs import Job, MeasuredResult, configure_worker, measured_job, static_job

INSTALL_HINT = "--executor ray needs Ray: pip install 'nearpeak[ray]' (or pip install ray)"

# Ray retires a worker process after each GPU task by default (max_calls=1), to free what the task left on the
# device. A measured job holds nothing there (every GPU stage runs in a sandboxed child), while a fresh process
# pays the imports and the warm sandbox worker's start again: measured on 2 H200s, about 18 s per candidate
# against 13.5 s for the local executor. max_calls=0 keeps the process.
MEASURED_TASK_OPTIONS = {"num_cpus": 1, "num_gpus": 1, "max_calls": 0}
STATIC_TASK_OPTIONS = {"num_cpus": 1}


def _cache_dir(run_id: str) -> str:
    return str(Path(tempfile.gettempdir()) / "nearpeak-triton" / run_id)


def _static_task(job: Job, run_id: str) -> dict:
    configure_worker(_cache_dir(run_id))
    return static_job(job)


def _measured_task(job: Job, static_record: dict, run_id: str) -> MeasuredResult:
    configure_worker(_cache_dir(run_id))
    return measured_job(job, static_record)


class RayExecutor:
    def __init__(self, address: str | None, run_id: str, num_gpus: int | None = None, num_cpus: int | None = None):
        try:
            import ray
        except ImportError:
            raise ExecutorError(INSTALL_HINT) from None
        self.ray = ray
        self.run_id = run_id
        self.started_here = not ray.is_initialized() and address is None
        if not ray.is_initialized():
            try:
                local = {"num_cpus": num_cpus, "num_gpus": num_gpus} if address is None else {}
                ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False,
                         **local)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise ExecutorError(f"cannot reach the Ray cluster at {address or 'a new local instance'}: "
                                    f"{exc}") from None
        self._static = ray.remote(**STATIC_TASK_OPTIONS)(_static_task)
        self._measured = ray.remote(**MEASURED_TASK_OPTIONS)(_measured_task)
        resources = ray.cluster_resources()
        self.gpus = int(resources.get("GPU", 0))
        self.description = (f"ray ({address or 'local instance'}): {int(resources.get('CPU', 0))} CPU(s), "
                            f"{self.gpus} GPU(s)")

    def submit_static(self, job: Job) -> Future:
        return self._static.remote(job, self.run_id).future()

    def submit_measured(self, job: Job, static_record: dict) -> Future:
        if self.gpus < 1:
            raise ExecutorError("the Ray cluster has no GPU for measured evaluations (num_gpus=1 tasks would "
                                "never be scheduled)")
        return self._measured.remote(job, static_record, self.run_id).future()

    def close(self) -> None:
        if self.started_here:
            self.ray.shutdown()
