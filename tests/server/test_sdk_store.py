"""The store through langgraph-sdk: items put, read, searched and deleted; namespaces listed;
what a graph remembers is what the API reads."""

from __future__ import annotations

import asyncio

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError


async def test_items_are_put_read_searched_and_deleted(client: LangGraphClient) -> None:
    await client.store.put_item(["users", "ann"], "prefs", {"theme": "dark", "lang": "en"})
    await client.store.put_item(["users", "bob"], "prefs", {"theme": "light", "lang": "en"})
    await client.store.put_item(["users", "bob"], "notes", {"text": "likes tea"})
    item = await client.store.get_item(["users", "ann"], "prefs")
    assert item["namespace"] == ["users", "ann"] and item["key"] == "prefs"
    assert item["value"] == {"theme": "dark", "lang": "en"}
    assert item["created_at"] and item["updated_at"]

    found = await client.store.search_items(["users"], limit=10)
    assert sorted((i["namespace"][1], i["key"]) for i in found["items"]) == [
        ("ann", "prefs"),
        ("bob", "notes"),
        ("bob", "prefs"),
    ]
    dark = await client.store.search_items(["users"], filter={"theme": "dark"})
    assert [i["namespace"] for i in dark["items"]] == [["users", "ann"]]
    refreshed = await client.store.search_items(["users", "bob"], refresh_ttl=True)
    assert len(refreshed["items"]) == 2
    bob = await client.store.search_items(["users", "bob"], limit=1)
    assert len(bob["items"]) == 1

    await client.store.put_item(["users", "ann"], "prefs", {"theme": "light"})
    assert (await client.store.get_item(["users", "ann"], "prefs"))["value"] == {"theme": "light"}
    await client.store.delete_item(["users", "ann"], "prefs")
    with pytest.raises(NotFoundError):
        await client.store.get_item(["users", "ann"], "prefs")


async def test_namespaces_are_listed_by_prefix_suffix_and_depth(client: LangGraphClient) -> None:
    for ns in (["a", "x", "1"], ["a", "y", "1"], ["a", "y", "2"], ["b", "x", "1"]):
        await client.store.put_item(ns, "k", {"v": 1})
    listed = await client.store.list_namespaces()
    assert sorted(map(tuple, listed["namespaces"])) == [
        ("a", "x", "1"),
        ("a", "y", "1"),
        ("a", "y", "2"),
        ("b", "x", "1"),
    ]
    under_a = await client.store.list_namespaces(prefix=["a"], max_depth=2)
    assert sorted(map(tuple, under_a["namespaces"])) == [("a", "x"), ("a", "y")]
    ones = await client.store.list_namespaces(suffix=["1"])
    assert len(ones["namespaces"]) == 3
    assert len((await client.store.list_namespaces(limit=2))["namespaces"]) == 2


async def test_what_a_graph_stores_the_api_reads(client: LangGraphClient) -> None:
    await client.runs.wait(None, "memo", input={"who": "cy", "text": "call back"})
    item = await client.store.get_item(["memos", "cy"], "last")
    assert item["value"] == {"text": "call back"}


async def test_an_items_ttl_is_in_minutes_as_langgraph_servers(client: LangGraphClient) -> None:
    await client.store.put_item(["brief"], "note", {"v": 1}, ttl=0.01)  # type: ignore[arg-type]
    await asyncio.sleep(0.1)  # seconds would have expired it by now; 0.01 minutes is 0.6 s
    assert (await client.store.get_item(["brief"], "note"))["value"] == {"v": 1}
    await asyncio.sleep(0.8)
    with pytest.raises(NotFoundError):
        await client.store.get_item(["brief"], "note")
