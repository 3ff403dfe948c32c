"""A real local HTTP server that speaks the OpenAI and Anthropic chat APIs, for tests.

It answers ``POST /v1/chat/completions`` (OpenAI shape) and ``POST /v1/messages`` (Anthropic shape)
with the replies a test queued, in order, records every request (path, headers, JSON body), and can
fail or stall on demand. Any test package can use it::

    from tests.llm.fake_llm_server import FakeLLMServer, FakeReply

    with FakeLLMServer() as server:
        server.queue(FakeReply(status=500), "the answer")
        settings = Settings(home=tmp_path, llm_provider="openai", llm_url=server.openai_url, llm_model="m")
        ...
        assert server.requests[-1].body["model"] == "m"

(``tests`` is a package, so the import works from every test module; ``tests/llm/conftest.py`` has a
``fake_llm`` fixture for tests in this package.) A request that finds the queue empty gets HTTP 500
with "no reply queued", so a test that asks more than it expects fails loudly.
"""

from __future__ import annotations

import json
import threading
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OPENAI_PATH = "/v1/chat/completions"
ANTHROPIC_PATH = "/v1/messages"


@dataclass(frozen=True)
class FakeReply:
    """One queued reply.

    Attributes:
        text: the answer text, wrapped in the shape of the endpoint that is called.
        status: the HTTP status; an error status sends an error body in the endpoint's shape.
        body: a raw JSON body sent as is (overrides ``text``), for malformed-answer tests.
        delay_seconds: wait this long before answering (cut short when the server stops).
        headers: extra response headers (``Retry-After``...).
    """

    text: str = ""
    status: int = 200
    body: Any = None
    delay_seconds: float = 0.0
    headers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class RecordedRequest:
    """A request the server received. Header names are lower-cased."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any


class FakeLLMServer:
    """The fake LLM endpoint on ``127.0.0.1`` and a free port, served from a background thread."""

    def __init__(self) -> None:
        self._replies: deque[FakeReply] = deque()
        self._requests: list[RecordedRequest] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._httpd.daemon_threads = True
        # A short poll interval: shutdown() waits up to one interval, once per test.
        self._thread = threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )

    @property
    def url(self) -> str:
        """The server root (``http://127.0.0.1:PORT``): the Anthropic-style base URL."""
        host, port = self._httpd.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def openai_url(self) -> str:
        """The OpenAI-style base URL (``http://127.0.0.1:PORT/v1``)."""
        return f"{self.url}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """A copy of the requests received so far, oldest first."""
        with self._lock:
            return list(self._requests)

    def queue(self, *replies: FakeReply | str) -> None:
        """Append replies; a plain string is a successful answer with that text."""
        with self._lock:
            self._replies.extend(FakeReply(text=r) if isinstance(r, str) else r for r in replies)

    @property
    def pending(self) -> int:
        """How many queued replies have not been sent yet."""
        with self._lock:
            return len(self._replies)

    def start(self) -> FakeLLMServer:
        """Start serving (returns self)."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and wake any reply that is still waiting out its delay."""
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> FakeLLMServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    # -- called by the request handler ----------------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._lock:
            self._requests.append(request)

    def _pop(self) -> FakeReply | None:
        with self._lock:
            return self._replies.popleft() if self._replies else None

    def _wait(self, seconds: float) -> None:
        self._stopping.wait(seconds)


def success_body(path: str, text: str, model: str) -> dict[str, Any]:
    """A successful response carrying ``text`` in the shape of ``path``'s API."""
    if path == ANTHROPIC_PATH:
        return {
            "id": "msg_fake",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 10},
        }
    return {
        "id": "chatcmpl-fake",
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
    }


def error_body(path: str, status: int, message: str) -> dict[str, Any]:
    """An error response in the shape of ``path``'s API."""
    if path == ANTHROPIC_PATH:
        return {"type": "error", "error": {"type": "api_error", "message": message}}
    return {"error": {"message": message, "type": "server_error", "code": status}}


def _handler_for(server: FakeLLMServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length)
            try:
                body: Any = json.loads(raw) if raw else None
            except ValueError:
                body = raw.decode("utf-8", "replace")
            headers = {name.lower(): value for name, value in self.headers.items()}
            server._record(RecordedRequest("POST", self.path, headers, body))
            if self.path not in (OPENAI_PATH, ANTHROPIC_PATH):
                self._send(404, error_body(self.path, 404, f"no route {self.path}"), {})
                return
            reply = server._pop()
            if reply is None:
                self._send(500, error_body(self.path, 500, "fake LLM server: no reply queued"), {})
                return
            if reply.delay_seconds:
                server._wait(reply.delay_seconds)
            model = body.get("model", "") if isinstance(body, dict) else ""
            if reply.body is not None:
                payload = reply.body
            elif reply.status >= 400:
                payload = error_body(self.path, reply.status, reply.text or f"fake error {reply.status}")
            else:
                payload = success_body(self.path, reply.text, model)
            self._send(reply.status, payload, reply.headers)

        def _send(self, status: int, payload: Any, headers: dict[str, str]) -> None:
            data = payload.encode() if isinstance(payload, str) else json.dumps(payload).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for name, value in headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test): nothing left to tell it

        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep pytest output clean

    return Handler
