"""Every stream mode through langgraph-sdk, subgraphs' events, and rejoining a stream."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
from harness import start_server
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.schema import StreamPart

from threadline.server.settings import ServerSettings


async def _stream(client: LangGraphClient, graph: str, **kwargs: Any) -> list[StreamPart]:
    tid = (await client.threads.create())["thread_id"]
    return [p async for p in client.runs.stream(tid, graph, **kwargs)]


def _events(parts: list[StreamPart]) -> list[str]:
    return [p.event for p in parts]


async def test_values_and_updates(client: LangGraphClient) -> None:
    parts = await _stream(client, "counter", input={"n": 1})
    assert parts[0].event == "metadata" and set(parts[0].data) >= {"run_id", "attempt"}
    assert [p.data for p in parts[1:]] == [
        {"n": 1, "steps": []},
        {"n": 2, "steps": [2]},
        {"n": 3, "steps": [2, 3]},
    ]
    parts = await _stream(client, "counter", input={"n": 1}, stream_mode="updates")
    assert _events(parts) == ["metadata", "updates", "updates"]
    assert [p.data for p in parts[1:]] == [
        {"tick": {"n": 2, "steps": [2]}},
        {"tick": {"n": 3, "steps": [3]}},
    ]


async def test_custom_with_several_modes_at_once(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "approval", input={"request": "r"})
    parts = [
        p
        async for p in client.runs.stream(
            tid, "approval", command={"resume": "ok"}, stream_mode=["custom", "updates"]
        )
    ]
    assert _events(parts) == ["metadata", "updates", "custom", "updates"]
    assert parts[2].data == {"acting_on": "ok"}
    assert parts[3].data == {"act": {"log": ["acted: ok"]}}


async def test_messages_tuple_streams_a_chat_models_tokens(client: LangGraphClient) -> None:
    parts = await _stream(
        client,
        "chat",
        input={"messages": [{"type": "human", "content": "hi there"}]},
        stream_mode="messages-tuple",
    )
    tokens = [p for p in parts if p.event == "messages"]
    assert len(tokens) > 1  # word by word, not one message at the end
    for part in tokens:
        chunk, metadata = part.data
        assert chunk["type"] in ("AIMessageChunk", "ai")
        assert metadata["langgraph_node"] == "chatbot"
    assert "".join(p.data[0]["content"] for p in tokens) == "you said hi there"
    assert len({p.data[0]["id"] for p in tokens}) == 1


async def test_tasks_checkpoints_and_debug(client: LangGraphClient) -> None:
    parts = await _stream(client, "counter", input={"n": 2}, stream_mode="tasks")
    tasks = [p.data for p in parts[1:]]
    assert [t["name"] for t in tasks] == ["tick", "tick"]
    assert tasks[0]["input"] == {"n": 2, "steps": []}
    assert tasks[0]["triggers"] == ["branch:to:tick"]
    assert tasks[1]["result"] == {"n": 3, "steps": [3]}
    assert tasks[1]["error"] is None and tasks[1]["interrupts"] == []
    assert tasks[0]["id"] == tasks[1]["id"]

    parts = await _stream(client, "counter", input={"n": 2}, stream_mode="checkpoints")
    checkpoints = [p.data for p in parts[1:]]
    assert [c["values"].get("n") for c in checkpoints] == [None, 2, 3]
    assert [c["metadata"]["step"] for c in checkpoints] == [-1, 0, 1]
    assert checkpoints[1]["next"] == ["tick"] and checkpoints[2]["next"] == []
    assert all(c["config"]["configurable"]["checkpoint_id"] for c in checkpoints)

    parts = await _stream(client, "counter", input={"n": 2}, stream_mode="debug")
    kinds = [p.data["type"] for p in parts[1:]]
    assert kinds == ["checkpoint", "checkpoint", "task", "task_result", "checkpoint"]
    assert all("payload" in p.data and "step" in p.data for p in parts[1:])


async def test_subgraph_events_are_named_mode_and_namespace(client: LangGraphClient) -> None:
    parts = await _stream(
        client,
        "nested",
        input={"topic": "bees"},
        stream_mode=["updates", "custom"],
        stream_subgraphs=True,
    )
    names = _events(parts)
    inner = [n for n in names if "|" in n]
    assert inner and all(n.split("|")[1].startswith("inner:") for n in inner)
    assert {n.split("|")[0] for n in inner} == {"updates", "custom"}
    custom = next(p for p in parts if p.event.startswith("custom|"))
    assert custom.data == {"researching": "bees"}
    outer = [p.data for p in parts if p.event == "updates"]
    assert [list(u) for u in outer] == [["plan"], ["inner"]]
    without = await _stream(client, "nested", input={"topic": "ants"}, stream_mode="updates")
    assert all("|" not in n for n in _events(without))


async def test_a_failed_run_streams_an_error_event(client: LangGraphClient) -> None:
    parts = await _stream(client, "failing", input={})
    assert parts[-1].event == "error"
    assert parts[-1].data["error"] == "ValueError"


async def test_join_stream_after_a_last_event_id_gives_only_later_events(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(
        tid, "counter", input={"n": 0}, stream_mode=["values", "updates"], stream_resumable=True
    )
    await client.runs.join(tid, run["run_id"])
    everything = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert everything[0].event == "metadata"
    body = everything[1:]
    assert _events(body) == ["values"] + ["updates", "values"] * 3
    assert all(p.id for p in body)
    later = [p async for p in client.runs.join_stream(tid, run["run_id"], last_event_id=body[2].id)]
    assert [(p.event, p.id, p.data) for p in later[1:]] == [
        (p.event, p.id, p.data) for p in body[3:]
    ]
    only_updates = [
        p async for p in client.runs.join_stream(tid, run["run_id"], stream_mode="updates")
    ]
    assert _events(only_updates[1:]) == ["updates"] * 3


async def test_join_stream_of_a_running_run_follows_it_live(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"n": 0, "delay": 0.1})
    parts = [p async for p in client.runs.join_stream(tid, run["run_id"])]
    assert parts[-1].data["n"] == 3
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "success"


async def test_the_stream_has_headers_ids_and_heartbeats(settings: ServerSettings) -> None:
    running, thread = start_server(replace(settings, heartbeat_seconds=0.05))
    try:
        async with httpx.AsyncClient(base_url=running.url) as http:
            tid = (await http.post("/threads", json={})).json()["thread_id"]
            body = {"assistant_id": "blocking", "input": {"delay": 0.3}}
            async with http.stream("POST", f"/threads/{tid}/runs/stream", json=body) as res:
                assert res.headers["content-type"].startswith("text/event-stream")
                location = res.headers["location"]
                lines = [line async for line in res.aiter_lines()]
        assert location.startswith(f"/threads/{tid}/runs/") and location.endswith("/stream")
        assert lines[:2] == ["event: metadata", lines[1]] and lines[1].startswith("data: {")
        assert ": heartbeat" in lines  # a comment while the node sleeps
        ids = [line for line in lines if line.startswith("id: ")]
        assert len(ids) == 2  # the two values events; metadata has none
    finally:
        running.stop()
        thread.join(timeout=20)


async def test_on_run_created_gets_the_run_and_thread_ids(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    created: list[Any] = []
    parts = [
        p
        async for p in client.runs.stream(
            tid, "counter", input={"n": 2}, on_run_created=created.append
        )
    ]
    assert created == [{"run_id": parts[0].data["run_id"], "thread_id": tid}]
    await client.runs.wait(tid, "counter", input={"n": 2}, on_run_created=created.append)
    (latest, _) = await client.runs.list(tid)
    assert created[1] == {"run_id": latest["run_id"], "thread_id": tid}


async def test_the_v2_stream_format_splits_mode_and_namespace(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    parts = [
        p
        async for p in client.runs.stream(
            tid,
            "nested",
            input={"topic": "owls"},
            stream_mode="updates",
            stream_subgraphs=True,
            version="v2",
        )
    ]
    kinds = {(p["type"], bool(p["ns"])) for p in parts}  # type: ignore[index]
    assert ("updates", True) in kinds and ("updates", False) in kinds
    inner = next(p for p in parts if p["ns"])  # type: ignore[index]
    assert inner["ns"][0].startswith("inner:")  # type: ignore[index]
