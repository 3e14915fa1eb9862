"""API keys in the browser: the page uses the same rules as every client, so a key sees only
its own threads, and without a key a server that wants one says so."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from browser import expect
from harness import RunningServer, start_server
from webserver import start_thread, web_settings

from threadline.server.auth import create_key
from threadline.server.db import Database


@pytest.fixture
def keyed(tmp_path: Path) -> Iterator[tuple[RunningServer, str, str]]:
    """A server that wants a key even on loopback, and keys of two scopes."""
    settings = web_settings(tmp_path, loopback_without_key=False)
    db = Database(settings.db)
    (_, alice), (_, bob) = create_key(db, "alice"), create_key(db, "bob")
    db.close()
    running, thread = start_server(settings)
    yield running, alice, bob
    running.stop()
    thread.join(timeout=20)


def use_key(page: Any, key: str) -> None:
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Use key").click()


def test_a_key_sees_only_its_own_threads(page: Any, keyed: Any) -> None:
    server, alice, bob = keyed
    tid = start_thread(server.url, "reviewed", {"order": "K1"}, key=alice)
    page.goto(f"{server.url}/ui/")
    expect(page.get_by_text("This server needs an API key: enter it above.")).to_be_visible()
    use_key(page, alice)
    expect(page.locator(f'article[data-thread="{tid}"]')).to_be_visible()
    use_key(page, bob)
    expect(page.get_by_text("Nothing waits for a person.")).to_be_visible()
    page.goto(f"{server.url}/ui/#/threads")
    expect(page.get_by_text("0 threads.")).to_be_visible()
    page.goto(f"{server.url}/ui/#/thread/{tid}")
    expect(page.get_by_text(f"thread {tid} not found")).to_be_visible()
    use_key(page, alice)  # the key is kept for the tab: alice sees her thread again
    expect(page.get_by_role("heading", name="Timeline")).to_be_visible()
    page.reload()
    expect(page.get_by_label("API key")).to_have_value(alice)
