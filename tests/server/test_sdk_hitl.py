"""Human in the loop through langgraph-sdk: interrupt and resume, update and goto, breakpoints."""

from __future__ import annotations

from langgraph_sdk.client import LangGraphClient


async def test_an_interrupt_shows_in_state_and_a_resume_answers_it(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    parts = [p async for p in client.runs.stream(tid, "approval", input={"request": "refund #9"})]
    assert parts[-1].data["__interrupt__"][0]["value"] == {"question": "approve refund #9?"}
    state = await client.threads.get_state(tid)
    assert state["next"] == ["review"]
    (task,) = state["tasks"]
    assert task["name"] == "review"
    assert task["interrupts"][0]["value"] == {"question": "approve refund #9?"}
    assert state["interrupts"][0]["id"] == task["interrupts"][0]["id"]
    thread = await client.threads.get(tid)
    assert thread["status"] == "interrupted"
    assert list(thread["interrupts"]) == [task["id"]]

    done = await client.runs.wait(tid, "approval", command={"resume": "no"})
    assert done["decision"] == "no" and done["log"] == ["reviewed: no", "acted: no"]
    thread = await client.threads.get(tid)
    assert thread["status"] == "idle" and not thread["interrupts"]


async def test_a_command_updates_the_state_and_goes_to_a_node(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "approval", input={"request": "r"})
    done = await client.runs.wait(
        tid, "approval", command={"update": {"decision": "by hand"}, "goto": "act"}
    )
    assert done["decision"] == "by hand"
    assert done["log"] == ["acted: by hand"]  # review never answered, act ran


async def test_interrupt_before_and_after_stop_at_the_node(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "counter", input={"n": 0}, interrupt_after=["tick"])
    assert out == {"n": 1, "steps": [1]}
    state = await client.threads.get_state(tid)
    assert state["next"] == ["tick"]
    assert (await client.threads.get(tid))["status"] == "interrupted"
    assert await client.runs.wait(tid, "counter", input=None) == {"n": 3, "steps": [1, 2, 3]}

    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "approval", input={"request": "r"}, interrupt_before=["review"])
    state = await client.threads.get_state(tid)
    assert state["next"] == ["review"] and state["tasks"][0]["interrupts"] == []
    out = await client.runs.wait(tid, "approval", input=None)
    assert out["__interrupt__"][0]["value"] == {"question": "approve r?"}  # now review asks


async def test_interrupt_before_every_node(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "counter", input={"n": 1}, interrupt_before="*")
    assert out["n"] == 1 and not out.get("steps")  # tick never ran
    assert (await client.threads.get_state(tid))["next"] == ["tick"]


async def test_an_interrupt_inside_a_subgraph_is_resumed(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    out = await client.runs.wait(tid, "nested", input={"topic": "bees", "ask": True})
    assert out["__interrupt__"][0]["value"] == {"check": "bees"}
    done = await client.runs.wait(tid, "nested", command={"resume": True})
    assert done["notes"][-1].startswith("summary of")
    assert "found bees" in done["notes"]
