"""The server end to end with LangGraph's own Python client: a run pauses and is answered."""

from __future__ import annotations

from harness import RunningServer
from langgraph_sdk import get_client


async def test_a_run_pauses_for_a_person_and_an_answer_finishes_it(served: RunningServer) -> None:
    client = get_client(url=served.url)
    thread = await client.threads.create(metadata={"team": "refunds"})
    parts = [
        part
        async for part in client.runs.stream(
            thread["thread_id"], "approval", input={"request": "refund #7"}, stream_mode="updates"
        )
    ]
    assert parts[0].event == "metadata"
    assert parts[-1].data["__interrupt__"][0]["value"] == {"question": "approve refund #7?"}
    waiting = await client.threads.search(status="interrupted", metadata={"team": "refunds"})
    assert [t["thread_id"] for t in waiting] == [thread["thread_id"]]
    (asked,) = waiting[0]["interrupts"].values()
    assert asked[0]["value"]["question"] == "approve refund #7?"

    done = await client.runs.wait(thread["thread_id"], "approval", command={"resume": "yes"})
    assert done == {
        "request": "refund #7",
        "decision": "yes",
        "log": ["reviewed: yes", "acted: yes"],
    }
    assert (await client.threads.get(thread["thread_id"]))["status"] == "idle"
