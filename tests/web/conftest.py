"""A real threadline server (uvicorn on a free port) serving tests/web/web_graphs.py, and a
headless Chromium driven by Playwright."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "server"))  # the server tests' harness
from browser import ARGS, require_browser
from harness import RunningServer, start_server
from webserver import web_settings


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    executable = require_browser()
    from playwright.sync_api import expect, sync_playwright

    expect.set_options(timeout=10_000)  # the test machine may be busy
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=str(executable), args=ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture(scope="session")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """One server for the browser tests (each test makes threads of its own)."""
    running, thread = start_server(web_settings(tmp_path_factory.mktemp("web")))
    yield running
    running.stop()
    thread.join(timeout=20)


@pytest.fixture(scope="session")
def context(browser: Any) -> Iterator[Any]:
    made = browser.new_context(viewport={"width": 1280, "height": 800})
    made.set_default_timeout(10_000)
    yield made
    made.close()


@pytest.fixture
def page(context: Any) -> Iterator[Any]:
    """A new tab for each test (so a fresh sessionStorage: no API key kept), 1280x800."""
    tab = context.new_page()
    yield tab
    tab.close()
