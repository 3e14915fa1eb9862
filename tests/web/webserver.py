"""Helpers of the browser tests: the server's settings, threads made through the API."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import httpx

from threadline.server.settings import ServerSettings

HERE = Path(__file__).parent
NAMES = ("typed", "typed_model", "reviewed", "steps", "failing", "pair", "inbox_shaped", "traced")
GRAPHS = {name: f"web_graphs.py:{name}" for name in NAMES}
SCREENSHOTS = HERE / "screenshots"


def web_settings(tmp: Path, **changes: Any) -> ServerSettings:
    return ServerSettings(graphs=GRAPHS, base_dir=HERE, db=f"sqlite:///{tmp}/web.db", **changes)


# One client for every call the tests make (making one per call costs a noticeable moment)
HTTP = httpx.Client(timeout=30)


def _headers(key: str | None) -> dict[str, str]:
    return {"x-api-key": key} if key else {}


def start_thread(
    url: str,
    graph: str,
    values: dict[str, Any],
    key: str | None = None,
    metadata: dict[str, Any] | None = None,
    **run: Any,
) -> str:
    """A thread of ``graph`` run with ``values`` (and ``run``'s options) until it stops; its id.

    Its metadata has ``tag``: the thread id's first 8 characters, for ``inbox_of``.
    """
    tid = str(uuid.uuid4())
    body = {"thread_id": tid, "metadata": {"tag": tid[:8], **(metadata or {})}}
    HTTP.post(f"{url}/threads", json=body, headers=_headers(key))
    done = HTTP.post(
        f"{url}/threads/{tid}/runs/wait",
        json={"assistant_id": graph, "input": values, **run},
        headers=_headers(key),
    )
    assert done.status_code == 200, done.text  # a failed start shows here, not as a missing card
    return tid


def inbox_of(url: str, tid: str) -> str:
    """The address of the inbox showing only this thread (the tests share one server)."""
    return f"{url}/ui/#/inbox?metadata=tag%3D{tid[:8]}"


def thread_of(url: str, tid: str, key: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = HTTP.get(f"{url}/threads/{tid}", headers=_headers(key)).json()
    return found


def history_of(url: str, tid: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = HTTP.get(
        f"{url}/threads/{tid}/history", params={"limit": 100}
    ).json()
    return found


def screenshot(page: Any, name: str) -> None:
    SCREENSHOTS.mkdir(exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
