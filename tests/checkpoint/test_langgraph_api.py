"""LangGraph's checkpointer API on every saver: ``get_tuple(config)``, ``list(config, ...)``,
``get(config)`` and their async forms, as LangGraph programs call them after a graph ran.

Each test runs once per saver (the ``saver`` fixture) and, where it takes ``mode``, once through
the sync methods (``graph.invoke``, ``saver.get_tuple``) and once through the async ones
(``graph.ainvoke``, ``saver.aget_tuple``).
"""

from __future__ import annotations

import operator
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import pytest
from services import require_postgres, require_redis
from typing_extensions import TypedDict

from threadline import Command, interrupt
from threadline.checkpoint import (
    AsyncSqliteSaver,
    BaseSaver,
    CheckpointRecord,
    CheckpointTuple,
    TaskWrite,
)
from threadline.errors import ConfigError, UnsupportedCheckpointWriteError
from threadline.graph import END, START, StateGraph


class State(TypedDict):
    n: int
    items: Annotated[list[str], operator.add]


def count(state: State) -> dict[str, Any]:
    return {"n": state["n"] + 1, "items": ["counted"]}


def note(state: State) -> dict[str, Any]:
    return {"items": [f"n={state['n']}"]}


def ask(state: State) -> dict[str, Any]:
    return {"items": [interrupt("name?")]}


def graph(saver: BaseSaver, last: Any = note) -> Any:
    builder = StateGraph(State)
    builder.add_node("count", count)
    builder.add_node("last", last)
    builder.add_edge(START, "count")
    builder.add_edge("count", "last")
    builder.add_edge("last", END)
    return builder.compile(checkpointer=saver)


def config(thread_id: str, **configurable: Any) -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id, **configurable}}


@pytest.fixture(params=["sync", "async"])
def mode(request: pytest.FixtureRequest) -> str:
    return request.param


class LangGraphCalls:
    """The saver called as a LangGraph program calls it, through its sync or async methods."""

    def __init__(self, saver: BaseSaver, mode: str) -> None:
        self.saver = saver
        self.sync = mode == "sync"

    async def invoke(self, graph: Any, value: Any, cfg: Mapping[str, Any]) -> Any:
        return graph.invoke(value, cfg) if self.sync else await graph.ainvoke(value, cfg)

    async def get_tuple(self, cfg: Any) -> CheckpointTuple | None:
        if self.sync:
            return self.saver.get_tuple(cfg)
        return await self.saver.aget_tuple(cfg)

    async def get(self, cfg: Any) -> dict[str, Any] | None:
        return self.saver.get(cfg) if self.sync else await self.saver.aget(cfg)

    async def list(self, cfg: Any, **options: Any) -> list[CheckpointTuple]:
        if self.sync:
            return list(self.saver.list(cfg, **options))
        return [t async for t in self.saver.alist(cfg, **options)]


async def test_get_tuple_returns_the_newest_checkpoint_in_langgraphs_shape(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    await lg.invoke(graph(saver), {"n": 1}, {**config("t1"), "metadata": {"user": "u1"}})

    found = await lg.get_tuple(config("t1"))

    assert isinstance(found, CheckpointTuple) and isinstance(found, tuple)
    newest = saver.get_tuple("t1")  # threadline's own form still answers with a record
    assert isinstance(newest, CheckpointRecord)
    cp_id = newest.checkpoint.id
    assert found.config == config("t1", checkpoint_ns="", checkpoint_id=cp_id)
    checkpoint = found.checkpoint
    assert list(checkpoint) == [
        "v",
        "ts",
        "id",
        "channel_versions",
        "versions_seen",
        "updated_channels",
        "channel_values",
    ]
    assert checkpoint["v"] == 4
    assert checkpoint["id"] == cp_id
    assert checkpoint["ts"] == newest.checkpoint.created_at
    assert checkpoint["channel_values"] == {"n": 2, "items": ["counted", "n=2"]}
    assert checkpoint["updated_channels"] == ["items"]  # the last step wrote only "items"
    assert set(checkpoint["channel_versions"]) == {"n", "items"}
    assert list(found.metadata)[:3] == ["source", "step", "parents"]
    assert found.metadata == {"source": "loop", "step": 2, "parents": {}, "user": "u1"}
    assert found.parent_config == config(
        "t1", checkpoint_ns="", checkpoint_id=newest.checkpoint.parent_id
    )
    assert found.pending_writes == []


async def test_get_tuple_addresses_one_checkpoint_and_finds_nothing_quietly(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    await lg.invoke(graph(saver), {"n": 1}, config("t1"))
    history = await lg.list(config("t1"))
    first = history[-1]

    found = await lg.get_tuple(first.config)

    assert found is not None
    assert found.checkpoint["id"] == first.config["configurable"]["checkpoint_id"]
    assert found.metadata["source"] == "input" and found.metadata["step"] == -1
    assert found.parent_config is None
    assert await lg.get_tuple(config("no-such-thread")) is None
    assert (
        await lg.get_tuple(config("t1", checkpoint_id=first.checkpoint["id"][:-4] + "0000")) is None
    )
    assert await lg.get(config("no-such-thread")) is None
    assert await lg.get(config("t1")) == (await lg.get_tuple(config("t1"))).checkpoint  # type: ignore[union-attr]


async def test_list_goes_newest_first_with_limit_before_and_filter(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    await lg.invoke(graph(saver), {"n": 1}, config("t1"))

    history = await lg.list(config("t1"))

    assert [t.metadata["step"] for t in history] == [2, 1, 0, -1]
    assert [t.metadata["source"] for t in history] == ["loop", "loop", "loop", "input"]
    assert [t.parent_config for t in history[:-1]] == [t.config for t in history[1:]]
    assert [t.config for t in await lg.list(config("t1"), limit=1)] == [history[0].config]
    assert await lg.list(config("t1"), limit=0) == []
    older = await lg.list(config("t1"), before=history[1].config)
    assert [t.config for t in older] == [t.config for t in history[2:]]
    loops = await lg.list(config("t1"), filter={"source": "loop"})
    assert [t.metadata["step"] for t in loops] == [2, 1, 0]
    assert await lg.list(config("t1"), filter={"source": "update"}) == []
    # a config naming a checkpoint lists that one only
    named = await lg.list(history[1].config)
    assert [t.config for t in named] == [history[1].config]
    assert await lg.list(history[1].config, before=history[1].config) == []
    assert await lg.list(config("no-such-thread")) == []


async def test_list_without_a_config_covers_every_thread_newest_first(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    g = graph(saver)
    await lg.invoke(g, {"n": 1}, config("a"))
    await lg.invoke(g, {"n": 10}, config("b"))

    everything = await lg.list(None)

    assert len(everything) == 8
    ids = [t.checkpoint["id"] for t in everything]
    assert ids == sorted(ids, reverse=True)
    assert [t.config["configurable"]["thread_id"] for t in everything] == ["b"] * 4 + ["a"] * 4
    newest_two = await lg.list(None, limit=2)
    assert [t.config for t in newest_two] == [t.config for t in everything[:2]]
    inputs = await lg.list(None, filter={"source": "input"})
    assert [(t.config["configurable"]["thread_id"], t.metadata["step"]) for t in inputs] == [
        ("b", -1),
        ("a", -1),
    ]


async def test_pending_writes_show_an_interrupt_and_its_answer(saver: BaseSaver, mode: str) -> None:
    lg = LangGraphCalls(saver, mode)
    g = graph(saver, last=ask)
    await lg.invoke(g, {"n": 1}, config("t1"))

    waiting = await lg.get_tuple(config("t1"))

    assert waiting is not None and waiting.pending_writes is not None
    [(task_id, channel, value)] = waiting.pending_writes
    assert channel == "__interrupt__"
    assert [i.value for i in value] == ["name?"]
    # an answer recorded against the interrupted step shows as LangGraph's resume write
    answer = TaskWrite(task_id, "last", "resume", {"answers": ["Ada"]})
    saver.put_writes("t1", "", waiting.checkpoint["id"], [answer])
    answered = await lg.get_tuple(config("t1"))
    assert answered is not None and answered.pending_writes is not None
    assert answered.pending_writes[1:] == [(task_id, "__resume__", {"answers": ["Ada"]})]
    await lg.invoke(g, Command(resume="Ada"), config("t1"))
    done = await lg.get_tuple(config("t1"))
    assert done is not None
    assert done.checkpoint["channel_values"]["items"] == ["counted", "Ada"]


async def test_a_step_that_failed_shows_its_error_and_its_siblings_writes(
    saver: BaseSaver, mode: str
) -> None:
    def fine(state: State) -> dict[str, Any]:
        return {"items": ["fine"]}

    def broken(state: State) -> dict[str, Any]:
        raise RuntimeError("disk on fire")

    builder = StateGraph(State)
    builder.add_node("fine", fine)
    builder.add_node("broken", broken)
    builder.add_edge(START, "fine")
    builder.add_edge(START, "broken")
    lg = LangGraphCalls(saver, mode)
    with pytest.raises(RuntimeError, match="disk on fire"):
        await lg.invoke(builder.compile(checkpointer=saver), {"n": 0}, config("t1"))

    failed = await lg.get_tuple(config("t1"))

    assert failed is not None and failed.pending_writes is not None
    by_channel = {channel: value for _, channel, value in failed.pending_writes}
    assert by_channel["items"] == ["fine"]
    assert "disk on fire" in str(by_channel["__error__"])


async def test_keyword_config_and_delete_thread_as_langgraph_calls_them(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    await lg.invoke(graph(saver), {"n": 1}, config("t1"))
    assert saver.get_tuple(config=config("t1")) is not None
    assert len(list(saver.list(config=config("t1"), limit=2))) == 2

    if lg.sync:
        saver.delete_thread("t1")
    else:
        await saver.adelete_thread("t1")

    assert await lg.get_tuple(config("t1")) is None
    assert await lg.list(config("t1")) == []
    assert await lg.list(None) == []


async def test_langgraphs_low_level_writes_are_refused_and_write_nothing(
    saver: BaseSaver, mode: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    await lg.invoke(graph(saver), {"n": 1}, config("t1"))
    newest = await lg.get_tuple(config("t1"))
    assert newest is not None
    changed = {**newest.checkpoint, "channel_values": {"n": 99, "items": []}}

    with pytest.raises(UnsupportedCheckpointWriteError, match="update_state") as refused:
        if lg.sync:
            saver.put(newest.config, changed, {"source": "update", "step": 2}, {})
        else:
            await saver.aput(newest.config, changed, {"source": "update", "step": 2}, {})
    assert isinstance(refused.value, NotImplementedError)  # what LangGraph's base raises
    with pytest.raises(UnsupportedCheckpointWriteError, match="graph"):
        if lg.sync:
            saver.put_writes(newest.config, [("n", 5)], "task-1")
        else:
            await saver.aput_writes(newest.config, [("n", 5)], "task-1", "")

    assert await lg.get_tuple(config("t1")) == newest
    assert len(await lg.list(config("t1"))) == 4


@pytest.mark.parametrize(
    ("bad", "says"),
    [
        ({}, "takes LangGraph's config"),
        ({"configurable": {}}, "names no thread"),
        ({"configurable": {"thread_id": ""}}, "names no thread"),
    ],
)
async def test_a_config_without_a_thread_is_a_clear_error(
    saver: BaseSaver, mode: str, bad: dict[str, Any], says: str
) -> None:
    lg = LangGraphCalls(saver, mode)
    with pytest.raises(ConfigError, match=says):
        await lg.get_tuple(bad)
    with pytest.raises(ConfigError, match=says):
        await lg.list(bad)


async def test_bad_list_options_are_refused_before_anything_is_read(saver: BaseSaver) -> None:
    with pytest.raises(ConfigError, match="limit"):
        saver.list(config("t1"), limit="3")
    with pytest.raises(ConfigError, match="filter"):
        saver.alist(config("t1"), filter=[("source", "loop")])
    with pytest.raises(ConfigError, match="before"):
        saver.list(config("t1"), before=42)
    with pytest.raises(ConfigError, match="get"):
        saver.get("t1")  # type: ignore[arg-type]


# -- LangGraph's async savers, on connections of the program's own event loop ---------------------


async def run_async_program(saver: BaseSaver) -> None:
    """What a LangGraph program does with an async checkpointer after a run."""
    thread = config("t1")
    await graph(saver).ainvoke({"n": 1}, thread)

    newest = await saver.aget_tuple(thread)
    history = [t async for t in saver.alist(thread)]

    assert newest is not None and newest == history[0]
    assert [t.metadata["step"] for t in history] == [2, 1, 0, -1]
    assert [t.config for t in [t async for t in saver.alist(thread, limit=2)]] == [
        t.config for t in history[:2]
    ]
    assert [t.config for t in [t async for t in saver.alist(None)]] == [t.config for t in history]
    found = await saver.aget(thread)
    assert found is not None and found["channel_values"] == {"n": 2, "items": ["counted", "n=2"]}
    with pytest.raises(UnsupportedCheckpointWriteError):
        await saver.aput(thread, newest.checkpoint, newest.metadata, {})
    await saver.adelete_thread("t1")
    assert await saver.aget_tuple(thread) is None


async def test_async_sqlite_saver(tmp_path: Path) -> None:
    async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "lg.db")) as saver:
        await saver.setup()
        await run_async_program(saver)


async def test_async_postgres_saver_on_an_async_connection() -> None:
    import psycopg
    from postgres_fixtures import drop_schemas, new_schema

    from threadline.checkpoint.postgres.aio import AsyncPostgresSaver

    url, schema = require_postgres(), new_schema()
    try:
        async with await psycopg.AsyncConnection.connect(url, autocommit=True) as conn:
            saver = AsyncPostgresSaver(conn, schema=schema)
            await saver.setup()
            await run_async_program(saver)
            with pytest.raises(ConfigError, match="async interface"):
                saver.get_tuple(config("t1"))  # sync, on the connection's own loop
    finally:
        drop_schemas(schema)


async def test_async_redis_saver_on_an_async_client() -> None:
    import redis.asyncio as aredis
    from redis_fixtures import SESSION_PREFIX, unlink_prefix

    from threadline.checkpoint.redis.aio import AsyncRedisSaver

    prefix = f"{SESSION_PREFIX}:langgraph-api"
    client = aredis.Redis.from_url(require_redis())
    try:
        async with AsyncRedisSaver(redis_client=client, prefix=prefix) as saver:
            await run_async_program(saver)
    finally:
        await client.aclose()
        unlink_prefix(prefix)
