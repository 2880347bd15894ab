"""Building the executor a run asked for (the executor modules import the interface from the package)."""
from __future__ import annotations

from pathlib import Path

from . import EXECUTORS, LOCAL, RAY, Executor, ExecutorError
from .local import LocalExecutor
from .ray_cluster import RayExecutor


def make_executor(kind: str, *, workers: int | None, device_variable: str | None, cache_dir: Path, run_id: str,
                  ray_address: str | None = None, cpu_workers: int | None = None) -> Executor:
    """The executor a run asked for. `workers` is the number of GPU workers (None: one that sees this process's
    GPUs; with Ray, the GPUs of the local instance it starts); `cache_dir` is the run's Triton cache for local
    workers (Ray workers keep theirs per host); `device_variable` is the driver's variable that pins a local
    worker to one GPU (the target toolchain's)."""
    if kind == LOCAL:
        return LocalExecutor(gpu_workers=workers, cpu_workers=cpu_workers, device_variable=device_variable,
                             cache_dir=cache_dir)
    if kind == RAY:
        return RayExecutor(address=ray_address, run_id=run_id, num_gpus=workers, num_cpus=cpu_workers)
    raise ExecutorError(f"unknown executor {kind!r}; choose one of {', '.join(EXECUTORS)}")
