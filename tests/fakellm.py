"""A scripted OpenAI-compatible chat server for tests: real HTTP on localhost, one thread per request.

Each POST to /v1/chat/completions takes the next action from the script and behaves the way real endpoints
do on a bad day:

* `Reply`: a well-formed completion (with token usage), optionally after a delay, or held until its `gate`
  (a condition the test names, e.g. "all K requests have arrived") holds, which orders events without
  guessing how long a loaded machine takes;
* `Status`: an HTTP error with a JSON error body and headers (401, 404 unknown model, 429 + Retry-After, 500);
* `Raw`: any status, content type and body, e.g. a 200 whose JSON is cut off, or an HTML error page;
* `Stall`: the status line and headers, then a part of the body, then silence for `seconds`.

Every request body is kept, with when it arrived and when its answer finished, so tests can check what the
model was told and whether requests overlapped in time.
"""
from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

GATE_LIMIT_S = 60.0   # a gate that never opens sends its reply anyway, for the test's assertions to catch


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int = 100
    completion_tokens: int = 50
    delay: float = 0.0
    gate: Callable[[], bool] | None = None   # held until this returns True (at most GATE_LIMIT_S)


@dataclass(frozen=True)
class Status:
    code: int
    headers: dict = field(default_factory=dict)
    message: str = "scripted error"


@dataclass(frozen=True)
class Raw:
    body: str
    code: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Stall:
    seconds: float
    partial: str = '{"id": "chatcmpl-stall", "choices": ['


@dataclass
class Request:
    body: dict
    arrived: float
    finished: float | None = None

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])


def completion(content: str, model: str, prompt_tokens: int = 100, completion_tokens: int = 50) -> dict:
    """A chat.completion body as OpenAI-compatible servers send it."""
    return {"id": "chatcmpl-fake", "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens}}


class FakeLLM:
    """Serves `script` in order; once it runs out, every request gets `after` (HTTP 503 by default)."""

    def __init__(self, script: list, after=None):
        self.script = list(script)
        self.after = after or Status(503, message="script exhausted")
        self.log: list[Request] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def requests(self) -> list[dict]:
        """The request bodies, in arrival order."""
        return [r.body for r in self.log]

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next(self, body: dict) -> tuple[Request, object]:
        with self._lock:
            request = Request(body=body, arrived=time.monotonic())
            self.log.append(request)
            return request, (self.script.pop(0) if self.script else self.after)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, data: bytes, content_type: str = "application/json",
                      headers: dict | None = None) -> None:
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", content_type)
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def _stall(self, action: Stall) -> None:
                try:
                    self.send_response(200)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", "100000")
                    self.end_headers()
                    self.wfile.write(action.partial.encode())
                    self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
                time.sleep(action.seconds)
                self.close_connection = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, json.dumps({"error": {"message": f"no route {self.path}"}}).encode())
                    return
                request, action = fake._next(body)
                try:
                    self._act(action, body)
                finally:
                    request.finished = time.monotonic()

            def _act(self, action, body: dict) -> None:
                if isinstance(action, Status):
                    error = {"error": {"message": action.message, "type": "scripted", "code": action.code}}
                    self._send(action.code, json.dumps(error).encode(), headers=action.headers)
                elif isinstance(action, Raw):
                    self._send(action.code, action.body.encode(), action.content_type)
                elif isinstance(action, Stall):
                    self._stall(action)
                else:
                    if action.gate is not None:
                        _wait_for(action.gate)
                    time.sleep(action.delay)
                    payload = completion(action.content, body.get("model", "fake"), action.prompt_tokens,
                                         action.completion_tokens)
                    self._send(200, json.dumps(payload).encode())

        return Handler


def _wait_for(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + GATE_LIMIT_S
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)


def plan_text(*titles: str) -> str:
    """A planning reply (agent.ideas) listing `titles` as ideas, in the JSON block the prompt asks for."""
    ideas = [{"title": t, "evidence": f"evidence for {t}", "change": f"change for {t}"} for t in titles]
    return "Here is the plan.\n```json\n" + json.dumps({"ideas": ideas}) + "\n```\n"
