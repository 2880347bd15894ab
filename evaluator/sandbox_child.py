"""Child side of `evaluator.sandbox`: the warm worker (`python -m evaluator.sandbox_child --worker FD`) and the
fresh process it forks for every sandboxed call.

The worker imports torch, triton and the evaluator once, then waits on a control socket. For each request it
forks a child that has never run anyone's code; the child leaves the worker's session (`setsid`, so the
caller can kill its whole process group), asks the kernel to kill it when the worker dies
(`PR_SET_PDEATHSIG`), takes the caller's pipes as stdin/stdout/stderr, moves into its scratch directory with
the caller's environment, applies its resource limits, and starts a watchdog thread that kills the child's
whole group as soon as the caller's end of a pipe closes (the caller died, even by `kill -9`). Only then does
it read its one-time token from stdin, call the requested function and write
`{"token", "ok", "value" | "type", "message"}` to the result file (atomically, so a kill mid-write leaves no
half result). It leaves with `os._exit(0)`: interpreter teardown runs foreign atexit hooks and GPU runtime
destructors, none of which may change a result that has already been written.

The worker never runs requested code itself. It reaps its children, killing each one's process group before
reaping (so leftovers die and the group id cannot be reused meanwhile), reports the exit status on the
request's own reply socket, and kills a child's group when the caller asks (timeout, output flood) or hangs
up. When the control socket closes (the caller exited or died) it kills every group it still supervises,
removes its scratch root and exits.
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import resource
import select
import shutil
import signal
import socket
import sys
import threading
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TRACEBACK_CHARS = 4000
_PR_SET_PDEATHSIG = 1
WATCHDOG_FD = 3           # the child's read end of the caller's watchdog pipe
REQUEST_FDS = 5           # stdin, stdout, stderr, watchdog, reply socket
MESSAGE_BYTES = 1 << 16


# ---------------------------------------------------------------------------------------------
# The forked child


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


def _die_with_parent(parent_pid: int) -> None:
    """Ask the kernel for SIGKILL when the worker dies; if it already has, go now."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the watchdog pipe still ends the child with its caller
    if os.getppid() != parent_pid:
        os._exit(1)


def _watchdog(fd: int) -> None:
    """Block on the caller's watchdog pipe; end of file means the caller is gone: kill this whole group."""
    try:
        while os.read(fd, 64):
            pass
    except OSError:
        pass
    os.killpg(0, signal.SIGKILL)


def call_and_report(spec: dict) -> None:
    """Read the token, call the function, write the result file; never returns."""
    token = sys.stdin.readline().strip()
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


def _become_child(request: dict, fds: list[int], parent_pid: int) -> None:
    """In the freshly forked process: isolate, take the caller's pipes, then run the request."""
    os.setsid()
    _die_with_parent(parent_pid)
    signal.set_wakeup_fd(-1)
    for signum in (signal.SIGCHLD, signal.SIGINT, signal.SIGTERM, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_DFL)
    stdin_r, stdout_w, stderr_w, watchdog_r, _reply = fds
    for src, dst in ((stdin_r, 0), (stdout_w, 1), (stderr_w, 2), (watchdog_r, WATCHDOG_FD)):
        os.dup2(src, dst)
    os.closerange(WATCHDOG_FD + 1, os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 4096)
    sys.stdin = open(0, "r", closefd=False)  # noqa: SIM115 - fd 0 is now the caller's token pipe
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    threading.Thread(target=_watchdog, args=(WATCHDOG_FD,), daemon=True).start()
    spec = json.loads(Path(request["spec_path"]).read_text())
    call_and_report(spec)


# ---------------------------------------------------------------------------------------------
# The worker


@dataclass
class _Child:
    reply: socket.socket
    hung_up: bool = False


def _send(sock: socket.socket, payload: dict) -> None:
    try:
        sock.send(json.dumps(payload).encode())
    except OSError:
        pass  # the caller hung up; it will learn nothing more about this child


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class Worker:
    """The forking server: one control socket in, one forked child per request."""

    def __init__(self, control: socket.socket, root: Path | None):
        self.control = control
        self.root = root
        self.children: dict[int, _Child] = {}
        self.wake_r, wake_w = os.pipe()
        os.set_blocking(self.wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so the wakeup fd sees SIGCHLD
        signal.signal(signal.SIGINT, signal.SIG_IGN)    # the caller decides when we stop

    def spawn(self, request: dict, fds: list[int]) -> None:
        if len(fds) != REQUEST_FDS:
            for fd in fds:
                os.close(fd)
            return
        parent_pid = os.getpid()
        pid = os.fork()
        if pid == 0:
            try:
                _become_child(request, fds, parent_pid)
            finally:
                os._exit(70)
        for fd in fds[:-1]:
            os.close(fd)
        child = _Child(socket.socket(fileno=fds[-1]))
        self.children[pid] = child
        _send(child.reply, {"pid": pid})

    def reap(self) -> None:
        """Kill the group of every child that exited, then reap it and report its status."""
        for pid, child in list(self.children.items()):
            if os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
                continue
            _kill_group(pid)  # leftovers of a finished child go with it, before its group id is freed
            _, status = os.waitpid(pid, 0)
            _send(child.reply, {"exit": os.waitstatus_to_exitcode(status)})
            child.reply.close()
            del self.children[pid]

    def on_reply(self, pid: int) -> None:
        """The caller wrote on a request's socket: a kill request, or it hung up; either way the group dies."""
        child = self.children[pid]
        try:
            child.hung_up = not child.reply.recv(MESSAGE_BYTES)
        except OSError:
            child.hung_up = True
        _kill_group(pid)

    def serve(self) -> None:
        _send(self.control, {"ready": True, "pid": os.getpid()})
        while True:
            by_fd = {c.reply.fileno(): pid for pid, c in self.children.items() if not c.hung_up}
            readable, _, _ = select.select([self.control, self.wake_r, *by_fd], [], [])
            if self.wake_r in readable:
                while True:
                    try:
                        if not os.read(self.wake_r, 512):
                            break
                    except BlockingIOError:
                        break
            self.reap()
            for fd in readable:
                if fd in by_fd and by_fd[fd] in self.children:
                    self.on_reply(by_fd[fd])
            if self.control in readable:
                message, fds, _, _ = socket.recv_fds(self.control, MESSAGE_BYTES, REQUEST_FDS)
                if not message:
                    return self.shutdown()
                self.spawn(json.loads(message), fds)

    def shutdown(self) -> None:
        for pid in list(self.children):
            _kill_group(pid)
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass
        if self.root is not None:
            shutil.rmtree(self.root, ignore_errors=True)


def _warm(warmup: list[str]) -> None:
    for func in warmup:  # cached results every child inherits
        try:
            _resolve(func)()
        except Exception as exc:  # noqa: BLE001
            print(f"warm-up {func} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)


def worker_main(control_fd: int, preload: list[str], warmup: list[str], root: str | None) -> None:
    # The warm-ups (mostly hashing files, which releases the GIL) run beside the imports on a second core; the
    # thread is joined before the first fork, so every child starts from a single-threaded worker.
    warming = threading.Thread(target=_warm, args=(warmup,), daemon=True)
    warming.start()
    for name in preload:  # warm imports; a module that fails here is imported (and fails) in the child instead
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001
            print(f"preload of {name} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
    warming.join()
    Worker(socket.socket(fileno=control_fd), Path(root) if root else None).serve()


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "--worker":
        settings = json.loads(sys.argv[3]) if len(sys.argv) > 3 else {}
        worker_main(int(sys.argv[2]), settings.get("preload", []), settings.get("warmup", []), settings.get("root"))
    else:
        sys.exit("usage: python -m evaluator.sandbox_child --worker FD [SETTINGS_JSON]")
