"""What a foreign file may do while it runs: watched through Python's audit hooks, refused at its own line.

A foreign file (scored through `--entry`, as its authors wrote it) is not held to the candidate policy's
name lists: tutorials import `os`, `pytest` and `argparse`, and name `triton._C` in a branch that only runs on
a GPU. What counts is what the file does. While it is imported and its entry runs, a `Watch` sees every
audit event CPython raises for starting or signalling processes, opening network connections and loading or
calling native code through `ctypes`. Such an event is refused (the operation never happens) when the code
that asked for it is the file's own or lives in one of its import folders (its own folder, `--path`): the
stack is walked from the event outwards and the first frame that is either Triton's or the evaluator's
(compiling a kernel runs `ptxas`, which is allowed) or the file's decides. Library code in between (torch,
the standard library) decides nothing, so `torch.utils.cpp_extension.load` called from the file is refused
too. The refusal is remembered even when the file catches the exception, and becomes the record's
`policy_violation` with rule `process_network_ffi` and the file's line.

Audit hooks cannot be removed, so the hook is installed once per process and acts only while a watch is
active: in the sandboxed child that scores the file, which is discarded afterwards.
"""
from __future__ import annotations

import contextlib
import linecache
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .errors import NearpeakError
from .policy import Violation

RULE = "process_network_ffi"

# CPython audit events (docs.python.org/3/library/audit_events.html) and what each means for a reader.
REFUSED_EVENTS: dict[str, str] = {
    **dict.fromkeys(("subprocess.Popen", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
                     "os.forkpty", "pty.spawn", "os.startfile"), "starts a process"),
    **dict.fromkeys(("os.kill", "os.killpg"), "signals a process"),
    **dict.fromkeys(("socket.connect", "socket.bind", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo",
                     "socket.gethostbyname", "urllib.Request"), "reaches the network"),
    **dict.fromkeys(("ctypes.dlopen", "ctypes.dlsym", "ctypes.call_function"), "loads or calls native code"),
}


class ContainmentError(NearpeakError):
    """The file did something a foreign file may not do (see the module docstring)."""

    status = "policy_violation"

    def __init__(self, violation: Violation, file: str):
        super().__init__(f"policy violation [{violation.rule}] at line {violation.line}: {violation.message}: "
                         f"{violation.source_line}", file=file, line=violation.line)
        self.violation = violation


def _package_root(name: str) -> Path | None:
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None)
    return Path(origin).resolve().parent if origin else None


@dataclass
class Watch:
    """One foreign file's run: its folders, and the first refused thing it did."""

    path: str
    folders: tuple[Path, ...]
    violation: Violation | None = None
    _owners: dict[str, str] = field(default_factory=dict)

    def __post_init__(self):
        self.path = str(Path(self.path).resolve())
        self.scorer = tuple(p for p in (_package_root("triton"), Path(__file__).resolve().parent) if p)

    def owner(self, filename: str) -> str:
        """'scorer' (Triton, the evaluator), 'file' (the file and its folders) or '' for a frame's file."""
        known = self._owners.get(filename)
        if known is not None:
            return known
        owner = ""
        if not filename.startswith("<"):
            resolved = Path(filename).resolve()
            if any(resolved.is_relative_to(root) for root in self.scorer):
                owner = "scorer"
            elif str(resolved) == self.path or any(resolved.is_relative_to(f) for f in self.folders):
                owner = "file"
        self._owners[filename] = owner
        return owner

    def judge(self, event: str, frame) -> None:
        """Refuse `event` when the file's code asked for it (the innermost deciding frame is the file's)."""
        while frame is not None:
            owner = self.owner(frame.f_code.co_filename)
            if owner == "scorer":
                return
            if owner == "file":
                line = frame.f_lineno
                where = frame.f_code.co_filename
                said = f"{REFUSED_EVENTS[event]} ({event})"
                if str(Path(where).resolve()) != self.path:
                    said += f" in {Path(where).name}:{line}"
                    line = self.entry_line(frame) or line
                source = linecache.getline(self.path, line).strip()
                violation = Violation(RULE, f"the file {said}; a foreign file may not", line, source)
                self.violation = self.violation or violation
                raise ContainmentError(violation, self.path)
            frame = frame.f_back

    def entry_line(self, frame) -> int | None:
        """The file's own line further out on the stack (a sibling module did the refused thing)."""
        while frame is not None:
            if str(Path(frame.f_code.co_filename).resolve()) == self.path:
                return frame.f_lineno
            frame = frame.f_back
        return None


_WATCHES: list[Watch] = []
_INSTALLED = False


def _hook(event: str, args) -> None:
    if _WATCHES and event in REFUSED_EVENTS:
        _WATCHES[-1].judge(event, sys._getframe(1))


@contextlib.contextmanager
def watching(path: str, folders: list[str]) -> Iterator[Watch]:
    """While active, refused events asked for by the file's code raise `ContainmentError` (and are kept in
    the yielded watch, in case the file catches it)."""
    global _INSTALLED
    if not _INSTALLED:
        sys.addaudithook(_hook)
        _INSTALLED = True
    watch = Watch(path, tuple(Path(f).resolve() for f in folders))
    _WATCHES.append(watch)
    try:
        yield watch
    finally:
        _WATCHES.remove(watch)
