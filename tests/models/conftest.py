"""The model tests run twice: here, with langchain-core's message classes, and again in a
subprocess that blocks langchain-core (``test_models_without_langchain.py``).

``THREADLINE_TEST_BLOCK_LANGCHAIN=1`` blocks it, before anything imports ``threadline.messages``.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest

if os.environ.get("THREADLINE_TEST_BLOCK_LANGCHAIN") == "1":
    sys.modules["langchain_core"] = None  # type: ignore[assignment]  # import now fails

from chat_server import ChatServer


@pytest.fixture
def server() -> Iterator[ChatServer]:
    """A chat-completions server on a free port of 127.0.0.1, its replies scripted by the test."""
    with ChatServer() as running:
        yield running
