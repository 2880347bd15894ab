"""An executor that runs an `agent.evaluation.Evaluator`-like object (`record`, `compare`) in this process.

For callers that bring their own evaluator object rather than worker processes: tests with a scripted
evaluator, and small embedded uses. Each job runs to completion inside `submit_*` (static screens one after
another), so Ctrl-C during an evaluation reaches the caller at once.
"""
from __future__ import annotations

import shutil
import tempfile
import time
from concurrent.futures import Future
from pathlib import Path

from ..evaluation import screen
from .jobs import CANDIDATE_DIR, KERNEL, PARENT_DIR, SCRATCH_PREFIX, Job, MeasuredResult


class InlineExecutor:
    description = "this process"

    def __init__(self, evaluator):
        self.evaluator = evaluator

    @staticmethod
    def _done(call) -> Future:
        future = Future()
        try:
            future.set_result(call())
        except Exception as exc:  # noqa: BLE001 - delivered through the future, as a worker's would be
            future.set_exception(exc)
        return future

    def _in_scratch(self, job: Job, work):
        scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}inline{job.number}-"))
        try:
            paths = {}
            for name, source in ((CANDIDATE_DIR, job.source), (PARENT_DIR, job.parent_source)):
                paths[name] = scratch / name / KERNEL
                paths[name].parent.mkdir()
                paths[name].write_text(source)
            return work(paths[CANDIDATE_DIR], paths[PARENT_DIR])
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    def submit_static(self, job: Job) -> Future:
        return self._done(lambda: self._in_scratch(job, lambda path, _: self.evaluator.record(path, run=False)))

    def submit_measured(self, job: Job, static_record: dict) -> Future:
        def measure(path: Path, parent: Path) -> MeasuredResult:
            started = time.monotonic()
            record = self.evaluator.record(path, run=True)
            seconds = {"runtime": round(time.monotonic() - started, 3)}
            if screen(record, job.max_spills) is not None:
                return MeasuredResult(record, None, seconds)
            started = time.monotonic()
            comparison = self.evaluator.compare(path, parent, None, job.min_gain)
            seconds["compare"] = round(time.monotonic() - started, 3)
            return MeasuredResult(record, comparison, seconds)

        return self._done(lambda: self._in_scratch(job, measure))

    def close(self) -> None:
        """Nothing to release."""
