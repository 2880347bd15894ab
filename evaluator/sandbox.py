"""Run one function in a fresh, disposable process and say plainly how it ended.

Why a process and not a thread: a hung GPU kernel, an infinite loop, a segfault or `os._exit` in a candidate
cannot be stopped or survived from inside the same interpreter (OpenEvolve's thread timeouts are the known
counter-example). Every call gets a new process that has never run anyone's code: a `SandboxWorker` (a warm
interpreter with torch, triton and the evaluator already imported, `evaluator.sandbox_child`) forks it on
request, so a call costs a fork instead of a two-second torch import. The child starts its own session so that
the whole process group, including anything it forked, is killed with SIGKILL on timeout and again after it
exits; it dies with the worker (`PR_SET_PDEATHSIG`) and with the caller (a watchdog pipe only the caller
holds open). It runs in a scratch directory with a minimal environment, optional rlimits, and its output read
by threads into bounded head/tail buffers, so endless printing neither blocks it nor fills memory.

The result comes back as JSON in a file carrying a one-time token that the child reads from its stdin; a
result without the token (say, one the candidate forged before calling `os._exit`) does not count. This is a
guard against accidents and reward-seeking shortcuts, not a security boundary: see docs/threat-model.md.
"""
from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PROJECT_ROOT = Path(__file__).resolve().parents[1]

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




# ---------------------------------------------------------------------------------------------
# The warm worker and one call through it

# Imported once by the worker, so a forked child starts with them loaded. A name missing here is only slower.
DEFAULT_PRELOAD = ("torch", "triton", "triton.experimental.gluon", "triton.experimental.gluon.language",
                   "triton.compiler.compiler", "triton.backends.amd.compiler", "triton.backends.nvidia.compiler",
                   "torch.utils._python_dispatch", "evaluator.stages", "evaluator.compile", "evaluator.contract",
                   "evaluator.static", "evaluator.provenance", "evaluator.foreign", "evaluator.targets.amd.static",
                   "evaluator.targets.nvidia.static", "evaluator.runtime.evaluate")
# Then called once, so children inherit their cached results: Triton's hash of its own sources and library
# (half a second per compile otherwise) and the target registry. Neither touches a GPU.
DEFAULT_WARMUP = ("triton.runtime.cache:triton_key", "evaluator.targets:all_targets")
WORKER_START_TIMEOUT_S = 180.0
KILL_GRACE_S = 10.0      # after a kill request, how long to wait for the worker to report the exit


class WorkerUnavailable(RuntimeError):
    """The worker process could not be started or died; the call did not run."""


class SandboxWorker:
    """A warm interpreter that forks one fresh, supervised child per call.

    Thread-safe: several threads may call `run` at once (each call has its own child, pipes and reply socket).
    The worker dies when this object is closed or its process exits, and takes its children with it. A forked
    copy of the caller (e.g. a `fork` process pool) does not share it: `run` there starts a worker of its own.
    """

    def __init__(self, preload: tuple[str, ...] = DEFAULT_PRELOAD, warmup: tuple[str, ...] | None = None):
        self.preload = tuple(preload)
        self.warmup = DEFAULT_WARMUP if warmup is None and preload == DEFAULT_PRELOAD else tuple(warmup or ())
        self._lock = threading.Lock()
        self._proc: subprocess.Popen | None = None
        self._control: socket.socket | None = None
        self._owner_pid: int | None = None
        self._root: Path | None = None

    # -- lifetime ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the worker now (else the first `run` does) and wait until its imports are done."""
        with self._lock:
            self._ensure_started()

    @property
    def pid(self) -> int | None:
        """The worker's process id while it runs in this process's service, else None."""
        return self._proc.pid if self._alive() else None

    def _alive(self) -> bool:
        return self._proc is not None and self._owner_pid == os.getpid() and self._proc.poll() is None

    def _ensure_started(self) -> None:
        if self._alive():
            return
        self._discard()
        root = Path(tempfile.mkdtemp(prefix="nearpeak-worker-"))
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        settings = json.dumps({"preload": list(self.preload), "warmup": list(self.warmup), "root": str(root)})
        log = (root / "worker.log").open("wb")
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "evaluator.sandbox_child", "--worker", str(theirs.fileno()), settings],
                cwd=root, env=child_environment(root), stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                pass_fds=(theirs.fileno(),), start_new_session=True, close_fds=True)
        finally:
            theirs.close()
            log.close()
        ours.settimeout(WORKER_START_TIMEOUT_S)
        try:
            ready = json.loads(ours.recv(65536) or b"{}")
        except (OSError, ValueError):
            ready = {}
        ours.settimeout(None)
        if not ready.get("ready"):
            proc.kill()
            proc.wait()
            text = (root / "worker.log").read_text(errors="replace")[-2000:]
            shutil.rmtree(root, ignore_errors=True)
            raise WorkerUnavailable(f"sandbox worker did not start: {text.strip() or 'no output'}")
        self._proc, self._control, self._owner_pid, self._root = proc, ours, os.getpid(), root

    def _discard(self) -> None:
        """Forget a dead worker (or one inherited through fork, which belongs to the parent process)."""
        if self._proc is not None and self._owner_pid == os.getpid():
            self._shutdown()
        self._proc = self._control = self._owner_pid = self._root = None

    def _shutdown(self) -> None:
        self._control.close()  # end of file: the worker kills what it still supervises and exits
        try:
            self._proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        shutil.rmtree(self._root, ignore_errors=True)

    def close(self) -> None:
        """Stop the worker and every child it still supervises."""
        with self._lock:
            self._discard()

    def __enter__(self) -> SandboxWorker:  # noqa: PYI034 - Self needs Python 3.11
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- one call ---------------------------------------------------------------------------------

    def _submit(self, request: dict, fds: list[int]) -> None:
        with self._lock:
            for attempt in (1, 2):
                self._ensure_started()
                try:
                    socket.send_fds(self._control, [json.dumps(request).encode()], fds)
                    return
                except OSError:
                    self._discard()  # the worker died between calls: start another once
                    if attempt == 2:
                        raise WorkerUnavailable("sandbox worker is gone") from None

    def run(self, func: str, kwargs: dict, *, timeout_s: float, memory_mb: int | None = None,
            memory_rlimit: str = "as", env: dict | None = None, scratch_dir: str | None = None,
            output_keep: int = DEFAULT_OUTPUT_KEEP, flood_bytes: int = DEFAULT_FLOOD_BYTES) -> IsolatedResult:
        """Call `module:function(**kwargs)` in a fresh child; see `run_isolated`."""
        if memory_rlimit not in ("as", "data"):
            raise ValueError(f"memory_rlimit must be 'as' or 'data', got {memory_rlimit!r}")
        own_scratch = scratch_dir is None
        if own_scratch:  # inside the worker's root, which the worker removes even if this process dies first
            try:
                with self._lock:
                    self._ensure_started()
                    root = self._root
            except WorkerUnavailable as exc:
                return IsolatedResult("crashed", None, None, None, 0.0, "", "", str(exc))
            scratch = Path(tempfile.mkdtemp(prefix="call-", dir=root)).resolve()
        else:
            scratch = Path(scratch_dir).resolve()
        scratch.mkdir(parents=True, exist_ok=True)
        try:
            return self._run_in(scratch, func, kwargs, timeout_s, memory_mb, memory_rlimit, env, output_keep,
                                flood_bytes)
        finally:
            if own_scratch:
                shutil.rmtree(scratch, ignore_errors=True)

    def _run_in(self, scratch: Path, func: str, kwargs: dict, timeout_s: float, memory_mb: int | None,
                memory_rlimit: str, env: dict | None, output_keep: int, flood_bytes: int) -> IsolatedResult:
        token = secrets.token_hex(16)
        result_path = scratch / f".result-{secrets.token_hex(8)}.json"
        spec_path = scratch / ".sandbox-spec.json"
        spec_path.write_text(json.dumps({"func": func, "kwargs": kwargs, "result_path": str(result_path),
                                         "memory_mb": memory_mb, "memory_rlimit": memory_rlimit}))
        request = {"spec_path": str(spec_path), "cwd": str(scratch), "env": child_environment(scratch, env)}
        stdin_r, stdin_w = os.pipe()
        stdout_r, stdout_w = os.pipe()
        stderr_r, stderr_w = os.pipe()
        watchdog_r, watchdog_w = os.pipe()  # only this process holds the write end: its death ends the child
        reply, reply_theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self._submit(request, [stdin_r, stdout_w, stderr_w, watchdog_r, reply_theirs.fileno()])
        except WorkerUnavailable as exc:
            for fd in (stdin_r, stdin_w, stdout_r, stdout_w, stderr_r, stderr_w, watchdog_r, watchdog_w):
                os.close(fd)
            reply.close()
            reply_theirs.close()
            return IsolatedResult("crashed", None, None, None, 0.0, "", "", str(exc))
        for fd in (stdin_r, stdout_w, stderr_w, watchdog_r):
            os.close(fd)
        reply_theirs.close()
        started = time.monotonic()
        try:
            return self._supervise(reply, stdin_w, stdout_r, stderr_r, token, result_path, started, timeout_s,
                                   output_keep, flood_bytes)
        finally:
            os.close(watchdog_w)
            reply.close()

    def _supervise(self, reply: socket.socket, stdin_w: int, stdout_r: int, stderr_r: int, token: str,
                   result_path: Path, started: float, timeout_s: float, output_keep: int,
                   flood_bytes: int) -> IsolatedResult:
        stop = threading.Event()
        send_lock = threading.Lock()

        def kill() -> None:
            with send_lock:
                try:
                    reply.send(b'{"kill": true}')
                except OSError:
                    pass

        def on_flood() -> None:
            stop.set()
            kill()

        pipes = [open(stdout_r, "rb"), open(stderr_r, "rb")]  # noqa: SIM115 - closed below
        streams = [_BoundedStream(pipe, output_keep, flood_bytes, on_flood) for pipe in pipes]
        pid = _receive(reply, None).get("pid")
        try:
            os.write(stdin_w, token.encode() + b"\n")
        except OSError:
            pass  # the child died before reading its token; how it died is reported below
        os.close(stdin_w)
        exit_message = _receive(reply, started + timeout_s)
        timed_out = exit_message is None and not stop.is_set()
        if exit_message is None:
            kill()
            exit_message = _receive(reply, time.monotonic() + KILL_GRACE_S)
        wall_s = time.monotonic() - started
        worker_lost = not exit_message or "exit" not in exit_message
        if worker_lost:  # the worker itself died: kill the group from here
            if pid:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
            returncode = -signal.SIGKILL
        else:
            returncode = int(exit_message["exit"])
        for stream, pipe in zip(streams, pipes):
            stream.join(timeout=2.0)
            if not stream.alive:  # else a process that escaped the group holds the pipe: closing would block
                pipe.close()
        stdout, stderr = (s.text() for s in streams)
        result = _read_result(result_path, token)
        verdict, value, message = classify(result, returncode=returncode, timed_out=timed_out,
                                           flooded=stop.is_set(), stderr=stderr, timeout_s=timeout_s)
        if worker_lost and verdict == "crashed":
            message = f"{message} (the sandbox worker stopped answering)"
        return IsolatedResult(verdict=verdict, value=value, exit_code=returncode if returncode >= 0 else None,
                              signal=-returncode if returncode < 0 else None, wall_s=round(wall_s, 3),
                              stdout_tail=stdout, stderr_tail=stderr, message=message)


def _receive(sock: socket.socket, deadline: float | None) -> dict | None:
    """The next message from the worker on `sock`: a dict, {} when the worker hung up, None at the deadline."""
    while True:
        wait = None if deadline is None else max(0.0, deadline - time.monotonic())
        readable, _, _ = select.select([sock], [], [], wait)
        if not readable:
            return None
        try:
            data = sock.recv(65536)
        except OSError:
            return {}
        return json.loads(data) if data else {}


_DEFAULT_LOCK = threading.Lock()
_DEFAULT: SandboxWorker | None = None


def default_worker() -> SandboxWorker:
    """The process-wide worker `run_isolated` uses (started on first use, stopped at exit)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = SandboxWorker()
            atexit.register(_DEFAULT.close)
        return _DEFAULT


def run_isolated(func: str, kwargs: dict, *, timeout_s: float, memory_mb: int | None = None,
                 memory_rlimit: str = "as", env: dict | None = None, scratch_dir: str | None = None,
                 output_keep: int = DEFAULT_OUTPUT_KEEP, flood_bytes: int = DEFAULT_FLOOD_BYTES,
                 worker: SandboxWorker | None = None) -> IsolatedResult:
    """Call `module:function(**kwargs)` in a fresh child process; never raises for anything the callee does.

    `kwargs` and the return value travel as JSON. `timeout_s` is wall-clock from the fork. `memory_mb` caps the
    child's address space (`memory_rlimit` "as", RLIMIT_AS) or its data segment ("data", RLIMIT_DATA); leave it
    None for GPU work, since CUDA and ROCm reserve far more virtual address space than they use. `scratch_dir`
    (kept afterwards) replaces the fresh temporary directory (removed afterwards). `env` adds to the minimal
    environment. `worker` defaults to the process-wide `default_worker()`.
    """
    return (worker or default_worker()).run(func, kwargs, timeout_s=timeout_s, memory_mb=memory_mb,
                                            memory_rlimit=memory_rlimit, env=env, scratch_dir=scratch_dir,
                                            output_keep=output_keep, flood_bytes=flood_bytes)
