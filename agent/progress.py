"""Progress lines on stderr: what is happening now, and for how long it has been happening.

One reporter serves every long wait of the command line (the loop's evaluations, LLM requests, replay's
re-evaluations). Each line starts with the seconds elapsed since the reporter was made, so a user can see
where the time goes. A wait that lasts longer than `heartbeat` seconds prints a "still ..." line every
`heartbeat` seconds, so no wait is silent. Under `--json` the reporter is quiet: scripts read stdout and
exit codes, and a quiet reporter keeps stderr for errors only.

Plain lines, no terminal control codes: they read the same in a terminal, a log file and CI output.
"""
from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

HEARTBEAT_S = 10.0


class Progress:
    """A reporter: `progress("message")` prints one line; `with progress.task("compiling"):` covers a wait."""

    def __init__(self, stream: TextIO | None = None, quiet: bool = False, heartbeat: float = HEARTBEAT_S,
                 clock: Callable[[], float] = time.monotonic):
        self._stream = stream
        self.quiet = quiet
        self.heartbeat = heartbeat
        self._clock = clock
        self._started = clock()
        self._lock = threading.Lock()

    def elapsed(self) -> float:
        """Seconds since this reporter was made."""
        return self._clock() - self._started

    def __call__(self, message: str) -> None:
        """Print one line, prefixed with the elapsed time (nothing when quiet)."""
        if self.quiet:
            return
        stream = self._stream or sys.stderr  # looked up late so pytest's capture and redirections apply
        with self._lock:
            print(f"[{self.elapsed():6.1f} s] {message}", file=stream, flush=True)

    @contextmanager
    def task(self, what: str, report_end: bool = True) -> Iterator[None]:
        """Announce `what`, repeat a "still ..." line every `heartbeat` seconds while it lasts, then (unless the
        caller prints its own outcome line) say how long it took. A task that raises reports nothing more:
        the caller reports the failure."""
        self(f"{what} ...")
        started = self._clock()
        done = threading.Event()

        def beat() -> None:
            while not done.wait(self.heartbeat):
                self(f"... still {what} ({self._clock() - started:.0f} s so far)")

        beater = None
        if not self.quiet and self.heartbeat > 0:
            beater = threading.Thread(target=beat, name="nearpeak-progress", daemon=True)
            beater.start()
        try:
            yield
        finally:
            done.set()
            if beater is not None:
                beater.join()
        if report_end:
            self(f"{what}: done in {self._clock() - started:.1f} s")


QUIET = Progress(quiet=True)
