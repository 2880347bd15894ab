"""The LLM proposer: K conversations per step with any OpenAI-compatible chat endpoint, run concurrently.

Each of a step's K requests is one conversation, told it is candidate k of K, which ideas the run's history
and its siblings already tried, and sampled with its own seed, so K requests yield K different ideas. The
conversations run in threads and each candidate is handed to the loop the moment it is ready (the loop
commits it at once, so a kill loses only conversations still in flight).

Within a conversation every try is recorded. A failed request (timeout or stall, refused connection, HTTP 429
or 5xx, a 200 with a cut-off or HTML body, a reply without text; see llm_client) waits with exponential
back-off, or the server's Retry-After, and tries again; a reply whose edit does not apply is answered with
the precise error so the model can fix it. Credentials refused or an unknown model stop the run at once
(`EndpointRefused`); `max_idle_steps` consecutive steps without a single usable reply stop it too
(`EndpointUnavailable`), after their failures are in the ledger. The count travels with the step's last
proposal (`meta["idle_steps"]`, the ledger's `LLM-Idle-Steps` trailer), so `--resume` continues it.
"""
from __future__ import annotations

import sys
import threading
import traceback
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from ..edits import EditError, apply_reply
from ..prompt import Brief, Slot, render, system_message, user_message
from . import Candidate, FailedProposal, ProposalContext, ProposerStopped
from .llm_client import ChatClient, EndpointUnavailable, Exchange, endpoint_configured

__all__ = ["DEFAULT_MODEL", "LLMProposer", "LLMSettings", "endpoint_configured", "request_seed"]

DEFAULT_MODEL = "gpt-4o"
TITLE_LIMIT = 72
# 4xx answers other than these will not change on a retry of the same request.
RETRYABLE_4XX = {"http_408", "http_409", "http_429"}


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str | None           # None: the client reads OPENAI_BASE_URL (or uses its default)
    request_timeout: float = 120.0
    retries: int = 3               # tries after the first one, whatever went wrong
    backoff: float = 2.0           # seconds before the first retry after a failed request; doubles each time
    temperature: float = 0.7
    seed: int = 0
    max_idle_steps: int = 3        # consecutive steps without any usable reply before the run stops


def request_seed(run_seed: int, step: int, slot: int) -> int:
    """A distinct, reproducible sampling seed for request `slot` of `step` (fits a signed 32-bit int)."""
    return zlib.crc32(f"{run_seed}:{step}:{slot}".encode()) & 0x7FFFFFFF


def stderr_line(message: str) -> None:
    """Default progress sink: one plain line on stderr."""
    print(message, file=sys.stderr, flush=True)


def _usage_total(exchanges: list[dict]) -> dict:
    total: dict = {}
    for entry in exchanges:
        for key, value in (entry.get("usage") or {}).items():
            total[key] = total.get(key, 0) + value
    return total


class _Siblings:
    """Titles of the step's candidates received so far, shared by the step's conversations."""

    def __init__(self, titles: tuple[str, ...]):
        self._titles = list(titles)
        self._lock = threading.Lock()

    def add(self, title: str) -> None:
        with self._lock:
            self._titles.append(title)

    def snapshot(self) -> tuple[str, ...]:
        with self._lock:
            return tuple(self._titles)


class LLMProposer:
    name = "llm"

    def __init__(self, settings: LLMSettings, brief: Brief, objective: str,
                 progress: Callable[[str], None] = stderr_line, client: ChatClient | None = None,
                 idle_steps: int = 0):
        self.settings = settings
        self.brief = brief
        self.objective = objective
        self.progress = progress
        self.client = client or ChatClient(settings.model, settings.base_url, settings.request_timeout,
                                           settings.temperature)
        self.idle_steps = idle_steps  # consecutive steps without a usable reply, earlier invocations included
        self._stop = threading.Event()

    def propose(self, context: ProposalContext) -> Iterator[Candidate | FailedProposal]:
        """Run the step's conversations concurrently; yield each result as it completes."""
        total = context.count
        siblings = _Siblings(tuple(a.summary for a in context.history if a.step == context.step))
        self._stop.clear()
        pool = ThreadPoolExecutor(max_workers=total, thread_name_prefix="nearpeak-llm")
        futures = [pool.submit(self._guarded, context, Slot(k, total), siblings) for k in range(1, total + 1)]
        usable = False
        try:
            for done, future in enumerate(as_completed(futures), 1):
                proposal, replied = future.result()  # EndpointRefused ends the run here
                usable = usable or replied
                if done == total:  # the new count is committed with the step's last proposal
                    self.idle_steps = 0 if usable else self.idle_steps + 1
                    proposal.meta["idle_steps"] = self.idle_steps
                yield proposal
        finally:
            self._stop.set()  # conversations still running (the run is stopping) end at their next wait
            pool.shutdown(wait=False, cancel_futures=True)
        if self.idle_steps >= self.settings.max_idle_steps:
            raise EndpointUnavailable(f"endpoint unavailable: no usable reply from {self.client.endpoint} in "
                                      f"{self.idle_steps} consecutive step(s)")

    def observe(self, candidate, outcome) -> None:
        """The model learns from the history in the next prompt, not from callbacks."""

    def _guarded(self, context: ProposalContext, slot: Slot,
                 siblings: _Siblings) -> tuple[Candidate | FailedProposal, bool]:
        """A conversation that breaks unexpectedly is one failed candidate, recorded, not the end of the run."""
        try:
            return self._conversation(context, slot, siblings)
        except ProposerStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - the run goes on; the ledger says what broke
            tail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)[-3:])
            return FailedProposal(reason=f"proposer_error: {type(exc).__name__}: {exc}",
                                  meta={"request": slot.index, "of": slot.total, "traceback_tail": tail}), False

    def _conversation(self, context: ProposalContext, slot: Slot,
                      siblings: _Siblings) -> tuple[Candidate | FailedProposal, bool]:
        """One candidate's conversation; returns it and whether the endpoint gave any usable reply."""
        tag = f"[step {context.step}] request {slot.index}/{slot.total}"
        seed = request_seed(self.settings.seed, context.step, slot.index)
        slot = Slot(slot.index, slot.total, siblings.snapshot())
        messages = [{"role": "system", "content": system_message(context.target, self.objective)},
                    {"role": "user", "content": user_message(context, self.brief, slot, self.objective)}]
        exchanges: list[dict] = []
        reply, replied, wait = "", False, self.settings.backoff
        for attempt in range(1, self.settings.retries + 2):
            if self._stop.is_set():
                break
            self.progress(f"{tag}: sending (try {attempt}, seed {seed})")
            exchange = self.client.request(messages, seed)
            entry = {"attempt": attempt, "outcome": exchange.outcome, "elapsed_s": exchange.elapsed_s,
                     "usage": exchange.usage}
            exchanges.append(entry)
            if not exchange.ok:
                entry["message"] = exchange.message
                if not _retryable(exchange) or attempt > self.settings.retries:
                    self.progress(f"{tag}: {exchange.outcome}: {exchange.message}")
                    break
                delay = exchange.retry_after if exchange.retry_after is not None else wait
                entry["wait_s"] = round(delay, 3)
                self.progress(f"{tag}: {exchange.outcome} ({exchange.message}); retry {attempt}/"
                              f"{self.settings.retries} in {delay:.1f} s")
                self._stop.wait(delay)
                wait *= 2
                continue
            replied, reply = True, exchange.content
            try:
                edit = apply_reply(reply, context.incumbent_source)
            except EditError as exc:
                entry.update(outcome="bad_edit", message=str(exc), reply=reply)
                self.progress(f"{tag}: reply not applicable ({_first_line(str(exc))}); asking again")
                feedback = f"Your reply could not be applied: {exc}\nPlease send a corrected reply in one of the " \
                           "formats described."
                news = [t for t in siblings.snapshot() if t not in slot.siblings]
                if news:
                    feedback += "\nMeanwhile sibling requests of this step proposed: " + "; ".join(news)
                    slot = Slot(slot.index, slot.total, siblings.snapshot())
                messages = messages + [{"role": "assistant", "content": reply}, {"role": "user", "content": feedback}]
                continue
            entry["edit_format"] = edit.format
            title = commit_title(edit.rationale)
            siblings.add(title)
            self.progress(f"{tag}: received {edit.format} edit: {title}")
            meta = self._meta(exchanges, edit.format, slot, seed)
            return Candidate(source=edit.source, rationale=edit.rationale, title=title, meta=meta,
                             artifacts={"prompt.md": render(messages), "reply.md": reply}), replied
        last = exchanges[-1] if exchanges else {"outcome": "stopped", "message": "the run stopped first"}
        reason = (f"no applicable edit after {len(exchanges)} tries; last: {last['outcome']}: "
                  f"{last.get('message', '')}")
        return FailedProposal(reason=reason, meta=self._meta(exchanges, None, slot, seed),
                              artifacts={"prompt.md": render(messages), "reply.md": reply}), replied

    def _meta(self, exchanges: list[dict], edit_format: str | None, slot: Slot, seed: int) -> dict:
        return {"model": self.settings.model, "base_url": self.client.endpoint, "edit_format": edit_format,
                "usage": _usage_total(exchanges), "tries": len(exchanges), "exchanges": exchanges,
                "request": slot.index, "of": slot.total, "seed": seed}


def _retryable(exchange: Exchange) -> bool:
    return not exchange.outcome.startswith("http_4") or exchange.outcome in RETRYABLE_4XX


def _first_line(text: str) -> str:
    return text.splitlines()[0] if text else ""


def commit_title(rationale: str, limit: int = TITLE_LIMIT) -> str:
    """A one-line commit subject from the model's prose: no markdown, never cut inside a word."""
    line = next((ln for ln in rationale.splitlines() if ln.strip(" #*->`_")), "")
    words = line.replace("**", "").replace("`", "").replace("__", "").strip(" #*->_").split()
    title = ""
    for word in words:
        if len(title) + len(word) + (1 if title else 0) > limit:
            return (title.rstrip(",;:.") + " ...") if title else word[:limit]
        title = f"{title} {word}" if title else word
    return title.rstrip(":") or "LLM edit"
