"""One entry point per question, each turning files into a JSON-ready record.

Every function here evaluates the file in fresh sandboxed processes after the policy check
(`evaluator.isolated`), whatever the stage: static analysis, a foreign file's host function, the runtime
stage on a GPU, the interleaved comparison. The record follows docs/eval-schema.md
(`schema` = evaluator.SCHEMA_VERSION). Failures never raise out of these functions: they come back as a
record whose `status` says what failed; only malformed requests raise `UsageError`.
"""
from __future__ import annotations

from pathlib import Path

from .batch import DEFAULT_FILE_TIMEOUT_S, ScoreOptions, score_file
from .foreign import parse_args
from .isolated import compare_isolated, evaluate_isolated
from .request import EvalRequest, Problem
from .sandbox import SandboxWorker
from .stages import error_record, evaluate_static

__all__ = ["EvalRequest", "Problem", "compare", "error_record", "evaluate", "evaluate_foreign", "evaluate_static"]


def evaluate(path: str | Path, request: EvalRequest | None = None, *, worker: SandboxWorker | None = None,
             **fields) -> dict:
    """Static evaluation, plus the runtime stage when `request.run` is true or (None) a GPU of the target is here.

    `fields` are `EvalRequest` fields (target, shape, problem, knobs, run, seed, profile, timeout_s, dump_dir)
    for callers that do not build a request. `timeout_s` bounds every stage together (default: 120 s static,
    600 s with a GPU stage); `seed` None draws a fresh one. `run=True` without such a GPU gives a record with
    status "no_device". `worker` is the sandbox worker to fork from (default: the process-wide one).
    """
    return evaluate_isolated(path, EvalRequest.build(request, fields), worker=worker)


def evaluate_foreign(path: str | Path, entry: str, args: list[str], target: str, config: int | None = None,
                     dump_dir: str | Path | None = None, timeout_s: float | None = None) -> list[dict]:
    """Static evaluation of a non-contract file through its own host function: one record per autotune config.

    Malformed `--arg` texts raise `UsageError`; the file itself gets the foreign-file policy and runs in a
    sandboxed process (`evaluator.batch.score_file`, what `nearpeak eval FILE --entry` runs).
    """
    parse_args(args)
    return score_file(str(path), ScoreOptions(target=target, entry=entry, args=tuple(args), config=config,
                                              timeout_s=timeout_s or DEFAULT_FILE_TIMEOUT_S,
                                              dump_dir=str(dump_dir) if dump_dir else None))


def compare(candidate_path: str | Path, incumbent_path: str | Path, request: EvalRequest | None = None, *,
            worker: SandboxWorker | None = None, **fields) -> dict:
    """Interleaved A/B timing of two kernels on this machine's GPU, hardened like `evaluate`.

    Both kernels are timed at the request's objective shapes (the problem's, else the one `shape`, else the
    incumbent's benchmark shape: never the candidate's own declaration), under the problem's timing (eager
    per-call events or CUDA-graph replay), with the same instrumentation on both sides. Returns the
    comparison (speedup, ci_low, ci_high, accepted, method, samples, launch_bound, candidate_defenses). When a
    file is refused or the sandboxed process fails (timeout, crash, GPU fault, no GPU) the result has
    `accepted` False and an `error`.
    """
    return compare_isolated(candidate_path, incumbent_path, EvalRequest.build(request, fields), worker=worker)
