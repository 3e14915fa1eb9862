"""Runs through langgraph-sdk: background, wait, join, list, cancel, delete, stateless, batch,
multitask strategies, scheduled runs and webhooks."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import httpx
import pytest
from harness import RunningServer
from langgraph_sdk import get_client
from langgraph_sdk.client import LangGraphClient
from langgraph_sdk.errors import ConflictError, NotFoundError

SLOW = 0.5  # seconds each tick of the counter takes when a run must still be going


async def _until(client: LangGraphClient, tid: str, rid: str, status: str) -> None:
    for _ in range(200):
        if (await client.runs.get(tid, rid))["status"] == status:
            return
        await asyncio.sleep(0.02)
    raise AssertionError(f"run {rid} never became {status}")


async def test_a_background_run_is_joined_listed_and_deleted(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"n": 0}, metadata={"who": "ann"})
    assert run["status"] in ("pending", "running") and run["thread_id"] == tid
    assert await client.runs.join(tid, run["run_id"]) == {"n": 3, "steps": [1, 2, 3]}
    got = await client.runs.get(tid, run["run_id"])
    assert got["status"] == "success" and got["metadata"] == {"who": "ann"}
    second = await client.runs.create(tid, "counter", input={"n": 2})
    await client.runs.join(tid, second["run_id"])
    listed = await client.runs.list(tid)
    assert [r["run_id"] for r in listed] == [second["run_id"], run["run_id"]]
    assert [r["run_id"] for r in await client.runs.list(tid, limit=1, offset=1)] == [run["run_id"]]
    assert len(await client.runs.list(tid, status="success")) == 2
    await client.runs.delete(tid, run["run_id"])
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])
    assert [r["run_id"] for r in await client.runs.list(tid)] == [second["run_id"]]


async def test_wait_gives_the_final_values_and_the_thread_keeps_them(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    assert await client.runs.wait(tid, "counter", input={"n": 1}) == {"n": 3, "steps": [2, 3]}
    assert (await client.threads.get(tid))["values"] == {"n": 3, "steps": [2, 3]}
    failed = await client.runs.wait(tid, "failing", input={}, raise_error=False)
    assert failed["__error__"]["error"] == "ValueError"
    assert "on purpose" in failed["__error__"]["message"]
    (run, *_) = await client.runs.list(tid)
    assert run["status"] == "error"


async def test_a_run_on_a_missing_thread_is_created_with_if_not_exists(
    client: LangGraphClient,
) -> None:
    tid = "0b8a5a3e-2e49-4a4e-8c1c-5b1f7a9e0c11"
    out = await client.runs.wait(tid, "counter", input={"n": 2}, if_not_exists="create")
    assert out["n"] == 3
    assert (await client.threads.get(tid))["values"]["n"] == 3


async def test_cancel_interrupt_keeps_the_work_done(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"n": 0, "delay": SLOW})
    await _until(client, tid, run["run_id"], "running")
    await asyncio.sleep(SLOW * 1.5)  # the first tick is saved
    await client.runs.cancel(tid, run["run_id"], wait=True, action="interrupt")
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "interrupted"
    state = await client.threads.get_state(tid)
    assert 1 <= state["values"]["n"] < 3
    assert (await client.threads.get(tid))["status"] != "busy"


async def test_cancel_rollback_discards_the_run(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    await client.runs.wait(tid, "counter", input={"n": 2})
    before = await client.threads.get_state(tid)
    run = await client.runs.create(tid, "counter", input={"n": 0, "delay": SLOW})
    await _until(client, tid, run["run_id"], "running")
    await asyncio.sleep(SLOW * 1.5)
    await client.runs.cancel(tid, run["run_id"], wait=True, action="rollback")
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, run["run_id"])
    after = await client.threads.get_state(tid)
    assert after["values"] == before["values"]
    assert (await client.threads.get(tid))["values"] == before["values"]


async def test_cancelling_a_finished_run_is_a_conflict(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"n": 2})
    await client.runs.join(tid, run["run_id"])
    with pytest.raises(ConflictError):
        await client.runs.cancel(tid, run["run_id"])


async def test_stateless_runs_leave_no_thread_unless_asked(client: LangGraphClient) -> None:
    assert await client.runs.wait(None, "counter", input={"n": 2}) == {"n": 3, "steps": [3]}
    parts = [p async for p in client.runs.stream(None, "counter", input={"n": 1})]
    assert parts[0].event == "metadata"
    assert parts[-1].data == {"n": 3, "steps": [2, 3]}
    kept = await client.runs.create(None, "counter", input={"n": 0}, on_completion="keep")
    assert await client.runs.join(kept["thread_id"], kept["run_id"]) == {
        "n": 3,
        "steps": [1, 2, 3],
    }
    assert (await client.threads.get(kept["thread_id"]))["values"]["n"] == 3
    gone = await client.runs.create(None, "counter", input={"n": 0})
    assert (await client.runs.join(gone["thread_id"], gone["run_id"]))["n"] == 3
    with pytest.raises(NotFoundError):
        await client.threads.get(gone["thread_id"])
    assert await client.threads.search() == [await client.threads.get(kept["thread_id"])]


async def test_a_batch_of_stateless_runs(client: LangGraphClient) -> None:
    runs = await client.runs.create_batch(
        [
            {"assistant_id": "counter", "input": {"n": 1}, "on_completion": "keep"},
            {"assistant_id": "greeter", "input": {"name": "Cy"}, "on_completion": "keep"},
        ]
    )
    assert len(runs) == 2
    outs = [await client.runs.join(r["thread_id"], r["run_id"]) for r in runs]
    assert outs == [{"n": 3, "steps": [2, 3]}, {"name": "Cy", "text": "hello Cy"}]


async def test_reject_refuses_a_second_run_while_one_goes(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "counter", input={"n": 2, "delay": SLOW})
    with pytest.raises(ConflictError):
        await client.runs.create(tid, "counter", input={"n": 0}, multitask_strategy="reject")
    assert (await client.runs.join(tid, first["run_id"]))["steps"] == [3]


async def test_enqueue_runs_the_second_after_the_first(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "counter", input={"n": 1, "delay": SLOW})
    second = await client.runs.create(tid, "counter", input={"n": 1}, multitask_strategy="enqueue")
    assert (await client.runs.get(tid, second["run_id"]))["status"] == "pending"
    out = await client.runs.join(tid, second["run_id"])
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "success"
    assert out["steps"] == [2, 3, 2, 3]  # the second ran on the first's state


async def test_interrupt_stops_the_first_run_and_keeps_its_work(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "counter", input={"n": 0, "delay": SLOW})
    await _until(client, tid, first["run_id"], "running")
    await asyncio.sleep(SLOW * 1.5)
    second = await client.runs.create(
        tid, "counter", input={"n": 2}, multitask_strategy="interrupt"
    )
    out = await client.runs.join(tid, second["run_id"])
    assert (await client.runs.get(tid, first["run_id"]))["status"] == "interrupted"
    assert out["steps"][0] == 1 and out["steps"][-1] == 3  # the first's tick is still there


async def test_rollback_discards_the_first_run_entirely(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    first = await client.runs.create(tid, "counter", input={"n": 0, "delay": SLOW})
    await _until(client, tid, first["run_id"], "running")
    await asyncio.sleep(SLOW * 1.5)
    second = await client.runs.create(tid, "counter", input={"n": 2}, multitask_strategy="rollback")
    out = await client.runs.join(tid, second["run_id"])
    assert out == {"n": 3, "steps": [3]}
    with pytest.raises(NotFoundError):
        await client.runs.get(tid, first["run_id"])
    assert [r["run_id"] for r in await client.runs.list(tid)] == [second["run_id"]]


async def test_after_seconds_starts_the_run_later(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    started = time.monotonic()
    run = await client.runs.create(tid, "counter", input={"n": 2}, after_seconds=1)
    await asyncio.sleep(0.4)
    assert (await client.runs.get(tid, run["run_id"]))["status"] == "pending"
    assert (await client.runs.join(tid, run["run_id"]))["n"] == 3
    assert time.monotonic() - started >= 1.0


@pytest.fixture
def receiver() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    """A local HTTP server that keeps the JSON bodies POSTed to it."""
    got: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            got.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", got
    server.shutdown()
    thread.join(timeout=5)


async def test_a_webhook_is_posted_when_the_run_ends(
    client: LangGraphClient, receiver: tuple[str, list[dict[str, Any]]]
) -> None:
    url, got = receiver
    tid = (await client.threads.create())["thread_id"]
    run = await client.runs.create(tid, "counter", input={"n": 1}, webhook=url)
    await client.runs.join(tid, run["run_id"])
    for _ in range(100):
        if got:
            break
        await asyncio.sleep(0.02)
    (body,) = got
    assert body["run_id"] == run["run_id"] and body["thread_id"] == tid
    assert body["status"] == "success"
    assert body["values"] == {"n": 3, "steps": [2, 3]}


async def test_on_disconnect_cancel_stops_the_run_when_the_client_leaves(
    client: LangGraphClient,
) -> None:
    tid = (await client.threads.create())["thread_id"]
    stream = client.runs.stream(
        tid, "counter", input={"n": 0, "delay": SLOW}, on_disconnect="cancel"
    )
    first = await anext(stream)
    assert first.event == "metadata"
    await stream.aclose()  # type: ignore[attr-defined]
    run_id = first.data["run_id"]
    await _until(client, tid, run_id, "interrupted")
    assert (await client.threads.get_state(tid))["values"].get("n", 0) < 3


async def test_on_disconnect_continue_lets_the_run_finish(client: LangGraphClient) -> None:
    tid = (await client.threads.create())["thread_id"]
    stream = client.runs.stream(tid, "counter", input={"n": 1, "delay": SLOW / 3})
    first = await anext(stream)
    await stream.aclose()  # type: ignore[attr-defined]
    assert (await client.runs.join(tid, first.data["run_id"]))["n"] == 3
    assert (await client.runs.get(tid, first.data["run_id"]))["status"] == "success"


async def test_cancel_many_by_thread_by_ids_and_by_status(client: LangGraphClient) -> None:
    one = (await client.threads.create())["thread_id"]
    two = (await client.threads.create())["thread_id"]
    a = await client.runs.create(one, "counter", input={"n": 0, "delay": SLOW})
    b = await client.runs.create(one, "counter", input={"n": 0}, multitask_strategy="enqueue")
    c = await client.runs.create(two, "counter", input={"n": 0}, after_seconds=30)
    await client.runs.cancel_many(thread_id=one)
    await _until(client, one, a["run_id"], "interrupted")
    assert (await client.runs.get(one, b["run_id"]))["status"] == "interrupted"
    assert (await client.runs.get(two, c["run_id"]))["status"] == "pending"
    await client.runs.cancel_many(status="pending")
    assert (await client.runs.get(two, c["run_id"]))["status"] == "interrupted"
    d = await client.runs.create(two, "counter", input={"n": 0}, after_seconds=30)
    await client.runs.cancel_many(run_ids=[d["run_id"]], action="interrupt")
    assert (await client.runs.get(two, d["run_id"]))["status"] == "interrupted"


async def test_a_wait_whose_client_leaves_cancels_the_run_with_on_disconnect_cancel(
    served: RunningServer,
) -> None:
    client = get_client(url=served.url, timeout=httpx.Timeout(SLOW * 1.5))
    tid = (await client.threads.create())["thread_id"]
    with pytest.raises(httpx.ReadTimeout):  # the client gives up and closes the connection
        await client.runs.wait(
            tid, "counter", input={"n": 0, "delay": SLOW}, on_disconnect="cancel"
        )
    patient = get_client(url=served.url)
    (run,) = await patient.runs.list(tid)
    await _until(patient, tid, run["run_id"], "interrupted")
    assert (await patient.threads.get_state(tid))["values"]["n"] < 3
