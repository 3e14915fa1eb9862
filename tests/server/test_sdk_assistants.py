"""Assistants through langgraph-sdk: the served graphs' own, and ones a client makes."""

from __future__ import annotations

import httpx
import pytest
from harness import GRAPHS
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import NotFoundError, PermissionDeniedError


async def test_each_served_graph_has_an_assistant_found_by_id_or_by_graph_name(
    client: LangGraphClient,
) -> None:
    found = await client.assistants.search(limit=100)
    assert sorted(a["graph_id"] for a in found) == sorted(GRAPHS)
    (counter,) = await client.assistants.search(graph_id="counter")
    assert counter["name"] == "counter"
    assert await client.assistants.get("counter") == counter
    assert await client.assistants.get(counter["assistant_id"]) == counter
    assert await client.assistants.count() == len(GRAPHS)
    assert await client.assistants.count(graph_id="counter") == 1
    page = await client.assistants.search(limit=2, offset=1, sort_by="name", sort_order="asc")
    assert [a["name"] for a in page] == sorted(GRAPHS)[1:3]
    slim = await client.assistants.search(graph_id="counter", select=["assistant_id", "name"])
    assert slim == [{"assistant_id": counter["assistant_id"], "name": "counter"}]


async def test_schemas_graph_and_subgraphs_describe_the_graph(client: LangGraphClient) -> None:
    schemas = await client.assistants.get_schemas("greeter")
    assert set(schemas["state_schema"]["properties"]) == {"name", "text"}
    assert "greeting" in schemas["context_schema"]["properties"]
    drawing = await client.assistants.get_graph("counter")
    assert {n["id"] for n in drawing["nodes"]} >= {"__start__", "tick", "__end__"}
    assert {"source": "__start__", "target": "tick"} in [
        {k: e[k] for k in ("source", "target")} for e in drawing["edges"]
    ]
    subgraphs = await client.assistants.get_subgraphs("nested")
    assert list(subgraphs) == ["inner"]
    assert "notes" in subgraphs["inner"]["state_schema"]["properties"]
    assert await client.assistants.get_subgraphs("nested", namespace="inner") == subgraphs
    assert await client.assistants.get_subgraphs("counter") == {}


async def test_an_assistant_runs_its_graph_with_its_own_context_and_config(
    client: LangGraphClient,
) -> None:
    made = await client.assistants.create(
        "greeter",
        context={"greeting": "ahoy"},
        config={"tags": ["pirate"]},
        metadata={"team": "sea"},
        name="pirate",
    )
    assert made["graph_id"] == "greeter" and made["name"] == "pirate"
    assert made["context"] == {"greeting": "ahoy"}
    assert await client.assistants.get(made["assistant_id"]) == made
    out = await client.runs.wait(None, made["assistant_id"], input={"name": "Ann"})
    assert out["text"] == "ahoy Ann"
    # the run's own context wins over the assistant's
    out = await client.runs.wait(
        None, made["assistant_id"], input={"name": "Ann"}, context={"greeting": "hi"}
    )
    assert out["text"] == "hi Ann"
    # the served graph's assistant keeps the graph's default
    assert (await client.runs.wait(None, "greeter", input={"name": "Ann"}))["text"] == "hello Ann"
    assert [a["name"] for a in await client.assistants.search(metadata={"team": "sea"})] == [
        "pirate"
    ]
    assert await client.assistants.count(graph_id="greeter") == 2


async def test_an_assistant_is_patched_and_deleted(client: LangGraphClient) -> None:
    made = await client.assistants.create("greeter", context={"greeting": "ahoy"})
    patched = await client.assistants.update(
        made["assistant_id"], context={"greeting": "howdy"}, metadata={"v": 2}
    )
    assert patched["context"] == {"greeting": "howdy"} and patched["metadata"]["v"] == 2
    assert patched["version"] == made["version"] + 1
    out = await client.runs.wait(None, made["assistant_id"], input={"name": "Bo"})
    assert out.get("text") == "howdy Bo", out
    await client.assistants.delete(made["assistant_id"])
    with pytest.raises(NotFoundError):
        await client.assistants.get(made["assistant_id"])
    with pytest.raises(httpx.HTTPStatusError) as refused:  # runs.wait raises httpx's own
        await client.runs.wait(None, made["assistant_id"], input={"name": "Bo"})
    assert refused.value.response.status_code == 404


async def test_if_exists_do_nothing_gives_back_the_assistant_already_there(
    client: LangGraphClient,
) -> None:
    ident = "5c4d9a52-53b1-4bd5-9d44-2b8a2d1b9f01"
    first = await client.assistants.create("greeter", assistant_id=ident, name="one")
    again = await client.assistants.create(
        "greeter", assistant_id=ident, name="two", if_exists="do_nothing"
    )
    assert again == first


async def test_a_served_graphs_own_assistant_is_neither_patched_nor_deleted(
    client: LangGraphClient,
) -> None:
    with pytest.raises(PermissionDeniedError):
        await client.assistants.update("counter", metadata={"v": 2})
    with pytest.raises(NotFoundError):
        await client.assistants.delete((await client.assistants.get("counter"))["assistant_id"])
    assert (await client.assistants.get("counter"))["metadata"] == {"created_by": "system"}
