"""Start a real threadline server (uvicorn on a free loopback port) in a thread."""

from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path

import served_graphs
import uvicorn

from threadline import StateGraph
from threadline.server.app import create_app
from threadline.server.settings import ServerSettings

HERE = Path(__file__).parent
# Every StateGraph of served_graphs.py, served under its variable's name
GRAPHS = {
    name: f"served_graphs.py:{name}"
    for name, value in vars(served_graphs).items()
    if isinstance(value, StateGraph)
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class RunningServer:
    url: str
    settings: ServerSettings
    server: uvicorn.Server

    def stop(self) -> None:
        self.server.should_exit = True


def start_server(settings: ServerSettings) -> tuple[RunningServer, threading.Thread]:
    port = free_port()
    settings = replace(settings, port=port)
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the test server did not start")
        time.sleep(0.02)
    return RunningServer(f"http://127.0.0.1:{port}", settings, server), thread
