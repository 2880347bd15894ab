"""Executors: where the loop's evaluations run. The loop (the driver) only submits jobs and commits results.

An executor takes self-contained jobs (`jobs.Job`: the candidate's and its parent's source, target, limits) and
returns `concurrent.futures.Future`s, so the driver can keep many evaluations in flight and still commit them
in candidate order. Two phases per candidate:

* `submit_static(job)`: policy check and static stage (compile for the target, read the ISA); CPU only;
* `submit_measured(job, static_record)`: runtime stage and interleaved A/B comparison against the parent;
  needs one GPU of the target.

`local` runs them on worker processes of this host (one per GPU, pinned with CUDA_VISIBLE_DEVICES or
HIP_VISIBLE_DEVICES, plus one per CPU core for static screens); `ray` runs each as a Ray task (the optional
extra `nearpeak[ray]`), so a run can spread over the hosts of a Ray cluster. Neither writes the ledger.
"""
from __future__ import annotations

from concurrent.futures import Future
from typing import Protocol

from .jobs import Job, MeasuredResult

LOCAL, RAY = "local", "ray"
EXECUTORS = (LOCAL, RAY)

__all__ = ["EXECUTORS", "LOCAL", "RAY", "Executor", "ExecutorError", "Job", "MeasuredResult"]


class ExecutorError(Exception):
    """An executor that cannot start (Ray missing, no GPU in the cluster, bad worker count), for a human."""


class Executor(Protocol):
    description: str

    def submit_static(self, job: Job) -> Future: ...

    def submit_measured(self, job: Job, static_record: dict) -> Future: ...

    def close(self) -> None: ...
