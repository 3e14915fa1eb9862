"""Threads through langgraph-sdk: create, read, search, copy, delete; state, history, forks."""

from __future__ import annotations

import pytest
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError


async def test_a_thread_is_created_read_updated_and_deleted(client: LangGraphClient) -> None:
    made = await client.threads.create(metadata={"team": "refunds"})
    assert made["status"] == "idle" and made["metadata"] == {"team": "refunds"}
    assert (await client.threads.get(made["thread_id"]))["metadata"] == {"team": "refunds"}
    again = await client.threads.create(thread_id=made["thread_id"], if_exists="do_nothing")
    assert again["thread_id"] == made["thread_id"] and again["metadata"] == {"team": "refunds"}
    with pytest.raises(ConflictError):
        await client.threads.create(thread_id=made["thread_id"])
    updated = await client.threads.update(made["thread_id"], metadata={"owner": "ann"})
    assert updated["metadata"] == {"team": "refunds", "owner": "ann"}
    await client.threads.delete(made["thread_id"])
    with pytest.raises(NotFoundError):
        await client.threads.get(made["thread_id"])


async def test_search_by_metadata_status_page_and_order(client: LangGraphClient) -> None:
    ids = []
    for i in range(4):
        t = await client.threads.create(metadata={"batch": "b", "i": i})
        ids.append(t["thread_id"])
    await client.runs.wait(ids[0], "approval", input={"request": "r"})  # waits for a person
    await client.runs.wait(ids[1], "counter", input={"n": 0})
    await client.runs.wait(ids[2], "failing", input={}, raise_error=False)
    found = await client.threads.search(metadata={"batch": "b"}, sort_by="created_at")
    assert [t["thread_id"] for t in found] == ids[::-1]  # newest first by default
    asc = await client.threads.search(
        metadata={"batch": "b"}, sort_by="created_at", sort_order="asc", limit=2, offset=1
    )
    assert [t["thread_id"] for t in asc] == ids[1:3]
    by_status = {
        s: [t["thread_id"] for t in await client.threads.search(status=s)]
        for s in ("interrupted", "idle", "error")
    }
    assert by_status == {"interrupted": [ids[0]], "idle": [ids[3], ids[1]], "error": [ids[2]]}
    (waiting,) = await client.threads.search(status="interrupted")
    assert waiting["values"]["request"] == "r" and not waiting["values"].get("decision")
    (asked,) = waiting["interrupts"].values()
    assert asked[0]["value"] == {"question": "approve r?"}
    (done,) = await client.threads.search(metadata={"i": 1})
    assert done["values"]["n"] == 3
    assert await client.threads.count(metadata={"batch": "b"}) == 4
    assert await client.threads.count(status="error") == 1


async def test_copy_keeps_the_state_and_history_of_the_original(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    await client.runs.wait(thread["thread_id"], "counter", input={"n": 1})
    copied = await client.threads.copy(thread["thread_id"])
    assert copied["thread_id"] != thread["thread_id"]
    state = await client.threads.get_state(copied["thread_id"])
    assert state["values"] == {"n": 3, "steps": [2, 3]}
    old = await client.threads.get_history(thread["thread_id"])
    new = await client.threads.get_history(copied["thread_id"])
    assert [h["values"] for h in new] == [h["values"] for h in old]
    # the copy goes its own way
    await client.threads.update_state(copied["thread_id"], {"n": 10}, as_node="tick")
    assert (await client.threads.get_state(thread["thread_id"]))["values"]["n"] == 3


async def test_state_at_a_checkpoint_and_history_with_limit_before_and_filter(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "counter", input={"n": 0})
    history = await client.threads.get_history(tid, limit=100)
    assert [h["values"].get("n") for h in history] == [3, 2, 1, 0, None]
    assert [h["metadata"]["step"] for h in history] == [3, 2, 1, 0, -1]
    first_tick = history[2]
    at = await client.threads.get_state(
        tid, checkpoint_id=first_tick["checkpoint"]["checkpoint_id"]
    )
    assert at["values"] == {"n": 1, "steps": [1]} and at["next"] == ["tick"]
    assert at["checkpoint"]["checkpoint_id"] == first_tick["checkpoint"]["checkpoint_id"]
    assert len(await client.threads.get_history(tid, limit=2)) == 2
    older = await client.threads.get_history(tid, before=first_tick["checkpoint"])
    assert [h["values"].get("n") for h in older] == [0, None]
    inputs = await client.threads.get_history(tid, metadata={"source": "input"})
    assert [h["metadata"]["step"] for h in inputs] == [-1]


async def test_update_state_as_a_node_decides_what_runs_next(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "counter", input={"n": 0})
    done = await client.threads.get_state(tid)
    assert done["next"] == []
    made = await client.threads.update_state(tid, {"n": 1}, as_node="tick")
    state = await client.threads.get_state(tid)
    assert state["checkpoint"]["checkpoint_id"] == made["checkpoint"]["checkpoint_id"]
    assert state["values"]["n"] == 1 and state["next"] == ["tick"]  # route() says tick again
    assert (await client.threads.get(tid))["status"] == "interrupted"
    out = await client.runs.wait(tid, "counter", input=None)
    assert out["n"] == 3 and out["steps"] == [1, 2, 3, 2, 3]


async def test_a_fork_from_an_older_checkpoint_runs_on_from_there(
    client: LangGraphClient,
) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    await client.runs.wait(tid, "counter", input={"n": 0})
    history = await client.threads.get_history(tid)
    first_tick = next(h for h in history if h["values"].get("n") == 1)
    fork = await client.threads.update_state(
        tid, {"n": 2}, checkpoint_id=first_tick["checkpoint"]["checkpoint_id"]
    )
    forked = await client.threads.get_state(tid)
    assert forked["parent_checkpoint"]["checkpoint_id"] == first_tick["checkpoint"]["checkpoint_id"]
    out = await client.runs.wait(
        tid, "counter", input=None, checkpoint_id=fork["checkpoint"]["checkpoint_id"]
    )
    assert out == {"n": 3, "steps": [1, 3]}  # the fork's one tick, not the first run's
    # history lists every checkpoint of the thread, newest first: the fork's, then the first run's
    states = [h["values"]["n"] for h in await client.threads.get_history(tid, limit=3)]
    assert states == [3, 2, 3]


async def test_state_of_a_subgraph_waiting_for_a_person(client: LangGraphClient) -> None:
    thread = await client.threads.create()
    tid = thread["thread_id"]
    out = await client.runs.wait(tid, "nested", input={"topic": "bees", "ask": True})
    assert out["__interrupt__"][0]["value"] == {"check": "bees"}
    flat = await client.threads.get_state(tid)
    assert flat["next"] == ["inner"] and flat["tasks"][0]["state"] is None
    deep = await client.threads.get_state(tid, subgraphs=True)
    (task,) = deep["tasks"]
    assert task["name"] == "inner"
    assert task["state"]["values"]["notes"] == ["plan bees"]
    assert task["state"]["next"] == ["research"]
    assert task["state"]["checkpoint"]["checkpoint_ns"].startswith("inner:")


async def test_search_by_ids_and_values_and_state_by_checkpoint_object(
    client: LangGraphClient,
) -> None:
    one = (await client.threads.create())["thread_id"]
    two = (await client.threads.create())["thread_id"]
    await client.runs.wait(one, "counter", input={"n": 0})
    await client.runs.wait(two, "counter", input={"n": 2})
    assert [t["thread_id"] for t in await client.threads.search(values={"steps": [3]})] == [two]
    assert [t["thread_id"] for t in await client.threads.search(ids=[one])] == [one]
    slim = await client.threads.search(ids=[two], select=["thread_id", "status"])
    assert slim == [{"thread_id": two, "status": "idle"}]
    history = await client.threads.get_history(one)
    older = history[1]["checkpoint"]
    at = await client.threads.get_state(one, checkpoint=older)  # POST .../state/checkpoint
    assert at["values"]["n"] == 2 and at["checkpoint"] == older
    edited = await client.threads.update_state(one, {"n": 0}, checkpoint=older)
    head = await client.threads.get_state(one)
    assert head["checkpoint"]["checkpoint_id"] == edited["checkpoint"]["checkpoint_id"]
    assert head["parent_checkpoint"]["checkpoint_id"] == older["checkpoint_id"]


async def test_durability_exit_saves_only_the_end(client: LangGraphClient) -> None:
    steady = (await client.threads.create())["thread_id"]
    await client.runs.wait(steady, "counter", input={"n": 0})
    quick = (await client.threads.create())["thread_id"]
    await client.runs.wait(quick, "counter", input={"n": 0}, durability="exit")
    assert (await client.threads.get_state(quick))["values"]["n"] == 3
    assert len(await client.threads.get_history(quick)) < len(
        await client.threads.get_history(steady)
    )


async def test_prune_deletes_threads_or_keeps_only_their_latest_state(
    client: LangGraphClient,
) -> None:
    ids = [(await client.threads.create())["thread_id"] for _ in range(3)]
    for tid in ids:
        await client.runs.wait(tid, "counter", input={"n": 1})
    kept = await client.threads.prune([ids[0]], strategy="keep_latest")
    assert kept == {"pruned_count": 1}
    history = await client.threads.get_history(ids[0])
    assert [h["values"]["n"] for h in history] == [3]
    assert (await client.threads.get_state(ids[0]))["values"] == {"n": 3, "steps": [2, 3]}
    gone = await client.threads.prune([ids[1], ids[2], "not-a-thread"])
    assert gone == {"pruned_count": 2}
    for tid in ids[1:]:
        with pytest.raises(NotFoundError):
            await client.threads.get(tid)
    assert [t["thread_id"] for t in await client.threads.search()] == [ids[0]]
