"""Async entrypoints and tasks, and per-task timeouts (sync and async)."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid

import pytest

from tests.services import require_postgres
from threadline import Command, RetryPolicy, get_stream_writer, interrupt
from threadline.checkpoint import InMemorySaver, SqliteSaver
from threadline.errors import NodeTimeoutError
from threadline.func import entrypoint, task


def _config(thread: str = "t") -> dict:
    return {"configurable": {"thread_id": thread}}


def test_an_async_entrypoint_gathers_async_tasks_and_resumes_without_rerunning_them(tmp_path):
    ran: list[int] = []

    @task
    async def double(x: int) -> int:
        await asyncio.sleep(0.5)
        ran.append(x)
        return x * 2

    @task
    def add(a: int, b: int) -> int:
        return a + b

    async def scenario() -> None:
        async with SqliteSaver(tmp_path / "db.sqlite") as saver:

            @entrypoint(checkpointer=saver)
            async def workflow(xs: list[int], *, previous=None) -> dict:
                doubled = await asyncio.gather(*(double(x) for x in xs))
                total = await add(*doubled)  # a sync task awaited from async code
                answer = interrupt(f"total {total}?")
                return {"total": total, "answer": answer, "previous": previous}

            started = time.monotonic()
            chunks = [c async for c in workflow.astream([1, 2], _config())]
            assert time.monotonic() - started < 0.9  # both doubles at once: not 1 s
            assert sorted(chunks[:2], key=lambda c: c["double"]) == [{"double": 2}, {"double": 4}]
            assert chunks[2] == {"add": 6}
            assert chunks[3]["__interrupt__"][0].value == "total 6?"
            done = await workflow.ainvoke(Command(resume="yes"), _config())
            assert done == {"total": 6, "answer": "yes", "previous": None}
            state = await workflow.aget_state(_config())
            assert state.values == done

    asyncio.run(scenario())
    assert sorted(ran) == [1, 2]


def test_an_async_task_called_from_a_sync_entrypoint_runs_on_its_own_loop():
    @task
    async def fetch(x: int) -> str:
        await asyncio.sleep(0)
        return f"got {x}"

    @entrypoint()
    def sync_flow(x: int) -> str:
        return fetch(x).result()

    assert sync_flow.invoke(3) == "got 3"


def test_a_sync_task_that_runs_too_long_fails_its_caller_with_a_timeout():
    release = threading.Event()

    @task(timeout=0.1)
    def hang() -> str:
        release.wait(5)
        return "late"

    @entrypoint(checkpointer=InMemorySaver())
    def flow(x: int) -> str:
        return hang().result()

    started = time.monotonic()
    with pytest.raises(NodeTimeoutError, match=r"'hang' exceeded its timeout of 0\.100s") as raised:
        flow.invoke(1, _config())
    release.set()
    assert time.monotonic() - started < 2
    assert raised.value.node == "hang" and raised.value.timeout == 0.1
    assert "NodeTimeoutError" in flow.get_state(_config()).tasks[0].error


def test_an_async_task_times_out_and_its_retry_policy_retries_it():
    attempts: list[float] = []

    @task(timeout=0.1, retry_policy=RetryPolicy(initial_interval=0.01, jitter=False))
    async def sometimes_slow() -> str:
        attempts.append(time.monotonic())
        if len(attempts) == 1:
            await asyncio.sleep(5)  # cancelled by the timeout
        return "fast enough"

    @entrypoint()
    async def flow(x: int) -> str:
        return await sometimes_slow()

    assert asyncio.run(flow.ainvoke(1)) == "fast enough"
    assert len(attempts) == 2


def test_an_async_entrypoint_can_have_a_timeout():
    @entrypoint(timeout=0.1)
    async def slow(x: int) -> int:
        await asyncio.sleep(5)
        return x

    with pytest.raises(NodeTimeoutError, match="'slow'"):
        asyncio.run(slow.ainvoke(1))


def test_timeouts_must_be_positive_seconds():
    with pytest.raises(ValueError, match="positive"):
        task(timeout=0)(lambda: None)
    with pytest.raises(TypeError, match="seconds"):
        task(timeout="1s")(lambda: None)


def test_async_and_sync_entrypoints_on_an_async_postgres_connection():
    """The saver's connection belongs to the event loop: results of sync tasks (saved from
    worker threads) and of async tasks (saved on the loop) both reach it."""
    url = require_postgres()
    psycopg = pytest.importorskip("psycopg")
    from threadline.checkpoint.postgres.aio import AsyncPostgresSaver

    schema = f"func_{uuid.uuid4().hex[:12]}"
    ran: list[str] = []

    @task
    async def fetch(x: int) -> int:
        ran.append("fetch")
        return x + 1

    @task
    def scale(x: int) -> int:
        ran.append("scale")
        return x * 2

    async def scenario() -> None:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            saver = AsyncPostgresSaver(conn, schema=schema)
            await saver.asetup()

            @entrypoint(checkpointer=saver)
            async def async_flow(x: int) -> tuple:
                total = await fetch(x) + await scale(x)
                return (total, interrupt("ok?"))

            @entrypoint(checkpointer=saver)
            def sync_flow(x: int) -> tuple:  # runs in a worker thread under ainvoke
                total = fetch(x).result() + scale(x).result()
                return (total, interrupt("ok?"))

            for flow, thread in ((async_flow, "a"), (sync_flow, "s")):
                await flow.ainvoke(1, _config(thread))
                assert await flow.ainvoke(Command(resume="y"), _config(thread)) == (4, "y")
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')

    asyncio.run(scenario())
    assert ran == ["fetch", "scale"] * 2  # once per workflow, not again on resume


def test_closing_an_entrypoint_stream_saves_where_its_run_stopped_before_returning():
    """As a graph's stream: ``aclose()`` stops the run, and with ``durability="exit"`` what it
    did is saved by the time ``aclose()`` returns, not later when the event loop gets to it."""
    ran: list[str] = []

    @task
    async def quick() -> str:
        ran.append("quick")
        return "quick"

    async def scenario() -> None:
        saver = InMemorySaver()

        @entrypoint(checkpointer=saver)
        async def workflow(_: int) -> str:
            first = await quick()
            get_stream_writer()(first)
            await asyncio.Event().wait()  # until the stream is closed
            return first

        stream = workflow.astream(1, _config(), stream_mode="custom", durability="exit")
        assert await anext(stream) == "quick"
        await stream.aclose()
        saved = saver.get_tuple("t")
        assert saved is not None
        assert [w.task_name for w in saved.pending_writes if w.kind == "task"] == ["quick"]

    asyncio.run(scenario())
    assert ran == ["quick"]
