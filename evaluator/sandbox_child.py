"""Child side of `evaluator.sandbox.run_isolated`: `python -m evaluator.sandbox_child SPEC.json`.

Reads its one-time token from stdin, applies the resource limits to itself before importing anything of the
candidate's, calls the requested function and writes `{"token", "ok", "value" | "type", "message"}` to the
result file (atomically, so a kill mid-write leaves no half result). It then leaves with `os._exit(0)`:
interpreter teardown runs foreign atexit hooks and GPU runtime destructors, none of which may change a
result that has already been written.
"""
from __future__ import annotations

import importlib
import json
import os
import resource
import sys
import traceback
from pathlib import Path
from typing import Any

_TRACEBACK_CHARS = 4000


def _apply_limits(memory_mb: int | None, memory_rlimit: str) -> None:
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))  # a segfaulting candidate must not write a core file
    if memory_mb:
        kind = resource.RLIMIT_AS if memory_rlimit == "as" else resource.RLIMIT_DATA
        limit = int(memory_mb) * 1024 * 1024
        resource.setrlimit(kind, (limit, limit))


def _resolve(func: str):
    module_name, _, attr = func.partition(":")
    if not module_name or not attr:
        raise ValueError(f"func must be 'module:function', got {func!r}")
    target: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        target = getattr(target, part)
    return target


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item") and callable(value.item):  # numpy and torch scalars
        return value.item()
    if isinstance(value, (set, frozenset)):
        return sorted(value)
    return str(value)  # dtypes, devices, paths: their text is what a record wants


def _write(path: Path, payload: dict) -> None:
    partial = path.with_suffix(".partial")
    partial.write_text(json.dumps(payload, default=_jsonable))
    os.replace(partial, path)


def main(argv: list[str]) -> None:
    token = sys.stdin.readline().strip()
    spec = json.loads(Path(argv[1]).read_text())
    result_path = Path(spec["result_path"])
    _apply_limits(spec.get("memory_mb"), spec.get("memory_rlimit", "as"))
    try:
        value = _resolve(spec["func"])(**spec["kwargs"])
        payload = {"token": token, "ok": True, "value": value}
        json.dumps(payload, default=_jsonable)  # fail here (e.g. a cycle), as the callee's error, not mid-write
    except BaseException as exc:  # noqa: BLE001 - whatever the callee raises is its verdict, not ours
        payload = {"token": token, "ok": False, "type": type(exc).__name__, "message": str(exc)[:_TRACEBACK_CHARS],
                   "traceback": traceback.format_exc()[-_TRACEBACK_CHARS:]}
        traceback.print_exc()
    _write(result_path, payload)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main(sys.argv)
