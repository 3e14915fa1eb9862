"""Round trips counted on the wire, for the PostgreSQL saver's tests.

``WireCounter`` is a TCP proxy between the saver and the server that counts *turns* (each time
the client speaks again after the server answered: one round trip) and parses the client's
protocol messages to record the SQL it sends, so a test can also check that a put is one
transaction: one statement in autocommit (or, with retention, one ``BEGIN`` and one ``COMMIT``
around the put and the prune). The ``wire`` fixture needs ``url`` (``postgres_fixtures``)
imported next to it.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from postgres_fixtures import postgres_saver

from threadline.checkpoint.postgres import PostgresSaver

# -- counting what goes over the wire ------------------------------------------------------------


class WireCounter:
    """A TCP proxy to the server that counts round trips and records the SQL sent through it.

    A turn starts each time the client sends after the server last spoke: a round trip. Each
    execution is recorded at its Bind message (prepared statements are parsed once only).
    ``received`` counts the bytes the server sent.
    """

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.turns = 0
        self.received = 0
        self.statements: list[str] = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._closed = False
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def reset(self) -> None:
        with self.lock:
            self.turns = 0
            self.received = 0
            self.statements.clear()

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for s in self._sockets:
            with contextlib.suppress(OSError):
                s.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            self._sockets += [client, server]
            state = {"last": "server", "buffer": b"", "started": False}
            threading.Thread(
                target=self._pump, args=(client, server, True, state), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, False, state), daemon=True
            ).start()

    def _pump(self, src: socket.socket, dst: socket.socket, upstream: bool, state: Any) -> None:
        while True:
            try:
                data = src.recv(65536)
            except OSError:
                data = b""
            if not data:
                with contextlib.suppress(OSError):
                    dst.shutdown(socket.SHUT_WR)
                return
            with self.lock:
                if upstream:
                    if state["last"] == "server" and state["started"]:
                        self.turns += 1
                    state["last"] = "client"
                    self._parse(state, data)
                else:
                    state["last"] = "server"
                    self.received += len(data)
            try:
                dst.sendall(data)
            except OSError:
                return

    def _parse(self, state: Any, data: bytes) -> None:
        """Pick the SQL out of the client's messages (startup first, then typed messages)."""
        buf = state["buffer"] + data
        while True:
            if not state["started"]:
                if len(buf) < 8:
                    break
                (length, code) = struct.unpack("!ii", buf[:8])
                if len(buf) < length:
                    break
                buf = buf[length:]
                if code not in (80877103, 80877104):  # SSLRequest, GSSENCRequest
                    state["started"] = True
                continue
            if len(buf) < 5:
                break
            kind = buf[:1]
            (length,) = struct.unpack("!i", buf[1:5])
            if len(buf) < 1 + length:
                break
            body, buf = buf[5 : 1 + length], buf[1 + length :]
            if kind == b"Q":  # simple query
                self.statements.append(body.split(b"\0", 1)[0].decode())
            elif kind == b"P":  # Parse: remember the statement by name ("" for unnamed)
                name, text = body.split(b"\0")[:2]
                state.setdefault("named", {})[name] = text.decode()
            elif kind == b"B":  # Bind: one execution of a parsed (maybe prepared) statement
                name = body.split(b"\0")[1]
                self.statements.append(state.get("named", {}).get(name, "?"))
        state["buffer"] = buf

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_s = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        q = "sslmode=disable" + ("&" + parts.query if parts.query else "")
        return urlunsplit((parts.scheme, netloc_s, parts.path, q, parts.fragment))

    def keywords(self, word: str) -> int:
        return sum(1 for s in self.statements if s.strip().upper().startswith(word))


@pytest.fixture
def wire(url: str) -> Iterator[WireCounter]:
    parts = urlsplit(url)
    counter = WireCounter((parts.hostname or "127.0.0.1", parts.port or 5432))
    yield counter
    counter.close()


@pytest.fixture
def counted(wire: WireCounter, url: str) -> Iterator[tuple[PostgresSaver, WireCounter]]:
    with postgres_saver(url=wire.url(url)) as s:
        yield s, wire
