"""The LLM proposer: K conversations per step with any OpenAI-compatible chat endpoint, run concurrently.

With K > 1 a step is planned first (`plan`, agent.ideas): one request for a ranked list of distinct ideas,
then each of the K requests is one conversation that implements its assigned idea and is told its
siblings' ideas (a plan that cannot be read falls back to "you are request k of K, pick a different idea").
Each request is sampled with its own seed. The conversations run in threads and each candidate is handed to
the loop the moment it is ready (the loop commits it at once, so a kill loses only conversations in flight).
The transport is an HTTP client (llm_client) or, for `--proposer manual`, prompt and reply files
(agent.proposers.manual); everything else is the same.

Within a conversation every try is recorded. A failed request (timeout or stall, refused connection, HTTP 429
or 5xx, a 200 with a cut-off or HTML body, a reply without text; see llm_client) waits with exponential
back-off, or the server's Retry-After, and tries again; a reply whose edit does not apply is answered with
the precise error so the model can fix it. Credentials refused or an unknown model stop the run at once
(`EndpointRefused`); so does a connection refused or a name that does not resolve on the first request of
a run (`EndpointUnreachable`, exit 5: a wrong URL, not a transient failure); `max_idle_steps` consecutive
steps without a single usable reply stop it too (`EndpointUnavailable`), after their failures are in the
ledger. The count travels with the step's last
proposal (`meta["idle_steps"]`, the ledger's `LLM-Idle-Steps` trailer), so `--resume` continues it.
"""
from __future__ import annotations

import sys
import threading
import traceback
import zlib
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..edits import EditError, apply_reply
from ..ideas import FALLBACK, OK, Plan, PlanError, parse_plan
from ..prompt import Brief, Slot, plan_messages, render, system_message, user_message
from . import AwaitingReplies, Candidate, FailedProposal, PlanRequest, ProposalContext, ProposerStopped
from .llm_client import ChatClient, EndpointUnavailable, EndpointUnreachable, Exchange, endpoint_configured

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


class Transport(Protocol):
    """Where a request goes and its reply comes from: an HTTP endpoint or prompt/reply files."""

    endpoint: str

    def request(self, messages: list[dict], seed: int, label: str = "") -> Exchange: ...


@dataclass
class _Talk:
    """One conversation as it went: its messages, every try, the last reply, and what it yielded."""

    messages: list[dict]
    exchanges: list[dict] = field(default_factory=list)
    reply: str = ""
    replied: bool = False      # the endpoint gave at least one usable (non-error) reply
    sent: str = ""             # the last prompt as shown, when the transport says (manual: the file)
    result: object = None      # what `accept` made of the last reply, None when nothing was accepted
    error: str = ""            # the last reply's problem (`accept` raised), for the ledger

    def prompt_text(self) -> str:
        return self.sent or render(self.messages)


def _estimated_total(exchanges: list[dict]) -> dict:
    """Token estimates summed over the tries, for transports that cannot count (manual)."""
    estimates = [e["estimated_tokens"] for e in exchanges if e.get("estimated_tokens")]
    if not estimates:
        return {}
    return {"prompt_tokens": sum(e["prompt"] for e in estimates),
            "completion_tokens": sum(e["completion"] for e in estimates), "method": estimates[0]["method"]}


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
                 progress: Callable[[str], None] = stderr_line, client: Transport | None = None,
                 idle_steps: int = 0, name: str = "llm"):
        self.settings = settings
        self.brief = brief
        self.objective = objective
        self.progress = progress
        self.name = name
        self.client = client or ChatClient(settings.model, settings.base_url, settings.request_timeout,
                                           settings.temperature)
        self.idle_steps = idle_steps  # consecutive steps without a usable reply, earlier invocations included
        self._stop = threading.Event()
        self._reached = threading.Event()  # some request of this process got an answer from the endpoint

    # -- planning ----------------------------------------------------------------------------------------

    def plan(self, request: PlanRequest) -> Plan:
        """The step's ranked ideas from one planning request; a reply that cannot be read is answered with
        the error (within the retries), then the plan falls back (status `fallback`, the cause named)."""
        step = request.context.step
        tag = f"[step {step}] planning request"
        seed = request_seed(self.settings.seed, step, 0)
        messages = plan_messages(request, self.brief, self.objective)

        def feedback(exc: Exception) -> str:
            return (f"Your reply could not be read as a plan ({exc}). Please reply again with the JSON object "
                    "described, in a ```json block.")

        self._stop.clear()
        try:
            talk = self._talk(tag, messages, seed, f"step-{step}/plan",
                              lambda reply: parse_plan(reply, request.count), feedback)
        except ProposerStopped:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken planning request falls back; the ledger says why
            return Plan((), FALLBACK, f"proposer_error: {type(exc).__name__}: {exc}")
        meta = {"model": self.settings.model, "base_url": self.client.endpoint, "usage": _usage_total(talk.exchanges),
                "tries": len(talk.exchanges), "exchanges": talk.exchanges, "seed": seed}
        if _estimated_total(talk.exchanges):
            meta["estimated_usage"] = _estimated_total(talk.exchanges)
        artifacts = {"plan.prompt.md": talk.prompt_text(), "plan.reply.md": talk.reply}
        if talk.result is None:
            last = talk.exchanges[-1] if talk.exchanges else {"outcome": "stopped", "message": "the run stopped"}
            cause = talk.error or f"{last['outcome']}: {last.get('message', '')}"
            self.progress(f"{tag}: no plan ({cause}); the step's requests are not assigned ideas")
            return Plan((), FALLBACK, cause, meta=meta, artifacts=artifacts)
        ideas, dropped = talk.result
        return Plan(ideas, OK, "", dropped, meta, artifacts)

    # -- implementation requests -------------------------------------------------------------------------

    def propose(self, context: ProposalContext) -> Iterator[Candidate | FailedProposal]:
        """Run the step's conversations concurrently; yield each result as it completes."""
        slots, total = context.request_slots()
        slots = slots[:context.count]
        siblings = _Siblings(tuple(a.summary for a in context.history if a.step == context.step))
        self._stop.clear()
        pool = ThreadPoolExecutor(max_workers=len(slots), thread_name_prefix="nearpeak-llm")
        futures = [pool.submit(self._guarded, context, _slot(context, k, total), siblings) for k in slots]
        usable = False
        waiting: list[AwaitingReplies] = []
        try:
            for done, future in enumerate(as_completed(futures), 1):
                try:
                    proposal, replied = future.result()  # EndpointRefused ends the run here
                except AwaitingReplies as exc:  # the others still come in (each waits as long)
                    waiting.append(exc)
                    continue
                usable = usable or replied
                if done == len(futures) and not waiting:  # the new count is committed with the step's last one
                    self.idle_steps = 0 if usable else self.idle_steps + 1
                    proposal.meta["idle_steps"] = self.idle_steps
                yield proposal
        finally:
            self._stop.set()  # conversations still running (the run is stopping) end at their next wait
            pool.shutdown(wait=False, cancel_futures=True)
        if waiting:
            raise AwaitingReplies.combine(waiting)
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
        slot = replace(slot, siblings=siblings.snapshot())
        messages = [{"role": "system", "content": system_message(context.target, self.objective)},
                    {"role": "user", "content": user_message(context, self.brief, slot, self.objective)}]
        told = [slot.siblings]

        def feedback(exc: Exception) -> str:
            text = f"Your reply could not be applied: {exc}\nPlease send a corrected reply in one of the formats " \
                   "described."
            news = [t for t in siblings.snapshot() if t not in told[0]]
            if news:
                text += "\nMeanwhile sibling requests of this step proposed: " + "; ".join(news)
                told[0] = siblings.snapshot()
            return text

        talk = self._talk(tag, messages, seed, f"step-{context.step}/req-{slot.index}",
                          lambda reply: apply_reply(reply, context.incumbent_source), feedback)
        artifacts = {"prompt.md": talk.prompt_text(), "reply.md": talk.reply}
        if talk.result is not None:
            edit = talk.result
            talk.exchanges[-1]["edit_format"] = edit.format
            title = commit_title(edit.rationale)
            siblings.add(title)
            self.progress(f"{tag}: received {edit.format} edit: {title}")
            meta = self._meta(talk.exchanges, edit.format, slot, seed)
            return Candidate(source=edit.source, rationale=edit.rationale, title=title, meta=meta,
                             artifacts=artifacts), talk.replied
        last = talk.exchanges[-1] if talk.exchanges else {"outcome": "stopped", "message": "the run stopped first"}
        reason = (f"no applicable edit after {len(talk.exchanges)} tries; last: {last['outcome']}: "
                  f"{last.get('message', '')}")
        return FailedProposal(reason=reason, meta=self._meta(talk.exchanges, None, slot, seed),
                              artifacts=artifacts), talk.replied

    # -- one conversation's tries ------------------------------------------------------------------------

    def _talk(self, tag: str, messages: list[dict], seed: int, label: str,
              accept: Callable[[str], object], feedback: Callable[[Exception], str]) -> _Talk:
        """Send `messages` until `accept(reply)` takes a reply: a failed request is retried after a back-off
        (or the server's Retry-After), a reply `accept` refuses (EditError, PlanError) is answered with
        `feedback(error)`; at most `retries` tries after the first."""
        talk = _Talk(list(messages))
        wait = self.settings.backoff
        for attempt in range(1, self.settings.retries + 2):
            if self._stop.is_set():
                break
            self.progress(f"{tag}: sending (try {attempt}, seed {seed})")
            exchange = self.client.request(talk.messages, seed, label + (f".try-{attempt}" if attempt > 1 else ""))
            self._first_contact(exchange)
            entry = {"attempt": attempt, "outcome": exchange.outcome, "elapsed_s": exchange.elapsed_s,
                     "usage": exchange.usage, **exchange.notes}
            talk.exchanges.append(entry)
            talk.sent = exchange.sent
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
            talk.replied, talk.reply = True, exchange.content
            try:
                talk.result = accept(exchange.content)
                talk.error = ""
                return talk
            except (EditError, PlanError) as exc:
                cause = getattr(exc, "cause", "")
                talk.error = f"{cause}: {exc}" if cause else str(exc)
                entry.update(outcome="bad_plan" if isinstance(exc, PlanError) else "bad_edit", message=str(exc),
                             reply=exchange.content, **({"cause": cause} if cause else {}))
                self.progress(f"{tag}: reply not usable ({_first_line(str(exc))}); asking again")
                talk.messages = talk.messages + [{"role": "assistant", "content": exchange.content},
                                                 {"role": "user", "content": feedback(exc)}]
        return talk

    def _first_contact(self, exchange: Exchange) -> None:
        """Stop at once when the first request of this process cannot connect at all: a wrong URL or a server
        that is not up is not a transient failure (later in a run, connection errors are retried)."""
        if exchange.outcome != "connection_error":
            self._reached.set()
        elif not self._reached.is_set():
            self._stop.set()
            raise EndpointUnreachable(f"endpoint unreachable: {exchange.message} (the run's first request; "
                                      "check --base-url or OPENAI_BASE_URL and that the server is up)")

    def _meta(self, exchanges: list[dict], edit_format: str | None, slot: Slot, seed: int) -> dict:
        meta = {"model": self.settings.model, "base_url": self.client.endpoint, "edit_format": edit_format,
                "usage": _usage_total(exchanges), "tries": len(exchanges), "exchanges": exchanges,
                "request": slot.index, "of": slot.total, "seed": seed}
        estimated = _estimated_total(exchanges)
        if estimated:
            meta["estimated_usage"] = estimated
        if slot.idea is not None:
            meta["idea"] = slot.idea.number
        return meta


def _slot(context: ProposalContext, index: int, total: int) -> Slot:
    """Request `index` of `total`, with its planned idea and its siblings' (when the step was planned)."""
    plan = context.plan
    if plan is None or plan.status != OK:
        return Slot(index, total)
    others = tuple(i for k in range(1, total + 1) if k != index and (i := plan.idea(k)) is not None)
    return Slot(index, total, idea=plan.idea(index), sibling_ideas=others)


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
