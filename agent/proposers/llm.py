"""The LLM proposer: any OpenAI-compatible chat endpoint, through the `openai` package.

One candidate is one conversation. Things that go wrong are retried a bounded number of times and every
try is recorded: a timeout, HTTP 429 (honouring Retry-After) and 5xx wait with exponential backoff; a reply
that holds no usable edit, or an edit that does not apply, is answered with the precise error so the model
can fix it. Other HTTP errors (401, 404, ...) are not retried: they will not heal by themselves.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass

from ..edits import EditError, apply_reply
from ..prompt import PlaybookEntry, render, system_message, user_message
from ..source import declaration
from . import Candidate, FailedProposal, ProposalContext

MAX_RETRY_AFTER_S = 60.0
DEFAULT_MODEL = "gpt-4o"


@dataclass(frozen=True)
class LLMSettings:
    model: str
    base_url: str | None           # None: the client reads OPENAI_BASE_URL (or uses its default)
    request_timeout: float = 120.0
    retries: int = 3               # tries after the first one, whatever went wrong
    backoff: float = 2.0           # seconds before the first retry after a transport error; doubles each time
    temperature: float = 0.7
    seed: int = 0


def endpoint_configured(base_url: str | None) -> bool:
    """Whether an LLM endpoint is configured (flag or environment), which makes `llm` the default proposer."""
    return bool(base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def _usage_dict(usage) -> dict:
    if usage is None:
        return {}
    return {k: getattr(usage, k) for k in ("prompt_tokens", "completion_tokens", "total_tokens")
            if getattr(usage, k, None) is not None}


def _add_usage(total: dict, usage: dict) -> None:
    for key, value in usage.items():
        total[key] = total.get(key, 0) + value


class LLMProposer:
    name = "llm"

    def __init__(self, settings: LLMSettings, playbook: list[PlaybookEntry], objective: str, sleep=time.sleep):
        import openai

        self.openai = openai
        self.settings = settings
        self.playbook = playbook
        self.objective = objective
        self.sleep = sleep
        # Retries are ours (each one is recorded), so the client's own are off. A key is required by the
        # client even for local servers that ignore it.
        api_key = None if os.environ.get("OPENAI_API_KEY") else "unused"
        self.client = openai.OpenAI(base_url=settings.base_url, api_key=api_key, max_retries=0,
                                    timeout=settings.request_timeout)

    def propose(self, context: ProposalContext) -> list[Candidate | FailedProposal]:
        return [self._one(context) for _ in range(context.count)]

    def observe(self, candidate, outcome) -> None:
        """The model learns from the history in the next prompt, not from callbacks."""

    def _one(self, context: ProposalContext) -> Candidate | FailedProposal:
        dtype = declaration(context.incumbent_source, "DTYPE")
        messages = [{"role": "system", "content": system_message(context.target, self.objective)},
                    {"role": "user", "content": user_message(context, self.playbook, dtype)}]
        exchanges: list[dict] = []
        usage: dict = {}
        reply = ""
        wait = self.settings.backoff
        for attempt in range(1, self.settings.retries + 2):
            started = time.monotonic()
            record = {"attempt": attempt}
            try:
                response = self.client.chat.completions.create(
                    model=self.settings.model, messages=messages, temperature=self.settings.temperature,
                    seed=self.settings.seed)
            except self.openai.APIError as exc:
                kind, retryable, delay = self._classify(exc, wait)
                record.update(outcome=kind, message=str(exc)[:500], elapsed_s=round(time.monotonic() - started, 3))
                exchanges.append(record)
                if not retryable or attempt > self.settings.retries:
                    break
                record["wait_s"] = round(delay, 3)
                self.sleep(delay)
                wait *= 2
                continue
            step_usage = _usage_dict(getattr(response, "usage", None))
            _add_usage(usage, step_usage)
            reply = (response.choices[0].message.content or "") if response.choices else ""
            record.update(elapsed_s=round(time.monotonic() - started, 3), usage=step_usage)
            try:
                edit = apply_reply(reply, context.incumbent_source)
            except EditError as exc:
                record.update(outcome="bad_edit", message=str(exc), reply=reply)
                exchanges.append(record)
                messages = messages + [
                    {"role": "assistant", "content": reply},
                    {"role": "user", "content": f"Your reply could not be applied: {exc}\nPlease send a corrected "
                                                "reply in one of the formats described."}]
                continue
            record.update(outcome="ok", edit_format=edit.format)
            exchanges.append(record)
            meta = self._meta(exchanges, usage, edit.format)
            return Candidate(source=edit.source, rationale=edit.rationale, title=_title(edit.rationale),
                             meta=meta, artifacts={"prompt.md": render(messages), "reply.md": reply})
        last = exchanges[-1]
        reason = f"no applicable edit after {len(exchanges)} tries; last: {last['outcome']}: {last.get('message', '')}"
        return FailedProposal(reason=reason, meta=self._meta(exchanges, usage, None),
                              artifacts={"prompt.md": render(messages), "reply.md": reply})

    def _classify(self, exc, wait: float) -> tuple[str, bool, float]:
        """(what happened, whether to retry, how long to wait first)."""
        o = self.openai
        if isinstance(exc, o.APITimeoutError):
            return "timeout", True, wait
        if isinstance(exc, o.APIConnectionError):
            return "connection_error", True, wait
        if isinstance(exc, o.APIStatusError):
            status = exc.status_code
            if status == 429:
                header = exc.response.headers.get("retry-after") if exc.response is not None else None
                try:
                    delay = min(float(header), MAX_RETRY_AFTER_S) if header is not None else wait
                except ValueError:
                    delay = wait
                return "http_429", True, delay
            return f"http_{status}", status >= 500, wait
        return type(exc).__name__, False, wait

    def _meta(self, exchanges: list[dict], usage: dict, edit_format: str | None) -> dict:
        return {"model": self.settings.model, "base_url": str(self.client.base_url), "edit_format": edit_format,
                "usage": usage, "tries": len(exchanges), "exchanges": exchanges}


def _title(rationale: str) -> str:
    first = next((ln.strip(" #*-") for ln in rationale.splitlines() if ln.strip()), "LLM edit")
    return first[:80]
