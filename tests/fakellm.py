"""A scripted OpenAI-compatible chat server for tests: real HTTP on localhost, one thread per request.

Each POST to /v1/chat/completions takes the next action from the script: a reply (with token usage), an
HTTP error status (with headers, e.g. Retry-After), or a delay before replying (to trip client timeouts).
Every request body is kept so tests can check what the model was told.
"""
from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass(frozen=True)
class Reply:
    content: str
    prompt_tokens: int = 100
    completion_tokens: int = 50
    delay: float = 0.0


@dataclass(frozen=True)
class Status:
    code: int
    headers: dict = field(default_factory=dict)
    message: str = "scripted error"


class FakeLLM:
    """Serves `script` in order; once it runs out, every request gets HTTP 503."""

    def __init__(self, script: list[Reply | Status]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next(self, body: dict) -> Reply | Status:
        with self._lock:
            self.requests.append(body)
            return self.script.pop(0) if self.script else Status(503, message="script exhausted")

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _send(self, code: int, payload: dict, headers: dict | None = None) -> None:
                data = json.dumps(payload).encode()
                try:
                    self.send_response(code)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    for key, value in (headers or {}).items():
                        self.send_header(key, value)
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.endswith("/chat/completions"):
                    self._send(404, {"error": {"message": f"no route {self.path}"}})
                    return
                action = fake._next(body)
                if isinstance(action, Status):
                    self._send(action.code, {"error": {"message": action.message, "type": "scripted"}}, action.headers)
                    return
                time.sleep(action.delay)
                self._send(200, {
                    "id": f"chatcmpl-{len(fake.requests)}", "object": "chat.completion", "created": int(time.time()),
                    "model": body.get("model", "fake"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": action.content}}],
                    "usage": {"prompt_tokens": action.prompt_tokens, "completion_tokens": action.completion_tokens,
                              "total_tokens": action.prompt_tokens + action.completion_tokens},
                })

        return Handler
