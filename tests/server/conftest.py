"""A real threadline server per test, on a SQLite file of its own."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from harness import GRAPHS, HERE, RunningServer, start_server
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient

from threadline.server.settings import ServerSettings


@pytest.fixture
def settings(tmp_path: Path) -> ServerSettings:
    return ServerSettings(graphs=GRAPHS, base_dir=HERE, db=f"sqlite:///{tmp_path}/server.db")


@pytest.fixture
def served(settings: ServerSettings) -> Iterator[RunningServer]:
    running, thread = start_server(settings)
    yield running
    running.stop()
    thread.join(timeout=20)


@pytest.fixture
def client(served: RunningServer) -> LangGraphClient:
    return get_client(url=served.url)
