"""Scoring files as they come: each file in its own sandboxed process, many files in parallel.

`score_file` is the static scorer behind `nearpeak eval FILE`: a contract kernel, or any Gluon/Triton file
through `--entry`, compiled for its target in a fresh process under a wall-clock limit, so that a compiler
abort, a hang or a flood of output ends as a record (`crashed`, `timeout`, `output_flood`), never as the
end of the caller. The sandboxed stage itself is `evaluator.isolated.static_isolated`, the static half of
`evaluator.api.evaluate`: contract files pass the static policy first; foreign files are scored as their
authors wrote them, so they are held only to the policy's containment rules (no process control,
networking, FFI or reaching into the scorer: `check_policy(..., foreign=True)`). This module adds what a
command line wants on top: the file named as given, a note when `--target` overrides the file's TARGET.

`plan_batch` turns the paths of a command line into `BatchFile`s: each file with its label (its path relative
to the directory it was found under), its own `ScoreOptions` (from a manifest, `evaluator.manifest`, or an
entry guessed when a file without the contract has exactly one host function that launches a kernel), or the
reason it is not scored (a non-Python file, a manifest `skip`). `run_batch` scores many files with `jobs` of
those processes at a time, hands each record over (and appends it to a JSON Lines file) as soon as its file is
done, and can skip files a previous run already wrote. `summary_table` renders the end-of-batch overview,
every failure with its line and reason.
"""
from __future__ import annotations

import ast
import dataclasses
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
from .foreign import guess_entry
from .isolated import static_isolated
from .manifest import MANIFEST_NAMES, FileEntry, Manifest, find_manifest, read_manifest
from .report import batch_failures, batch_registers, pct, table
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
    import_paths: tuple[str, ...] = ()  # `--path` folders a foreign file imports from
    env: dict = field(default_factory=dict)  # `--env` variables a foreign file reads
    manifest: str | None = None        # `--manifest`: per-file entry and arguments of a batch
    entry_note: str | None = None      # how the entry was chosen, when nobody named it

    def for_file(self, entry: FileEntry) -> ScoreOptions:
        """These options with a manifest entry's settings over them (command-line --arg only when it has none)."""
        return dataclasses.replace(
            self, entry=entry.entry or self.entry, args=entry.args if entry.args is not None else self.args,
            target=entry.target or self.target, config=entry.config if entry.config is not None else self.config,
            import_paths=tuple(self.import_paths) + entry.import_paths, env={**self.env, **entry.env},
            timeout_s=entry.timeout_s or self.timeout_s)


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
                              timeout_s=options.timeout_s, import_paths=options.import_paths,
                              env=dict(options.env) or None)
    note = target_note(path, options.target) if resolved.is_file() else None
    for record in records:
        if record.get("file") == str(resolved):
            record["file"] = path
        if note:
            record["note"] = note
        if options.entry_note:
            record["entry_note"] = options.entry_note
    return records


def sandboxed_seconds(record: dict) -> float:
    """Wall time of the sandboxed stages behind a record (0 when none ran, e.g. a policy refusal)."""
    return round(sum(stage.get("wall_s") or 0 for stage in record.get("sandbox") or []), 3)


# ---------------------------------------------------------------------------------------------
# Many files


@dataclass(frozen=True)
class BatchFile:
    """One file of a batch: how it is named in the table, how it is scored, or why it is not."""

    path: str                          # as given, or as found under a directory given
    label: str                         # relative to that directory (as given for files named directly)
    options: ScoreOptions
    skipped: str | None = None         # why it is not scored: not a Python file, the manifest says so
    failed: str | None = None          # why it cannot be called: no entry named and several candidates

    def unscored_record(self) -> dict | None:
        """The record of a file that is not run (skipped or failed before it could be), else None."""
        if self.skipped:
            return {**failure_record(self.path, self.options.target, "skipped", self.skipped), "label": self.label}
        if self.failed:
            return {**failure_record(self.path, self.options.target, "call_error", self.failed), "label": self.label}
        return None


def _found(given: str) -> list[tuple[str, str]]:
    """(file, label) pairs for one path, directory or glob of the command line."""
    if any(c in given for c in GLOB_CHARS):
        matches = sorted(glob.glob(given, recursive=True))
        found = [(m, m) for m in matches if Path(m).is_file() and _is_kernel_name(Path(m))]
        for folder in (Path(m) for m in matches if Path(m).is_dir()):
            found += [(str(f), str(f.relative_to(folder))) for f in _folder_files(folder)]
        return found
    if Path(given).is_dir():
        return [(str(f), str(f.relative_to(given))) for f in _folder_files(Path(given))]
    return [(given, given)]  # a missing file is reported as its own record (not_found)


def _folder_files(folder: Path) -> list[Path]:
    """Every file under `folder` but caches, hidden files and manifests: the ones not scored are reported."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not any(part.startswith(".") for part in p.relative_to(folder).parts)
                  and p.name not in MANIFEST_NAMES)


def _skip_reason(path: Path) -> str | None:
    if path.suffix != ".py":
        return f"not scored: not a Python file ({path.suffix or 'no suffix'})"
    if path.name in SKIPPED_NAMES:
        return "not scored: pytest plumbing (conftest.py), never a kernel"
    if path.name.startswith("_"):
        return "not scored: a private helper or package marker (name it directly to score it)"
    return None


def _has_launch(path: Path) -> bool:
    """Whether the file defines the contract's module-level `launch` (read, not run)."""
    try:
        tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
    except (OSError, SyntaxError):
        return True  # let the contract path report it
    return any(isinstance(n, ast.FunctionDef) and n.name == "launch" for n in tree.body)


def _manifests(paths: Iterable[str], options: ScoreOptions) -> list[Manifest]:
    named = [read_manifest(options.manifest)] if options.manifest else []
    beside = [find_manifest(p) for p in paths if Path(p).is_dir()]
    return named + [read_manifest(m) for m in beside if m]


def plan_batch(paths: Iterable[str], options: ScoreOptions) -> list[BatchFile]:
    """Every file the paths name, each once and in order, with its label and its own options.

    A name or pattern that matches nothing is a usage error naming it. Files found under a directory that are
    not scored (non-Python files, pytest plumbing) are kept with the reason, so the table can say so.
    """
    paths = list(paths)
    manifests = _manifests(paths, options)
    planned: list[BatchFile] = []
    seen: set[Path] = set()
    for given in paths:
        found = _found(given)
        if not any(f.endswith(".py") for f, _ in found) and not (found and Path(given).is_file()):
            raise UsageError(f"{given!r} matches no kernel file")
        for name, label in found:
            key = Path(name).resolve()
            if key in seen:
                continue
            seen.add(key)
            planned.append(_plan_file(name, label, options, manifests, named=name == given))
    return planned


def _plan_file(name: str, label: str, options: ScoreOptions, manifests: list[Manifest], named: bool) -> BatchFile:
    path = Path(name)
    resolved = path.resolve()
    manifest = next((m for m in manifests if resolved in m.files), manifests[0] if manifests else None)
    entry = manifest.entry_for(path) if manifest else FileEntry()
    file_options = options.for_file(entry)
    if entry.skip:
        return BatchFile(name, label, file_options, skipped=f"not scored: {entry.skip} (manifest)")
    reason = None if named else _skip_reason(path)
    if reason:
        return BatchFile(name, label, file_options, skipped=reason)
    if file_options.entry is None and path.is_file() and not _has_launch(path):
        guessed, why = guess_entry(path)
        if guessed:
            file_options = dataclasses.replace(file_options, entry=guessed, entry_note=f"entry guessed: {why}")
        elif "host functions launch" in why:  # several candidates: say which, rather than a contract error
            return BatchFile(name, label, file_options, failed=why)
    return BatchFile(name, label, file_options)


def expand_paths(paths: Iterable[str]) -> list[str]:
    """The files `plan_batch` would score (directories recursively, sorted; globs), each once, in order."""
    return [f.path for f in plan_batch(paths, ScoreOptions()) if f.skipped is None]


def _is_kernel_name(path: Path) -> bool:
    """Not a package marker, private helper or pytest plumbing (named explicitly, such files are still scored)."""
    return path.suffix == ".py" and not path.name.startswith("_") and path.name not in SKIPPED_NAMES


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


def run_batch(files: list[BatchFile | str], options: ScoreOptions, jobs: int = 1, jsonl: str | Path | None = None,
              resume: bool = False, on_file: Callable[[str, list[dict], int, int], None] | None = None) -> list[dict]:
    """Score `files` (from `plan_batch`; plain paths are scored with `options`) with `jobs` sandboxed processes at
    a time; returns every record of this run, skipped files' included.

    Each file's records are appended to `jsonl` (one line each, flushed) and passed to `on_file(path, records,
    done, total)` as soon as the file is done. With `resume`, files already in `jsonl` are skipped.
    """
    if jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {jobs}")
    planned = [f if isinstance(f, BatchFile) else BatchFile(f, f, options) for f in files]
    if resume:
        if not jsonl:
            raise UsageError("--resume needs --jsonl (the file whose records say what is done)")
        done = done_files(jsonl)
        planned = [f for f in planned if Path(f.path).resolve() not in done]
    out = open(jsonl, "a") if jsonl else None  # noqa: SIM115 - held open for the whole batch
    lock = threading.Lock()
    records: list[dict] = []
    pool = ThreadPoolExecutor(max_workers=jobs)
    try:
        futures = {pool.submit(_score_planned, f): f for f in planned}
        for finished, future in enumerate(as_completed(futures), 1):
            path = futures[future].path
            file_records = future.result()
            with lock:
                records += file_records
                if out:
                    out.writelines(json.dumps(r, default=str) + "\n" for r in file_records)
                    out.flush()
            if on_file:
                on_file(path, file_records, finished, len(planned))
    finally:
        pool.shutdown(wait=True, cancel_futures=True)  # interrupted: start no more files; running ones end
        if out:                                        # at their own limit at the latest
            out.close()
    return records


def _score_planned(planned: BatchFile) -> list[dict]:
    unscored = planned.unscored_record()
    if unscored:
        return [unscored]
    records = score_file(planned.path, planned.options)
    for record in records:
        record["label"] = planned.label
    return records


# ---------------------------------------------------------------------------------------------
# The overview at the end


def _label(record: dict) -> str:
    config = record.get("config")
    name = record.get("label") or str(record.get("file"))
    return f"{name}#{config['index']}" if config else name


EFFICIENCY_NOTE = ("est. loop eff.: STATIC ESTIMATE of the matrix unit's busy fraction over one hot-loop iteration "
                   "of one CTA (matrix cycles / estimated cycles per iteration), not a fraction of the GPU's peak; "
                   "est. TFLOP/s: STATIC ESTIMATE of the whole kernel at its grid")
REGISTERS_NOTE = ("registers/thread: compiler output, per thread (NVIDIA) or per lane of a wave (AMD, where it adds "
                  "arch VGPRs and AGPRs)")


def summary_table(records: list[dict], top: int = 5) -> str:
    """Status counts, every failure with its line and reason, the files not scored and why, the best files by
    estimated TFLOP/s (a static estimate), and the top register users."""
    counts = Counter(r.get("status") for r in records)
    ordered = sorted(counts.items(), key=lambda item: (item[0] != "ok", -item[1], str(item[0])))
    lines = [f"{len(records)} records: " + ", ".join(f"{s} {n}" for s, n in ordered)]
    failed = [r for r in records if r.get("status") not in ("ok", "skipped")]
    skipped = [r for r in records if r.get("status") == "skipped"]
    if failed:
        lines += ["", f"failures ({len(failed)})", *batch_failures(failed, _label)]
    if skipped:
        lines += ["", f"not scored ({len(skipped)})", *(f"  {_label(r)}: {r.get('message')}" for r in skipped)]
    ok = [r for r in records if r.get("status") == "ok" and r.get("static")]
    if not ok:
        return "\n".join(lines)
    by_tflops = any(r["static"].get("estimated_tflops") is not None for r in ok)
    key = "estimated_tflops" if by_tflops else "estimated_efficiency"
    ranked = sorted((r for r in ok if r["static"].get(key) is not None), key=lambda r: -r["static"][key])[:top]
    if ranked:
        title = ("best by estimated TFLOP/s (STATIC ESTIMATE)" if by_tflops else
                 "best by estimated hot-loop efficiency (STATIC ESTIMATE; no estimated_tflops in these records)")
        lines += ["", title, table(
            [[_label(r), r.get("target"), r["static"].get("kernel"), r["static"].get("estimated_tflops"),
              pct(r["static"].get("estimated_efficiency")), batch_registers(r["static"]), r["static"].get("spills")]
             for r in ranked],
            ["file", "target", "kernel", "est. TFLOP/s", "est. loop eff.", "registers/thread", "spills"]),
            EFFICIENCY_NOTE]
    heavy = sorted(ok, key=lambda r: -(r["static"].get("registers") or 0))[:top]
    lines += ["", "top register users", table(
        [[_label(r), r.get("target"), r["static"].get("kernel"), batch_registers(r["static"]),
          r["static"].get("spills"), r["static"].get("occupancy")] for r in heavy],
        ["file", "target", "kernel", "registers/thread", "spills", "occupancy"]), REGISTERS_NOTE]
    return "\n".join(lines)
