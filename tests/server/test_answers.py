"""Typed interrupts over HTTP: the schema reaches the client, a wrong answer changes nothing."""

from __future__ import annotations

from harness import RunningServer
from langgraph_sdk import get_client


async def test_a_wrong_answer_fails_the_run_naming_the_field_and_keeps_the_question(
    served: RunningServer,
) -> None:
    client = get_client(url=served.url)
    thread = await client.threads.create()
    tid = thread["thread_id"]
    paused = await client.runs.wait(tid, "typed", input={"item": "mugs"})
    (asked,) = paused["__interrupt__"]
    assert asked["response_schema"]["required"] == ["quantity"]
    before = await client.threads.get_state(tid)

    wrong = [
        part async for part in client.runs.stream(tid, "typed", command={"resume": {"quantity": 0}})
    ]
    (error,) = [p for p in wrong if p.event == "error"]
    assert error.data["error"] == "InvalidAnswerError" and "quantity" in error.data["message"]
    assert error.data["interrupt_id"] == asked["id"]
    assert [path for path, _ in error.data["problems"]] == ["quantity"]
    after = await client.threads.get_state(tid)
    assert after["checkpoint"] == before["checkpoint"] and after["next"] == ["ask"]
    assert (await client.threads.get(tid))["status"] == "interrupted"

    done = await client.runs.wait(tid, "typed", command={"resume": {"quantity": 3}})
    assert done == {"item": "mugs", "quantity": 3}
