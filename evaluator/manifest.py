"""The batch manifest: per-file entry, arguments, target, import folders and environment of foreign files.

A folder of other people's files cannot share one `--entry`/`--arg` set. A manifest beside them
(`nearpeak-manifest.toml` or `nearpeak-manifest.json` in a directory given to `nearpeak eval`) or named with
`--manifest FILE` says, per file, how to call it; its top-level keys are defaults for every file it names
and for the files it does not:

    target = "sm90"
    [files."python/tutorials/gluon/05-wgmma.py"]
    entry = "blocked_mma"
    args = ["A=4096x4096:fp16", "B=4096x4096:fp16", "C=4096x4096:fp32", "BLOCK_M=128", ...]
    path = ["../utils"]                    # import folders, relative to the manifest's folder
    env = { TILE_MNK = "256,256,64" }
    [files."README.py"]
    skip = "not a kernel"                  # reported as skipped, with the reason

File keys are paths relative to the manifest's folder. Unknown keys and files the manifest names that do not
exist are usage errors, so a typo is not silently a default.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .errors import UsageError

MANIFEST_NAMES = ("nearpeak-manifest.toml", "nearpeak-manifest.json")
KEYS = frozenset({"entry", "args", "target", "config", "path", "env", "skip", "timeout"})


@dataclass(frozen=True)
class FileEntry:
    """How to score one file (or, as defaults, every file): each field None/empty when not given."""

    entry: str | None = None
    args: tuple[str, ...] | None = None
    target: str | None = None
    config: int | None = None
    import_paths: tuple[str, ...] = ()      # absolute
    env: dict = field(default_factory=dict)
    skip: str | None = None
    timeout_s: float | None = None


@dataclass(frozen=True)
class Manifest:
    path: Path
    defaults: FileEntry
    files: dict[Path, FileEntry]            # by resolved path

    def entry_for(self, file: str | Path) -> FileEntry:
        """The file's own entry over the defaults (the defaults alone for a file it does not name)."""
        own = self.files.get(Path(file).resolve())
        if own is None:
            return self.defaults
        base = self.defaults
        return FileEntry(entry=own.entry or base.entry, args=own.args if own.args is not None else base.args,
                         target=own.target or base.target,
                         config=own.config if own.config is not None else base.config,
                         import_paths=own.import_paths + tuple(p for p in base.import_paths
                                                               if p not in own.import_paths),
                         env={**base.env, **own.env}, skip=own.skip, timeout_s=own.timeout_s or base.timeout_s)


def find_manifest(folder: str | Path) -> Path | None:
    """The manifest in `folder`, if it has one."""
    for name in MANIFEST_NAMES:
        candidate = Path(folder) / name
        if candidate.is_file():
            return candidate
    return None


def _load(path: Path) -> dict:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise UsageError(f"manifest {path}: not valid JSON: {exc}") from None
    else:
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            raise UsageError(f"manifest {path}: TOML needs Python 3.11; write it as JSON "
                             "(nearpeak-manifest.json)") from None
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"manifest {path}: not valid TOML: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"manifest {path}: expected a table of settings and [files.\"NAME\"] tables")
    return data


def _entry(data: dict, where: str, folder: Path) -> FileEntry:
    unknown = sorted(set(data) - KEYS)
    if unknown:
        raise UsageError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(KEYS))}")

    def strings(key: str) -> tuple[str, ...] | None:
        value = data.get(key)
        if value is None:
            return None
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise UsageError(f"{where}: {key} must be a list of strings")
        return tuple(value)

    env = data.get("env") or {}
    if not isinstance(env, dict) or not all(isinstance(k, str) for k in env):
        raise UsageError(f"{where}: env must be a table of NAME = \"VALUE\"")
    config = data.get("config")
    if config is not None and (not isinstance(config, int) or config < 0):
        raise UsageError(f"{where}: config must be a config index (0, 1, ...)")
    for key in ("entry", "target", "skip"):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise UsageError(f"{where}: {key} must be a string")
    timeout = data.get("timeout")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise UsageError(f"{where}: timeout must be a positive number of seconds")
    return FileEntry(entry=data.get("entry"), args=strings("args"), target=data.get("target"), config=config,
                     import_paths=tuple(str((folder / p).resolve()) for p in strings("path") or ()),
                     env={k: str(v) for k, v in env.items()}, skip=data.get("skip"),
                     timeout_s=float(timeout) if timeout else None)


def read_manifest(path: str | Path) -> Manifest:
    """Read and check a manifest; every mistake in it is a usage error naming the manifest."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"--manifest {path}: no such file")
    data = _load(path)
    folder = path.resolve().parent
    files = data.pop("files", {}) or {}
    if not isinstance(files, dict):
        raise UsageError(f"manifest {path}: files must be a table of [files.\"NAME\"] entries")
    defaults = _entry(data, f"manifest {path}", folder)
    entries = {}
    for name, settings in files.items():
        where = f"manifest {path}, files.{name!r}"
        if not isinstance(settings, dict):
            raise UsageError(f"{where}: expected a table of settings")
        file = (folder / name).resolve()
        if not file.is_file():
            raise UsageError(f"{where}: no such file {file}")
        entries[file] = _entry(settings, where, folder)
    return Manifest(path=path.resolve(), defaults=defaults, files=entries)
