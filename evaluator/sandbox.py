"""Run one function in a fresh, disposable Python process and say plainly how it ended.

Why a process and not a thread: a hung GPU kernel, an infinite loop, a segfault or `os._exit` in a candidate
cannot be stopped or survived from inside the same interpreter (OpenEvolve's thread timeouts are the known
counter-example). Here the child is a new interpreter (`python -m evaluator.sandbox_child`), started in its own
session so that the whole process group, including anything it forked, is killed with SIGKILL on timeout and
again after it exits. It runs in a scratch directory with a minimal environment, optional rlimits, and its
output read by threads into bounded head/tail buffers, so endless printing neither blocks it nor fills memory.

The result comes back as JSON in a file carrying a one-time token that the child reads from its stdin; a
result without the token (say, one the candidate forged before calling `os._exit`) does not count. This is a
guard against accidents and reward-seeking shortcuts, not a security boundary: see docs/threat-model.md.
"""
from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]

VERDICTS = ("ok", "timeout", "crashed", "runtime_fault", "error", "output_flood")

DEFAULT_OUTPUT_KEEP = 16 * 1024           # bytes of head and of tail kept per stream
DEFAULT_FLOOD_BYTES = 32 * 1024 * 1024    # total bytes on one stream that count as an output flood

# Variables passed through from the caller's environment when set; everything else is dropped.
PASSTHROUGH_ENV = (
    "PATH", "LD_LIBRARY_PATH", "LANG", "LC_ALL",
    "CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_HOME", "CUDA_PATH",
    "ROCM_PATH", "HIP_PATH", "TRITON_HOME", "TRITON_PTXAS_PATH", "TRITON_CUOBJDUMP_PATH",
    "TRITON_NVDISASM_PATH", "TRITON_LIBCUDA_PATH",
)

# Text that means the GPU itself faulted (CUDA and HIP runtimes), as opposed to an ordinary Python error. The
# runtime stage classifies the exceptions it catches in-process by the same pattern.
GPU_FAULT_PATTERN = re.compile(
    r"illegal memory|illegal instruction|misaligned|launch failure"
    r"|device-side assert|CUDA error|cudaError|CUBLAS_STATUS|HIP error|hipError|Memory access fault"
    r"|HSA_STATUS_ERROR|GPU Hang|hardware exception", re.IGNORECASE)


@dataclass(frozen=True)
class IsolatedResult:
    """How one isolated call ended. `value` is the function's JSON result when `verdict == "ok"`."""

    verdict: str
    value: Any
    exit_code: int | None
    signal: int | None
    wall_s: float
    stdout_tail: str
    stderr_tail: str
    message: str | None

    @property
    def ok(self) -> bool:
        return self.verdict == "ok"


class _BoundedStream:
    """Drains one pipe in a thread, keeping the first and last `keep` bytes and counting the rest."""

    def __init__(self, pipe, keep: int, flood_bytes: int, on_flood):
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0
        self._pipe = pipe
        self._keep = keep
        self._flood_bytes = flood_bytes
        self._on_flood = on_flood
        self._thread = threading.Thread(target=self._drain, daemon=True)
        self._thread.start()

    def _drain(self) -> None:
        flooded = False
        while True:
            try:
                chunk = self._pipe.read1(65536)
            except (OSError, ValueError):
                return
            if not chunk:
                return
            self.total += len(chunk)
            room = self._keep - len(self.head)
            if room > 0:
                self.head += chunk[:room]
                chunk = chunk[room:]
            if chunk:
                self.tail = (self.tail + chunk)[-self._keep:]
            if not flooded and self.total > self._flood_bytes:
                flooded = True
                self._on_flood()

    def join(self, timeout: float) -> None:
        self._thread.join(timeout)

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def text(self) -> str:
        head = self.head.decode("utf-8", "replace")
        if not self.tail:
            return head
        skipped = self.total - len(self.head) - len(self.tail)
        gap = f"\n[... {skipped} bytes not kept ...]\n" if skipped > 0 else ""
        return head + gap + self.tail.decode("utf-8", "replace")


def child_environment(scratch: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The child's whole environment: a short allowlist, HOME and TMPDIR in scratch, Triton's cache kept."""
    env = {name: os.environ[name] for name in PASSTHROUGH_ENV if name in os.environ}
    env.setdefault("PATH", "/usr/bin:/bin")
    # HOME moves into scratch, so name the compile cache explicitly or every candidate recompiles from cold.
    env["TRITON_CACHE_DIR"] = os.environ.get("TRITON_CACHE_DIR") or str(Path.home() / ".triton" / "cache")
    env.update(HOME=str(scratch), TMPDIR=str(scratch), PYTHONPATH=str(PROJECT_ROOT),
               PYTHONDONTWRITEBYTECODE="1", PYTHONUNBUFFERED="1", PYTHONNOUSERSITE="1")
    env.update(extra or {})
    return env


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _wait_without_reaping(pid: int, deadline: float, stop: threading.Event) -> bool:
    """Poll until the child exits (True) or the deadline passes or `stop` is set (False).

    The child is left a zombie so its pid, which is also the process-group id, cannot be reused before the
    group is killed.
    """
    pause = 0.002
    while True:
        if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
            return True
        if stop.is_set() or time.monotonic() >= deadline:
            return False
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _read_result(path: Path, token: str) -> dict | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("token") != token:
        return None
    return data


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _fault_line(text: str) -> str | None:
    """The last output line that reads like a GPU fault, if any."""
    lines = [ln.strip() for ln in text.splitlines() if GPU_FAULT_PATTERN.search(ln)]
    return lines[-1][:500] if lines else None


def classify(result: dict | None, *, returncode: int, timed_out: bool, flooded: bool, stderr: str,
             timeout_s: float) -> tuple[str, Any, str | None]:
    """(verdict, value, message) from how the child ended; pure, so each rule is testable on its own."""
    if flooded:
        return "output_flood", None, "child flooded its output; process group killed"
    if timed_out:
        return "timeout", None, f"no result within {timeout_s:g} s; process group killed"
    if result is not None:
        if result.get("ok"):
            return "ok", result.get("value"), None
        text = f"{result.get('type', 'Exception')}: {result.get('message', '')}"
        if GPU_FAULT_PATTERN.search(text):
            return "runtime_fault", None, text
        return "error", None, text
    fault_line = _fault_line(stderr)
    if fault_line:
        return "runtime_fault", None, f"GPU fault reported on stderr: {fault_line}"
    if returncode < 0:
        return "crashed", None, f"killed by {_signal_name(-returncode)}"
    return "crashed", None, f"exited with code {returncode} without a result"


def run_isolated(func: str, kwargs: dict, *, timeout_s: float, memory_mb: int | None = None,
                 memory_rlimit: str = "as", env: dict | None = None, scratch_dir: str | None = None,
                 output_keep: int = DEFAULT_OUTPUT_KEEP, flood_bytes: int = DEFAULT_FLOOD_BYTES) -> IsolatedResult:
    """Call `module:function(**kwargs)` in a fresh interpreter; never raises for anything the callee does.

    `kwargs` and the return value travel as JSON. `memory_mb` caps the child's address space (`memory_rlimit`
    "as", RLIMIT_AS) or its data segment ("data", RLIMIT_DATA); leave it None for GPU work, since CUDA and
    ROCm reserve far more virtual address space than they use. `scratch_dir` (kept afterwards) replaces the
    fresh temporary directory (removed afterwards). `env` adds to the minimal environment.
    """
    if memory_rlimit not in ("as", "data"):
        raise ValueError(f"memory_rlimit must be 'as' or 'data', got {memory_rlimit!r}")
    own_scratch = scratch_dir is None
    scratch = Path(tempfile.mkdtemp(prefix="nearpeak-sandbox-") if own_scratch else scratch_dir).resolve()
    scratch.mkdir(parents=True, exist_ok=True)
    token = secrets.token_hex(16)
    result_path = scratch / f".result-{secrets.token_hex(8)}.json"
    spec_path = scratch / ".sandbox-spec.json"
    spec_path.write_text(json.dumps({"func": func, "kwargs": kwargs, "result_path": str(result_path),
                                     "memory_mb": memory_mb, "memory_rlimit": memory_rlimit}))
    started = time.monotonic()
    proc = subprocess.Popen(
        [sys.executable, "-m", "evaluator.sandbox_child", str(spec_path)],
        cwd=scratch, env=child_environment(scratch, env), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True, close_fds=True)
    stop = threading.Event()

    def on_flood() -> None:
        stop.set()
        _kill_group(proc.pid)

    streams = [_BoundedStream(pipe, output_keep, flood_bytes, on_flood) for pipe in (proc.stdout, proc.stderr)]
    try:
        proc.stdin.write(token.encode() + b"\n")
        proc.stdin.close()
    except OSError:
        pass  # the child died before reading its token; how it died is reported below
    exited = _wait_without_reaping(proc.pid, started + timeout_s, stop)
    flooded = stop.is_set()
    _kill_group(proc.pid)  # timeout, flood, or leftovers of a finished child: the whole group goes
    returncode = proc.wait()
    wall_s = time.monotonic() - started
    for stream, pipe in zip(streams, (proc.stdout, proc.stderr)):
        stream.join(timeout=2.0)
        if not stream.alive:  # else a process that escaped the group holds the pipe: closing would block
            pipe.close()
    stdout, stderr = (s.text() for s in streams)
    result = _read_result(result_path, token)
    verdict, value, message = classify(result, returncode=returncode, timed_out=not exited and not flooded,
                                       flooded=flooded, stderr=stderr, timeout_s=timeout_s)
    if own_scratch:
        shutil.rmtree(scratch, ignore_errors=True)
    return IsolatedResult(verdict=verdict, value=value, exit_code=returncode if returncode >= 0 else None,
                          signal=-returncode if returncode < 0 else None, wall_s=round(wall_s, 3),
                          stdout_tail=stdout, stderr_tail=stderr, message=message)
