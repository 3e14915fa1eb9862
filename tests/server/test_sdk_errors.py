"""Errors as langgraph-sdk sees them: 404 for what does not exist, 409 for conflicts, 422
naming the field of a bad body; never a 500."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError, UnprocessableEntityError

MISSING = "00000000-0000-4000-8000-000000000000"


async def test_unknown_threads_runs_assistants_and_items_are_404(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    for call in (
        client.threads.get(MISSING),
        client.threads.update(MISSING, metadata={"a": 1}),
        client.threads.delete(MISSING),
        client.threads.copy(MISSING),
        client.threads.get_state(MISSING),
        client.threads.get_history(MISSING),
        client.threads.update_state(MISSING, {"n": 1}),
        client.runs.get(tid, MISSING),
        client.runs.join(tid, MISSING),
        client.runs.cancel(tid, MISSING),
        client.runs.delete(tid, MISSING),
        client.runs.list(MISSING),
        client.runs.create(MISSING, "counter", input={"n": 0}),
        client.runs.create(tid, "no-such-graph", input={"n": 0}),
        client.assistants.get("no-such-graph"),
        client.assistants.get_schemas(MISSING),
        client.assistants.update(MISSING, metadata={"a": 1}),
        client.assistants.delete(MISSING),
        client.store.get_item(["nowhere"], "nothing"),
    ):
        # runs.join raises httpx's HTTPStatusError; the others its subclass NotFoundError
        with pytest.raises(httpx.HTTPStatusError) as refused:
            await call
        assert refused.value.response.status_code == 404


async def test_a_run_of_another_thread_is_not_found_on_this_one(client: LangGraphClient) -> None:
    one = (await client.threads.create())["thread_id"]
    two = (await client.threads.create())["thread_id"]
    run = await client.runs.create(one, "counter", input={"n": 2})
    with pytest.raises(NotFoundError):
        await client.runs.get(two, run["run_id"])
    await client.runs.join(one, run["run_id"])


async def test_conflicts_are_409(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=tid, if_exists="raise")
    made = await client.assistants.create("counter")
    with pytest.raises(ConflictError):
        await client.assistants.create("counter", assistant_id=made["assistant_id"])
    run = await client.runs.create(tid, "counter", input={"n": 0, "delay": 0.3})
    with pytest.raises(ConflictError):  # a thread with a run going is not deleted
        await client.threads.delete(tid)
    with pytest.raises(ConflictError):  # nor edited under the run
        await client.threads.update_state(tid, {"n": 5})
    with pytest.raises(ConflictError):  # nor a running run deleted
        await client.runs.delete(tid, run["run_id"])
    await client.runs.cancel(tid, run["run_id"], wait=True)
    await client.threads.delete(tid)


async def test_bad_bodies_are_422_naming_the_field(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    cases = {
        "status": client.threads.search(status="sleeping"),  # type: ignore[arg-type]
        "stream_mode": client.runs.create(
            tid,
            "counter",
            input={},
            stream_mode="everything",  # type: ignore[arg-type]
        ),
        "multitask_strategy": client.runs.create(
            tid,
            "counter",
            input={},
            multitask_strategy="whenever",  # type: ignore[arg-type]
        ),
        "webhook": client.runs.create(tid, "counter", input={}, webhook="ftp://example.com"),
        "limit": client.threads.search(limit=0),
        "if_exists": client.threads.create(if_exists="sometimes"),  # type: ignore[arg-type]
        "surprise": client.http.post("/threads", json={"surprise": 1}),
        "namespace": client.http.put("/store/items", json={"key": "k", "value": {}}),
    }
    for field, call in cases.items():
        with pytest.raises(UnprocessableEntityError) as refused:
            await call
        assert field in str(refused.value), (field, str(refused.value))


async def test_input_and_command_together_are_refused(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(UnprocessableEntityError) as refused:
        await client.runs.create(tid, "counter", input={"n": 1}, command={"resume": 1})
    assert "input" in str(refused.value) and "command" in str(refused.value)


async def test_options_the_server_cannot_honour_are_refused_by_name(
    client: LangGraphClient,
) -> None:
    for option in ({"feedback_keys": ["score"]}, {"strict_resume": True}):
        with pytest.raises(UnprocessableEntityError) as refused:
            [p async for p in client.runs.stream(None, "counter", input={"n": 2}, **option)]  # type: ignore[arg-type]
        assert next(iter(option)) in str(refused.value)
    with pytest.raises(UnprocessableEntityError) as refused:
        await client.runs.create(None, "counter", input={}, stream_mode="events")
    assert "stream_mode" in str(refused.value)


async def test_a_graph_that_raises_fails_its_run_not_the_server(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "failing", input={})
    out = await client.runs.join(tid, run["run_id"])
    assert out["__error__"]["error"] == "ValueError"
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "error"
    thread = await client.threads.get(tid)
    assert thread["status"] == "error"
    await asyncio.sleep(0)
    assert (await client.runs.wait(tid, "counter", input={"n": 2}))["n"] == 3
