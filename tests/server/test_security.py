"""API keys: a key sees and touches only what its scope made; no key, no entry.

Key B is tried against every endpoint that names one of key A's threads, runs or assistants:
each answers 404 (as if it did not exist, so ids are not confirmed), and A's data is unchanged.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest
from harness import GRAPHS, RunningServer, start_server
from langgraph_sdk import get_client
from langgraph_sdk.errors import NotFoundError

from threadline.server.auth import create_key, revoke_key
from threadline.server.db import Database
from threadline.server.settings import ServerSettings


@pytest.fixture
def keyed(settings: ServerSettings) -> Iterator[tuple[RunningServer, str, str, str]]:
    """A server that wants a key even on loopback, and two keys of different scopes."""
    db = Database(settings.db)
    (_, a), (b_info, b) = create_key(db, "alice"), create_key(db, "bob")
    db.close()
    running, thread = start_server(replace(settings, loopback_without_key=False))
    yield running, a, b, b_info.key_id
    running.stop()
    thread.join(timeout=20)


def call(url: str, key: str | None, method: str, path: str, body: Any = None) -> httpx.Response:
    headers = {"x-api-key": key} if key else {}
    return httpx.request(method, url + path, headers=headers, json=body, timeout=30)


async def a_world(url: str, key: str) -> dict[str, Any]:
    """Key A's thread (paused at an interrupt), its run, an assistant, a store item."""
    client = get_client(url=url, api_key=key)
    thread = await client.threads.create(metadata={"owner": "alice"})
    tid = thread["thread_id"]
    run = await client.runs.create(tid, "approval", input={"request": "r1"})
    await client.runs.join(tid, run["run_id"])
    assistant = await client.assistants.create("approval", name="alice's", config={"tags": ["a"]})
    await client.store.put_item(["notes"], "k", {"v": 1})
    return {"tid": tid, "rid": run["run_id"], "aid": assistant["assistant_id"]}


def endpoints(w: dict[str, Any]) -> list[tuple[str, str, Any]]:
    t, r, a = w["tid"], w["rid"], w["aid"]
    run = {"assistant_id": "approval", "command": {"resume": "stolen"}}
    return [
        ("GET", f"/threads/{t}", None),
        ("PATCH", f"/threads/{t}", {"metadata": {"owner": "bob"}}),
        ("DELETE", f"/threads/{t}", None),
        ("POST", f"/threads/{t}/copy", None),
        ("GET", f"/threads/{t}/state", None),
        ("POST", f"/threads/{t}/state", {"values": {"decision": "stolen"}, "as_node": "review"}),
        ("POST", f"/threads/{t}/state/checkpoint", {"subgraphs": False}),
        ("GET", f"/threads/{t}/history", None),
        ("POST", f"/threads/{t}/history", {"limit": 5}),
        ("POST", f"/threads/{t}/runs", run),
        ("POST", f"/threads/{t}/runs/wait", run),
        ("POST", f"/threads/{t}/runs/stream", run),
        ("GET", f"/threads/{t}/runs", None),
        ("GET", f"/threads/{t}/runs/{r}", None),
        ("GET", f"/threads/{t}/runs/{r}/join", None),
        ("GET", f"/threads/{t}/runs/{r}/stream", None),
        ("POST", f"/threads/{t}/runs/{r}/cancel", None),
        ("DELETE", f"/threads/{t}/runs/{r}", None),
        ("GET", f"/assistants/{a}", None),
        ("PATCH", f"/assistants/{a}", {"name": "bob's now"}),
        ("DELETE", f"/assistants/{a}", None),
        ("GET", f"/assistants/{a}/schemas", None),
        ("GET", f"/assistants/{a}/graph", None),
        ("GET", f"/assistants/{a}/subgraphs", None),
        ("POST", "/runs/wait", {"assistant_id": a}),
    ]


async def test_another_key_cannot_see_or_touch_anything(keyed: Any) -> None:
    server, a, b, _ = keyed
    world = await a_world(server.url, a)
    before = call(server.url, a, "GET", f"/threads/{world['tid']}/state").json()
    for method, path, body in endpoints(world):
        response = call(server.url, b, method, path, body)
        assert response.status_code == 404, (method, path, response.status_code, response.text)
    after = call(server.url, a, "GET", f"/threads/{world['tid']}/state").json()
    assert after == before
    assert call(server.url, a, "GET", f"/threads/{world['tid']}").json()["metadata"] == {
        "owner": "alice",
        "graph_id": "approval",
        "assistant_id": call(server.url, a, "GET", "/assistants/approval").json()["assistant_id"],
    }
    assert call(server.url, a, "GET", f"/assistants/{world['aid']}").json()["name"] == "alice's"


async def test_searches_list_only_the_callers_own(keyed: Any) -> None:
    server, a, b, _ = keyed
    await a_world(server.url, a)
    bob = get_client(url=server.url, api_key=b)
    assert await bob.threads.search() == []
    seen = await bob.assistants.search(limit=100)
    assert sorted(x["name"] for x in seen) == sorted(GRAPHS)
    assert (await bob.store.search_items(["notes"]))["items"] == []
    assert (await bob.store.list_namespaces())["namespaces"] == []
    with pytest.raises(NotFoundError):
        await bob.store.get_item(["notes"], "k")
    alice = get_client(url=server.url, api_key=a)
    assert (await alice.store.get_item(["notes"], "k"))["value"] == {"v": 1}


def test_no_key_or_a_revoked_one_is_refused(keyed: Any, settings: ServerSettings) -> None:
    server, _, b, b_id = keyed
    assert call(server.url, None, "GET", "/threads/x").status_code == 401
    assert call(server.url, "tl_nope_nope", "POST", "/threads/search", {}).status_code == 401
    assert call(server.url, b, "POST", "/threads/search", {}).status_code == 200
    db = Database(settings.db)
    assert revoke_key(db, b_id)
    db.close()
    refused = call(server.url, b, "POST", "/threads/search", {})
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    assert call(server.url, None, "GET", "/ok").status_code == 200


def test_bad_requests_name_the_field_and_never_show_a_trace(served: RunningServer) -> None:
    bad = call(served.url, None, "POST", "/threads", {"thread_id": 5, "metadata": "x"})
    assert bad.status_code == 422
    fields = {tuple(p["loc"]) for p in bad.json()["detail"]}
    assert ("body", "thread_id") in fields and ("body", "metadata") in fields
    extra = call(served.url, None, "POST", "/threads/search", {"bogus": 1})
    assert extra.status_code == 422 and extra.json()["detail"][0]["loc"] == ["body", "bogus"]
    mode = call(
        served.url,
        None,
        "POST",
        "/runs/wait",
        {"assistant_id": "approval", "stream_mode": "events"},
    )
    assert mode.status_code == 422 and "Traceback" not in mode.text
    unknown = call(served.url, None, "POST", "/runs/wait", {"assistant_id": "nope"})
    assert unknown.status_code == 404 and "nope" in unknown.json()["detail"]


def test_a_body_over_the_limit_is_refused_before_it_is_read(settings: ServerSettings) -> None:
    running, thread = start_server(replace(settings, max_body_bytes=1000))
    try:
        big = call(running.url, None, "POST", "/threads", {"metadata": {"x": "y" * 5000}})
        assert big.status_code == 413
        assert call(running.url, None, "POST", "/threads", {"metadata": {}}).status_code == 200
    finally:
        running.stop()
        thread.join(timeout=20)


async def test_bulk_endpoints_skip_another_keys_threads_and_runs(keyed: Any) -> None:
    server, a, b, _ = keyed
    world = await a_world(server.url, a)
    bob = get_client(url=server.url, api_key=b)
    assert await bob.threads.prune([world["tid"]]) == {"pruned_count": 0}
    assert await bob.threads.prune([world["tid"]], strategy="keep_latest") == {"pruned_count": 0}
    alice = get_client(url=server.url, api_key=a)
    assert len(await alice.threads.get_history(world["tid"])) > 1
    tid = (await alice.threads.create())["thread_id"]
    slow = await alice.runs.create(tid, "counter", input={"n": 2, "delay": 0.5})
    await bob.runs.cancel_many(run_ids=[slow["run_id"]])
    await bob.runs.cancel_many(status="all")
    assert (await alice.runs.join(tid, slow["run_id"]))["n"] == 3
    assert (await alice.runs.get(tid, slow["run_id"]))["status"] == "success"
