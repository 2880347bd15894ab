"""Scoring files as they come: each file in its own sandboxed process, many files in parallel.

`score_file` is the static scorer behind `nearpeak eval FILE`: a contract kernel, or any Gluon/Triton file
through `--entry`, compiled for its target in a fresh process under a wall-clock limit, so that a compiler
abort, a hang or a flood of output ends as a record (`crashed`, `timeout`, `output_flood`), never as the
end of the caller. The sandboxed stage itself is `evaluator.isolated.static_isolated`, the static half of
`evaluator.api.evaluate`: contract files pass the static policy first; foreign files are scored as their
authors wrote them, so they are held only to the policy's containment rules (no process control,
networking, FFI or reaching into the scorer: `check_policy(..., foreign=True)`). This module adds what a
command line wants on top: the file named as given, a note when `--target` overrides the file's TARGET.

`run_batch` scores many files with `jobs` of those processes at a time, hands each record over (and
appends it to a JSON Lines file) as soon as its file is done, and can skip files a previous run already
wrote. `summary_table` renders the end-of-batch overview.
"""
from __future__ import annotations

import glob
import json
import threading
from collections import Counter
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .contract import read_constant
from .errors import UsageError
from .isolated import static_isolated
from .report import pct, table
from .stages import base_record

SANDBOX_KIND = "a child forked per file from a warm sandbox worker (evaluator.sandbox.SandboxWorker)"
DEFAULT_FILE_TIMEOUT_S = 120.0   # one static evaluation: a cold compile of a large kernel takes seconds
GLOB_CHARS = "*?["
SKIPPED_NAMES = ("conftest.py",)  # pytest plumbing beside tutorial files, never a kernel


@dataclass(frozen=True)
class ScoreOptions:
    """How every file of one `nearpeak eval` is scored."""

    target: str | None = None          # None: each file's TARGET
    entry: str | None = None           # host function of foreign files; None: the kernel contract
    args: tuple[str, ...] = ()         # `--arg` texts for `entry`
    config: int | None = None          # one autotune config; None: all of them
    shape: tuple[int, int, int] | None = None
    knobs: dict = field(default_factory=dict)
    timeout_s: float = DEFAULT_FILE_TIMEOUT_S
    dump_dir: str | None = None


# ---------------------------------------------------------------------------------------------
# One file


def declared_target(path: str | Path) -> str | None:
    """The file's `TARGET = "..."` declaration, read without running it."""
    try:
        value = read_constant(path, "TARGET")
    except (OSError, UnicodeDecodeError):
        return None
    return value if isinstance(value, str) else None


def target_note(path: str | Path, target: str | None) -> str | None:
    """One sentence when `target` differs from the file's own TARGET, said before anything compiles."""
    declared = declared_target(path)
    if target and declared and declared != target:
        return (f"{path} declares TARGET {declared} but is compiled for {target} as asked: code written for "
                "one target's instructions and layouts usually fails to compile for another.")
    return None


def failure_record(path: str | None, target: str | None, status: str, message: str, **extra) -> dict:
    """A record for a request that never reached a file's evaluation (a usage error of the command line)."""
    return {**base_record(path, target), "file": path, "status": status, "message": message, **extra}


def score_file(path: str, options: ScoreOptions) -> list[dict]:
    """Static records of one file (one per autotune config) from a fresh sandboxed process
    (`evaluator.isolated.static_isolated`); never raises for anything the file does. `file` in each record is
    `path` as given."""
    resolved = Path(path).resolve()
    records = static_isolated(resolved, options.target or declared_target(resolved), entry=options.entry,
                              args=list(options.args), config=options.config, shape=options.shape,
                              knobs=dict(options.knobs) or None, dump_dir=options.dump_dir,
                              timeout_s=options.timeout_s)
    note = target_note(path, options.target) if resolved.is_file() else None
    for record in records:
        if record.get("file") == str(resolved):
            record["file"] = path
        if note:
            record["note"] = note
    return records


def sandboxed_seconds(record: dict) -> float:
    """Wall time of the sandboxed stages behind a record (0 when none ran, e.g. a policy refusal)."""
    return round(sum(stage.get("wall_s") or 0 for stage in record.get("sandbox") or []), 3)


# ---------------------------------------------------------------------------------------------
# Many files


def expand_paths(paths: Iterable[str]) -> list[str]:
    """Files named, kernel files under directories (recursively, sorted) and glob matches, each once, in order.

    A name or pattern that matches nothing is a usage error naming it.
    """
    found: list[str] = []
    for given in paths:
        if any(c in given for c in GLOB_CHARS):
            matches = sorted(glob.glob(given, recursive=True))
            files = [m for m in matches if Path(m).is_file() and _is_kernel_name(Path(m))]
            files += [str(f) for m in matches if Path(m).is_dir() for f in _kernel_files(Path(m))]
        elif Path(given).is_dir():
            files = [str(f) for f in _kernel_files(Path(given))]
        else:
            files = [given]  # a missing file is reported as its own record (not_found)
        if not files:
            raise UsageError(f"{given!r} matches no kernel file")
        found += files
    seen: set[Path] = set()
    unique = []
    for name in found:
        key = Path(name).resolve()
        if key not in seen:
            seen.add(key)
            unique.append(name)
    return unique


def _is_kernel_name(path: Path) -> bool:
    """Not a package marker, private helper or pytest plumbing (named explicitly, such files are still scored)."""
    return path.suffix == ".py" and not path.name.startswith("_") and path.name not in SKIPPED_NAMES


def _kernel_files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*.py") if "__pycache__" not in p.parts and _is_kernel_name(p))


def done_files(jsonl: str | Path) -> set[Path]:
    """Files that already have a record in a JSON Lines output (a torn last line is ignored)."""
    done: set[Path] = set()
    try:
        lines = Path(jsonl).read_text().splitlines()
    except FileNotFoundError:
        return done
    for line in lines:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("file"):
            done.add(Path(record["file"]).resolve())
    return done


def run_batch(paths: list[str], options: ScoreOptions, jobs: int = 1, jsonl: str | Path | None = None,
              resume: bool = False, on_file: Callable[[str, list[dict], int, int], None] | None = None) -> list[dict]:
    """Score `paths` with `jobs` sandboxed processes at a time; returns every record of this run.

    Each file's records are appended to `jsonl` (one line each, flushed) and passed to `on_file(path, records,
    done, total)` as soon as the file is done. With `resume`, files already in `jsonl` are skipped.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    if resume:
        if not jsonl:
            raise UsageError("--resume needs --jsonl (the file whose records say what is done)")
        done = done_files(jsonl)
        paths = [p for p in paths if Path(p).resolve() not in done]
    out = open(jsonl, "a") if jsonl else None  # noqa: SIM115 - held open for the whole batch
    lock = threading.Lock()
    records: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(score_file, p, options): p for p in paths}
        for finished, future in enumerate(as_completed(futures), 1):
            path = futures[future]
            file_records = future.result()
            with lock:
                records += file_records
                if out:
                    out.writelines(json.dumps(r, default=str) + "\n" for r in file_records)
                    out.flush()
            if on_file:
                on_file(path, file_records, finished, len(paths))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # interrupted: start no more files; running ones end
        if out:                                        # at their own limit at the latest
            out.close()
    return records


# ---------------------------------------------------------------------------------------------
# The overview at the end


def _label(record: dict) -> str:
    config = record.get("config")
    name = Path(str(record.get("file"))).name
    return f"{name}#{config['index']}" if config else name


def summary_table(records: list[dict], top: int = 5) -> str:
    """Status counts, the best files by estimated TFLOP/s (a static estimate), and the top register users."""
    counts = Counter(r.get("status") for r in records)
    ordered = sorted(counts.items(), key=lambda item: (item[0] != "ok", -item[1], str(item[0])))
    lines = [f"{len(records)} records: " + ", ".join(f"{s} {n}" for s, n in ordered)]
    ok = [r for r in records if r.get("status") == "ok" and r.get("static")]
    if not ok:
        return "\n".join(lines)
    by_tflops = any(r["static"].get("estimated_tflops") is not None for r in ok)
    key = "estimated_tflops" if by_tflops else "estimated_efficiency"
    ranked = sorted((r for r in ok if r["static"].get(key) is not None), key=lambda r: -r["static"][key])[:top]
    if ranked:
        title = ("best by estimated TFLOP/s (STATIC ESTIMATE)" if by_tflops else
                 "best by estimated matrix-unit efficiency (STATIC ESTIMATE; no estimated_tflops in these records)")
        lines += ["", title, table(
            [[_label(r), r.get("target"), r["static"].get("kernel"), r["static"].get("estimated_tflops"),
              pct(r["static"].get("estimated_efficiency")), r["static"].get("registers"), r["static"].get("spills")]
             for r in ranked],
            ["file", "target", "kernel", "est. TFLOP/s", "est. efficiency", "registers", "spills"])]
    heavy = sorted(ok, key=lambda r: -(r["static"].get("registers") or 0))[:top]
    lines += ["", "top register users", table(
        [[_label(r), r.get("target"), r["static"].get("kernel"), r["static"].get("registers"),
          r["static"].get("spills"), r["static"].get("occupancy")] for r in heavy],
        ["file", "target", "kernel", "registers", "spills", "occupancy"])]
    return "\n".join(lines)

