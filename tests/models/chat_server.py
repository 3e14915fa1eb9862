"""A real chat-completions server for the tests: plain HTTP on 127.0.0.1, scripted per test.

Each POST to ``/v1/chat/completions`` takes the next scripted ``Reply`` (a JSON body, a stream
of server-sent events, an error status, a delay) and records what it was sent in ``requests``.
"""

from __future__ import annotations

import json
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    """One scripted answer. ``events`` makes it a stream (``[DONE]`` added unless ``done`` is
    False); ``body`` (a dict, sent as JSON, or raw text) a plain reply. ``delay`` waits before
    answering; ``gate`` (with ``gate_after``) holds the stream after that many events until set.
    """

    status: int = 200
    body: Any = None
    events: list[Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    done: bool = True
    gate: threading.Event | None = None
    gate_after: int = 1


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: Any


class ChatServer:
    """Serves scripted replies in a thread; ``base_url`` is what a client is pointed at."""

    def __init__(self) -> None:
        self.replies: deque[Reply] = deque()
        self.requests: list[Request] = []
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self.base_url = f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def _serve(self) -> None:
        self._httpd.serve_forever(poll_interval=0.02)  # a short poll: a quick shutdown

    def __enter__(self) -> ChatServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def script(self, *replies: Reply | dict[str, Any]) -> None:
        """Queue replies; a dict is a 200 JSON body."""
        self.replies.extend(r if isinstance(r, Reply) else Reply(body=r) for r in replies)

    @property
    def bodies(self) -> list[Any]:
        return [request.body for request in self.requests]


def _handler(server: ChatServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass  # keep the test output clean

        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = raw.decode()
            server.requests.append(Request(self.path, dict(self.headers), body))
            reply = server.replies.popleft() if server.replies else _unscripted()
            try:
                time.sleep(reply.delay)
                if self.path != "/v1/chat/completions":
                    self._plain(Reply(status=404, body={"error": {"message": "no such path"}}))
                elif reply.events is not None:
                    self._stream(reply)
                else:
                    self._plain(reply)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up (a timeout test)

        def _plain(self, reply: Reply) -> None:
            text = reply.body if isinstance(reply.body, str) else json.dumps(reply.body)
            data = text.encode()
            self.send_response(reply.status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in reply.headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def _stream(self, reply: Reply) -> None:
            self.send_response(reply.status)
            self.send_header("Content-Type", "text/event-stream")
            self.end_headers()
            events = list(reply.events or []) + (["[DONE]"] if reply.done else [])
            for n, event in enumerate(events):
                if reply.gate is not None and n == reply.gate_after:
                    reply.gate.wait(10)
                payload = event if isinstance(event, str) else json.dumps(event)
                self.wfile.write(f"data: {payload}\n\n".encode())
                self.wfile.flush()

    return Handler


def _unscripted() -> Reply:
    return Reply(status=500, body={"error": {"message": "the test server has no reply left"}})


# ---------------------------------------------------------------------- reply bodies
def completion(
    content: str | None = "",
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    id: str = "chatcmpl-1",
    model: str = "test-model",
    finish_reason: str = "stop",
    usage: tuple[int, int] | None = (5, 3),
) -> dict[str, Any]:
    """A chat-completions reply body; ``tool_calls`` as ``{"id", "name", "arguments"}``."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [_wire_call(call) for call in tool_calls]
    body: dict[str, Any] = {
        "id": id,
        "object": "chat.completion",
        "created": 1,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
    }
    if usage:
        body["usage"] = {
            "prompt_tokens": usage[0],
            "completion_tokens": usage[1],
            "total_tokens": sum(usage),
        }
    return body


def _wire_call(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": call["id"],
        "type": "function",
        "function": {"name": call["name"], "arguments": call["arguments"]},
    }


def delta(
    content: str | None = None,
    *,
    tool_calls: list[dict[str, Any]] | None = None,
    finish_reason: str | None = None,
    id: str = "chatcmpl-2",
) -> dict[str, Any]:
    """One streamed event; ``tool_calls`` pieces as the wire has them (with ``index``)."""
    piece: dict[str, Any] = {}
    if content is not None:
        piece["content"] = content
    if tool_calls is not None:
        piece["tool_calls"] = tool_calls
    choice = {"index": 0, "delta": piece, "finish_reason": finish_reason}
    return {"id": id, "object": "chat.completion.chunk", "model": "test-model", "choices": [choice]}


def usage_event(prompt: int, completion: int, id: str = "chatcmpl-2") -> dict[str, Any]:
    usage = {"prompt_tokens": prompt, "completion_tokens": completion}
    usage["total_tokens"] = prompt + completion
    return {"id": id, "object": "chat.completion.chunk", "choices": [], "usage": usage}
