"""The manual proposer's transport: each request of the llm proposer as a prompt file, its reply as a file.

`--proposer manual` is the llm proposer (same prompts, planning, edit parsing, retries on a bad edit,
ledger) with this transport instead of HTTP. It serves a user without an API key who pastes prompts into a
chat window, a person acting as the model, a script or another agent, and tests.

Request `step-3/req-2` (try 2: `step-3/req-2.try-2`, the planning request: `step-3/plan`) is written to
`<run>/prompts/step-3/req-2.prompt.md`, self-contained: how to answer, where, and in which format, then the
whole conversation. Its reply is read from `req-2.reply.md` next to it. Files are never rewritten: a
resumed run (after a kill, or after a stop for missing replies) finds the same prompts and takes whatever
replies have been written meanwhile, so every reply is used once, for the prompt it answers.

While a reply is missing the transport waits, polling, with a heartbeat line, up to `reply_wait` seconds
(0: not at all); then the run stops with `AwaitingReplies` (exit 6), naming the files and the `--resume`
command. On a terminal a reply may also be pasted on standard input (one request at a time); it is written
to the reply file before it is used. Token counts are not known here: each try records an estimate from
the characters (about 4 per token), labelled so.
"""
from __future__ import annotations

import os
import select
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from ..ledger import PROMPTS
from ..prompt import CHARS_PER_TOKEN, render
from . import AwaitingReplies
from .llm_client import Exchange

PROMPT_SUFFIX, REPLY_SUFFIX = ".prompt.md", ".reply.md"
DEFAULT_REPLY_WAIT_S = 1800.0      # non-interactive: then stop with exit 6 and the --resume command
HEARTBEAT_S = 30.0
POLL_S = 0.5
END_OF_PASTE = "EOF"               # a pasted reply ends with this line alone (or Ctrl-D)


@dataclass(frozen=True)
class ManualSettings:
    folder: Path                       # where prompt and reply files go: <run>/prompts (PROMPTS, git-ignored)
    reply_wait: float | None = None    # seconds to wait for a missing reply; None: the default (no limit on a tty)
    interactive: bool = False          # replies may be pasted on standard input
    poll_s: float = POLL_S
    heartbeat_s: float = HEARTBEAT_S

    @property
    def wait_limit(self) -> float | None:
        if self.reply_wait is not None:
            return self.reply_wait
        return None if self.interactive else DEFAULT_REPLY_WAIT_S


def prompt_file_text(messages: list[dict], label: str, reply: Path) -> str:
    """A prompt file a reader of nothing else can answer: what to write, where, in which format."""
    kind = "the planning request" if label.split("/")[-1].startswith("plan") else "an implementation request"
    return (f"<!-- nearpeak prompt {label} -->\n"
            f"# nearpeak asks: {label} ({kind})\n\n"
            f"How to answer: write your reply, and only the reply (as the assistant would answer the conversation "
            f"below), into the file `{reply.name}` in this folder:\n\n    {reply}\n\n"
            "Write it under another name and rename it into place, so that nearpeak never reads half a file. "
            "The format the reply must have is set out in the system part below and again at the end of the "
            "last user part (the task). If the conversation holds an earlier reply and a message saying what was "
            "wrong with it, answer that message.\n\n"
            "The conversation (roles: system, user, and on a later try assistant/user turns):\n\n"
            + render(messages))


class ReplyFiles:
    """The manual transport: `request` writes the prompt file (once) and returns its reply file's text."""

    def __init__(self, settings: ManualSettings, progress: Callable[[str], None],
                 stdin: TextIO | None = None):
        self.settings = settings
        self.progress = progress
        self.endpoint = f"reply files under {settings.folder}"
        self._stdin = stdin or sys.stdin
        self._paste_lock = threading.Lock()   # one request at a time reads standard input

    def paths(self, label: str) -> tuple[Path, Path]:
        base = self.settings.folder / label
        return base.with_name(base.name + PROMPT_SUFFIX), base.with_name(base.name + REPLY_SUFFIX)

    def request(self, messages: list[dict], seed: int, label: str = "") -> Exchange:
        prompt, reply = self.paths(label or f"seed-{seed}")
        if not prompt.exists():
            _write_atomically(prompt, prompt_file_text(messages, label, reply))
            self.progress(f"prompt written: {prompt} (reply expected in {reply})")
        started = time.monotonic()
        content = self._reply(prompt, reply, started)
        sent = prompt.read_text(encoding="utf-8")
        notes = {"prompt_file": str(prompt), "reply_file": str(reply),
                 "estimated_tokens": {"prompt": round(len(sent) / CHARS_PER_TOKEN),
                                      "completion": round(len(content) / CHARS_PER_TOKEN),
                                      "method": f"characters / {CHARS_PER_TOKEN:g} (an estimate, not a count)"}}
        return Exchange("ok", round(time.monotonic() - started, 3), content=content, sent=sent, notes=notes)

    # -- waiting ---------------------------------------------------------------------------------------------

    def _reply(self, prompt: Path, reply: Path, started: float) -> str:
        limit = self.settings.wait_limit
        found = _ready(reply)
        if found is not None:
            return found
        if limit == 0:
            raise AwaitingReplies(((str(prompt), str(reply)),), 0)
        if self.settings.interactive:
            with self._paste_lock:
                return self._paste_or_file(prompt, reply, started, limit)
        return self._poll(prompt, reply, started, limit, None)

    def _poll(self, prompt: Path, reply: Path, started: float, limit: float | None,
              on_tick: Callable[[], str | None] | None) -> str:
        last_beat, previous = started, None
        while True:
            state = _stat(reply)
            text = _ready(reply) if state is not None and state == previous else None  # unchanged for a poll
            if text is not None:
                return text
            previous = state
            if on_tick is not None and (pasted := on_tick()) is not None:
                return pasted
            now = time.monotonic()
            if limit is not None and now - started >= limit:
                raise AwaitingReplies(((str(prompt), str(reply)),), round(now - started, 1))
            if now - last_beat >= self.settings.heartbeat_s:
                last_beat = now
                bound = f"up to {limit:g} s" if limit is not None else "no limit"
                self.progress(f"... still waiting for {reply} ({now - started:.0f} s so far, {bound})")
            if on_tick is None:
                time.sleep(self.settings.poll_s)

    def _paste_or_file(self, prompt: Path, reply: Path, started: float, limit: float | None) -> str:
        self.progress(f"paste the reply to {prompt} on standard input, ending with a line {END_OF_PASTE} alone "
                      f"(or Ctrl-D), or write it to {reply}")
        lines: list[str] = []
        try:
            fd = self._stdin.fileno()
        except (OSError, ValueError, AttributeError):
            fd = None

        def tick() -> str | None:
            if fd is None:
                time.sleep(self.settings.poll_s)
                return None
            readable, _, _ = select.select([fd], [], [], self.settings.poll_s)
            if not readable:
                return None
            chunk = os.read(fd, 65536).decode(errors="replace")
            done = chunk == ""
            lines.extend(chunk.splitlines(keepends=True))
            if lines and lines[-1].rstrip("\r\n") == END_OF_PASTE:
                lines.pop()
                done = True
            if not done or not "".join(lines).strip():
                if done:
                    lines.clear()
                return None
            text = "".join(lines)
            _write_atomically(reply, text)
            return text

        return self._poll(prompt, reply, started, limit, tick)


def _stat(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def _ready(reply: Path) -> str | None:
    """The reply's text when the file is there and not empty."""
    try:
        text = reply.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    return text if text.strip() else None


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, path)


def prompt_folder(run: Path) -> Path:
    """Where a run's prompt and reply files live."""
    return Path(run) / PROMPTS
