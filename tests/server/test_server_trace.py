"""The execution trace over HTTP: what ran, the question asked and the answer given."""

from __future__ import annotations

import httpx
from harness import RunningServer
from langgraph_sdk import get_client


async def test_the_trace_shows_nodes_the_interrupt_and_the_answer(served: RunningServer) -> None:
    client = get_client(url=served.url)
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "approval", input={"request": "r9"})
    await client.runs.wait(tid, "approval", command={"resume": "ok"})
    trace = httpx.get(f"{served.url}/threads/{tid}/trace", timeout=30).json()
    kinds = [(e["kind"], e["name"]) for e in trace]
    assert ("interrupt", "review") in kinds and ("resume", "review") in kinds
    assert ("node", "act") in kinds
    asked = next(e for e in trace if e["kind"] == "interrupt")
    assert asked["data"] == {"question": "approve r9?"}
    later = httpx.get(f"{served.url}/threads/{tid}/trace", params={"since": asked["id"]}).json()
    assert [e["id"] for e in later] == [e["id"] for e in trace[trace.index(asked) + 1 :]]
    missing = httpx.get(f"{served.url}/threads/nope/trace")
    assert missing.status_code == 404
