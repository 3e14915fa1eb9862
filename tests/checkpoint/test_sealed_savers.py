"""Savers given a ``Serializer`` with encryption and compression: nothing readable at rest.

Every backend stores the bytes its serializer makes (values, metadata, checkpoint bodies and
pending writes), so with an encryption key a secret written by a node never reaches the disk,
the database or Redis in the clear, and a saver opened without the key refuses to load it.
"""

from __future__ import annotations

import operator
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from factories import SAVER_FACTORIES

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import BaseSaver
from threadline.errors import SerializationError
from threadline.serde import Serializer

KEY = bytes(range(32))
SECRET = f"TOPSECRET-{uuid.uuid4().hex}"


def sealed(key: bytes = KEY) -> Serializer:
    return Serializer(encryption_key=key, key_id="k1", compress_threshold=64)


class State(TypedDict, total=False):
    messages: Annotated[list[str], operator.add]
    answer: str


def ask(state: State) -> dict[str, Any]:
    answer = interrupt({"question": SECRET})
    return {"messages": [f"{SECRET} reply {len(state['messages'])}"], "answer": answer}


def build(saver: BaseSaver) -> Any:
    g = StateGraph(State)
    g.add_node("ask", ask)
    g.add_edge(START, "ask")
    g.add_edge("ask", END)
    return g.compile(checkpointer=saver)


def run(saver: BaseSaver, thread: str) -> dict[str, Any]:
    graph = build(saver)
    config = {"configurable": {"thread_id": thread}}
    graph.invoke({"messages": [SECRET * 20]}, config)  # stops at the interrupt
    return graph.invoke(Command(resume=SECRET), config, durability="sync")


@pytest.fixture(params=sorted(SAVER_FACTORIES))
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


def test_a_sealed_saver_round_trips_everything(backend: str, tmp_path: Path) -> None:
    with SAVER_FACTORIES[backend](tmp_path, serde=sealed()) as saver:
        final = run(saver, "t1")
        assert final["answer"] == SECRET
        assert final["messages"][0] == SECRET * 20
        graph = build(saver)
        config = {"configurable": {"thread_id": "t1"}}
        history = list(graph.get_state_history(config, filter={"source": "loop"}))
        assert [s.metadata["step"] for s in history] == [1, 0]
        saver.copy_thread("t1", "t2")
        assert graph.get_state({"configurable": {"thread_id": "t2"}}).values == final
        assert saver.prune("t1", keep_last=1) == 2
        assert graph.get_state(config).values == final


@pytest.mark.parametrize("backend", ["sqlite", "files", "postgres", "redis"])
def test_nothing_is_readable_at_rest(backend: str, tmp_path: Path) -> None:
    with SAVER_FACTORIES[backend](tmp_path, serde=sealed()) as saver:
        run(saver, "t1")
        raw = stored_bytes(backend, saver, tmp_path)
    assert len(raw) > 1000  # the dump did see the data
    assert SECRET.encode() not in raw
    assert SECRET.encode().hex().encode() not in raw  # nor as hex (PostgreSQL bytea text)


def test_the_same_data_in_the_clear_is_found_by_that_check(tmp_path: Path) -> None:
    with SAVER_FACTORIES["sqlite"](tmp_path) as saver:
        run(saver, "t1")
        assert SECRET.encode() in stored_bytes("sqlite", saver, tmp_path)


@pytest.mark.parametrize("backend", ["sqlite", "files", "postgres", "redis"])
def test_without_the_key_nothing_loads(backend: str, tmp_path: Path) -> None:
    with SAVER_FACTORIES[backend](tmp_path, serde=sealed()) as saver:
        run(saver, "t1")
        for other in (None, sealed(bytes(32))):
            with (
                reopened(backend, saver, tmp_path, other) as stranger,
                pytest.raises(SerializationError),
            ):
                build(stranger).get_state({"configurable": {"thread_id": "t1"}})


# -- reaching into each backend's storage -----------------------------------------------------


@contextmanager
def reopened(
    backend: str, saver: Any, tmp_path: Path, serde: Serializer | None
) -> Iterator[BaseSaver]:
    """A second saver on the same stored data, with another serializer."""
    options: dict[str, Any] = {} if serde is None else {"serde": serde}
    if backend == "postgres":
        options["schema"] = saver.schema
    if backend == "redis":
        from threadline.checkpoint import RedisSaver

        with RedisSaver(saver.url, prefix=saver.prefix, **options) as other:
            yield other
        return
    with SAVER_FACTORIES[backend](tmp_path, **options) as other:
        yield other


def stored_bytes(backend: str, saver: Any, tmp_path: Path) -> bytes:
    if backend == "sqlite":
        return b"".join(p.read_bytes() for p in tmp_path.glob("checkpoints.db*"))
    if backend == "files":
        return b"".join(
            Path(root, name).read_bytes()
            for root, _, names in os.walk(tmp_path / "checkpoints")
            for name in names
        )
    if backend == "postgres":
        return _postgres_dump(saver)
    return _redis_dump(saver)


def _postgres_dump(saver: Any) -> bytes:
    import psycopg

    with psycopg.connect(saver.url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", [saver.schema]
            )
        ]
        rows = [
            str(row[0])
            for table in tables
            for row in conn.execute(f'SELECT t::text FROM "{saver.schema}"."{table}" t')
        ]
    return "\n".join(rows).encode()


def _redis_dump(saver: Any) -> bytes:
    import redis

    parts: list[bytes] = []
    with redis.Redis.from_url(saver.url) as client:
        for key in client.scan_iter(match=f"{saver.prefix}:*"):
            kind = client.type(key)
            if kind == b"string":
                parts.append(client.get(key) or b"")
            elif kind == b"hash":
                parts.extend(b"".join(kv) for kv in client.hgetall(key).items())
            elif kind == b"zset":
                parts.extend(client.zrange(key, 0, -1))
            elif kind == b"set":
                parts.extend(client.smembers(key))
            elif kind == b"list":
                parts.extend(client.lrange(key, 0, -1))
    return b"\n".join(parts)
