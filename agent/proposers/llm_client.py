"""One request to an OpenAI-compatible chat endpoint, with whatever came back given a name.

`ChatClient.request` never raises for a reply it cannot use: a timeout or stall, a refused connection, HTTP
429/5xx, a 200 whose body is cut-off JSON or an HTML page, a body without choices or with empty content all
come back as an `Exchange` whose `outcome` names the cause, for the caller to record and retry. Only answers
that will not heal by waiting raise, as `EndpointRefused`: the credentials are refused (401, 403) or the
model or route is unknown (404). The `openai` package does the transport (base URL, key, headers); the body
is parsed here, from the raw response, so a malformed one cannot surface as a library exception.
"""
from __future__ import annotations

import email.utils
import json
import os
import time
from dataclasses import dataclass, field

from . import ProposerStopped

EXIT_ENDPOINT_REFUSED = 4       # 401/403/404: credentials refused, or the model (or route) unknown
EXIT_ENDPOINT_UNAVAILABLE = 5   # no usable reply in --max-idle-steps consecutive steps, or never reachable
MAX_RETRY_AFTER_S = 60.0
REFUSED = {401: "the endpoint refused the credentials", 403: "the endpoint refused access",
           404: "the endpoint does not know the model (or the --base-url route)"}


class EndpointRefused(ProposerStopped):
    """The endpoint refuses this run outright: retrying cannot help."""

    exit_code = EXIT_ENDPOINT_REFUSED


class EndpointUnavailable(ProposerStopped):
    """Several steps in a row got no usable reply from the endpoint."""

    exit_code = EXIT_ENDPOINT_UNAVAILABLE


class EndpointUnreachable(EndpointUnavailable):
    """The run's very first request could not connect (refused, DNS): more tries will not fix a wrong URL."""


@dataclass(frozen=True)
class Exchange:
    """One HTTP request and what came of it; `outcome` is "ok" or the name of what went wrong."""

    outcome: str
    elapsed_s: float
    message: str = ""
    content: str = ""
    usage: dict = field(default_factory=dict)
    retry_after: float | None = None    # seconds the server asked us to wait (HTTP 429 / 503)
    sent: str = ""                      # the prompt as it was shown, when not rendered from the messages
    notes: dict = field(default_factory=dict)   # transport-specific record of the try (e.g. file names)

    @property
    def ok(self) -> bool:
        return self.outcome == "ok"


def endpoint_configured(base_url: str | None) -> bool:
    """Whether an LLM endpoint is configured (flag or environment), which makes `llm` the default proposer."""
    return bool(base_url or os.environ.get("OPENAI_BASE_URL") or os.environ.get("OPENAI_API_KEY"))


def retry_after_seconds(value: str | None) -> float | None:
    """A Retry-After header (seconds or an HTTP date) in seconds, capped at MAX_RETRY_AFTER_S."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if email.utils.parsedate_tz(value) else None
        if when is None:
            return None
        seconds = when.timestamp() - time.time()
    return min(max(seconds, 0.0), MAX_RETRY_AFTER_S)


def parse_completion(status: int, content_type: str, text: str) -> Exchange:
    """Classify a 200 body: the reply's text and token usage, or what is wrong with it (elapsed_s left 0)."""
    try:
        body = json.loads(text)
    except ValueError:
        looks_html = "html" in content_type or text.lstrip()[:1] == "<"
        if looks_html:
            return Exchange("html_body", 0.0, f"HTTP {status} with an HTML page instead of JSON: {_snippet(text)}")
        if text.lstrip()[:1] in ("{", "["):
            return Exchange("truncated_json", 0.0, f"the JSON body is cut off after {len(text)} characters")
        return Exchange("not_json", 0.0, f"the body is not JSON: {_snippet(text)}")
    if not isinstance(body, dict):
        return Exchange("unexpected_body", 0.0, f"the JSON body is a {type(body).__name__}, not an object")
    usage = {k: v for k, v in (body.get("usage") or {}).items()
             if k in ("prompt_tokens", "completion_tokens", "total_tokens") and isinstance(v, int)}
    if body.get("error"):
        return Exchange("error_body", 0.0, f"HTTP {status} carrying an error: {_snippet(json.dumps(body['error']))}",
                        usage=usage)
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return Exchange("no_choices", 0.0, "the reply has no choices", usage=usage)
    message = choices[0].get("message") or {}
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(content, str) or not content.strip():
        reason = choices[0].get("finish_reason")
        return Exchange("empty_reply", 0.0, f"the reply has no text (finish_reason {reason!r})", usage=usage)
    return Exchange("ok", 0.0, content=content, usage=usage)


def _snippet(text: str, limit: int = 160) -> str:
    return repr(" ".join(text.split())[:limit])


class ChatClient:
    """Chat completions from one endpoint and model; one call of `request` is one HTTP request."""

    def __init__(self, model: str, base_url: str | None, timeout: float, temperature: float = 0.7):
        import openai

        self._openai = openai
        self.model = model
        self.temperature = temperature
        # Retries are the caller's (each one is recorded), so the client's own are off. The client wants a
        # key even for local servers that ignore it.
        api_key = None if os.environ.get("OPENAI_API_KEY") else "unused"
        self._client = openai.OpenAI(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)
        self.timeout = timeout

    @property
    def endpoint(self) -> str:
        return str(self._client.base_url)

    def request(self, messages: list[dict], seed: int, label: str = "") -> Exchange:
        """Send one request; a failure comes back as an Exchange, except `EndpointRefused`. `label` names the
        request (step, request, try) for transports that keep it somewhere; HTTP does not need it."""
        started = time.monotonic()
        try:
            raw = self._client.chat.completions.with_raw_response.create(
                model=self.model, messages=messages, temperature=self.temperature, seed=seed)
            response = raw.http_response
            result = parse_completion(response.status_code, response.headers.get("content-type", ""), response.text)
        except self._openai.APIStatusError as exc:
            result = self._status_failure(exc)
        except self._openai.APITimeoutError:
            result = Exchange("timeout", 0.0, f"no complete reply within {self.timeout:g} s (slow or stalled)")
        except self._openai.APIConnectionError as exc:
            result = Exchange("connection_error", 0.0, f"cannot reach {self.endpoint}: {exc.__cause__ or exc}")
        except Exception as exc:  # noqa: BLE001 - whatever the transport raises is a failed try, not a crash
            result = Exchange("client_error", 0.0, f"{type(exc).__name__}: {exc}")
        return Exchange(result.outcome, round(time.monotonic() - started, 3), result.message, result.content,
                        result.usage, result.retry_after)

    def _status_failure(self, exc) -> Exchange:
        status = exc.status_code
        detail = _snippet(exc.response.text if exc.response is not None else str(exc), 300)
        if status in REFUSED:
            raise EndpointRefused(f"{REFUSED[status]} (HTTP {status} from {self.endpoint}, model {self.model!r}): "
                                  f"{detail}")
        headers = exc.response.headers if exc.response is not None else {}
        return Exchange(f"http_{status}", 0.0, f"HTTP {status}: {detail}",
                        retry_after=retry_after_seconds(headers.get("retry-after")))
