"""The PostgreSQL saver stores a run's input once: the checkpoint after the input refers to the
bytes of the ``__start__`` write instead of storing them again (``postgres/rows.py``).

Same server and schema conventions as ``postgres_fixtures.py``.
"""

from __future__ import annotations

import operator
import secrets
from typing import Annotated, Any, TypedDict

import pytest
from builders import step
from postgres_fixtures import postgres_saver, query, saver, url

from threadline import END, START, StateGraph
from threadline.checkpoint import Retention
from threadline.checkpoint.layout import BlobRow, WriteRow
from threadline.checkpoint.postgres import PostgresSaver
from threadline.checkpoint.postgres.rows import MIN_BYTES, RecentWrites
from threadline.errors import SerializationError
from threadline.serde import Serializer

__all__ = ["saver", "url"]  # fixtures of postgres_fixtures, imported for the tests here


class Chat(TypedDict, total=False):
    messages: Annotated[list[dict[str, Any]], operator.add]
    topic: str


def _reply(state: Chat) -> dict[str, Any]:
    return {"messages": [{"role": "ai", "text": "re: " + state["messages"][-1]["text"][:10]}]}


def chat(saver: PostgresSaver) -> Any:
    g = StateGraph(Chat)
    g.add_node("reply", _reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def say(n: int = 2000) -> dict[str, Any]:
    return {"role": "human", "text": secrets.token_hex(n // 2)}


def config(thread_id: str = "t1") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def sourced(saver: PostgresSaver, thread_id: str = "t1") -> list[tuple[Any, ...]]:
    """(key, length of data, src_len) of the thread's blobs whose bytes are in a write."""
    return query(
        saver.schema,
        "SELECT key, length(data), src_len FROM {s}.threadline_blobs"
        " WHERE thread_id = %s AND src_id IS NOT NULL ORDER BY version",
        (thread_id,),
    )


def test_the_input_is_stored_once_and_loads_everywhere(saver: PostgresSaver) -> None:
    graph = chat(saver)
    first, second = say(), say()
    graph.invoke({"messages": [first], "topic": "x" * 500}, config())
    out = graph.invoke({"messages": [second]}, config())
    assert out["messages"][0] == first and out["messages"][2] == second
    # Each input's message delta, and the topic set outright, refer to the input's write.
    rows = sourced(saver)
    assert sorted(key for key, _, _ in rows) == ["messages", "messages", "topic"]
    assert all(size == 2 and length >= MIN_BYTES for _, size, length in rows)
    with PostgresSaver(saver.url, schema=saver.schema) as cold:  # nothing held: all from SQL
        history = list(chat(cold).get_state_history(config()))
        assert history[0].values == out
        inputs = [s for s in history if s.metadata["source"] == "input"]
        assert len(inputs) == 2 and inputs[0].next == ("__start__",)
        replay = chat(cold).invoke(None, inputs[0].config)  # a fork from the second input
        assert replay["messages"][:3] == out["messages"][:3]


def test_a_pruned_input_leaves_its_bytes_to_the_values_that_use_them(url: str) -> None:
    with postgres_saver(retention=Retention(max_checkpoints=1)) as saver:
        graph = chat(saver)
        message = say()
        out = graph.invoke({"messages": [message]}, config())
        writes = "SELECT count(*) FROM {s}.threadline_writes WHERE kind <> 'trace'"
        assert query(saver.schema, writes) == [(0,)]  # the run's execution trace stays
        assert sourced(saver) == []
        with PostgresSaver(saver.url, schema=saver.schema) as cold:
            state = chat(cold).get_state(config())
            assert state.values == out and state.values["messages"][0] == message


def test_prune_and_copy_keep_every_kept_value_loadable(saver: PostgresSaver) -> None:
    graph = chat(saver)
    for _ in range(3):
        graph.invoke({"messages": [say()]}, config())
    expected = graph.get_state(config()).values
    saver.copy_thread("t1", "t2")
    saver.prune("t1", keep_last=2)  # drops every input checkpoint, and its write
    assert sourced(saver, "t1") == [] and len(sourced(saver, "t2")) == 3
    with PostgresSaver(saver.url, schema=saver.schema) as cold:
        assert chat(cold).get_state(config("t1")).values == expected
        assert chat(cold).get_state(config("t2")).values == expected


def test_a_lost_write_is_a_clear_error_not_a_wrong_value(saver: PostgresSaver) -> None:
    chat(saver).invoke({"messages": [say()]}, config())
    query(saver.schema, "DELETE FROM {s}.threadline_writes")
    with (
        PostgresSaver(saver.url, schema=saver.schema) as cold,
        pytest.raises(SerializationError, match="corrupted: its checksum does not match"),
    ):
        cold.get_tuple("t1")


def test_sealed_or_short_values_are_stored_whole(url: str) -> None:
    sealed = Serializer(encryption_key=b"k" * 32, key_id="test")
    with postgres_saver(serde=sealed) as saver:
        chat(saver).invoke({"messages": [say()]}, config())
        assert sourced(saver) == []
    with postgres_saver() as saver:
        chat(saver).invoke({"messages": [say(MIN_BYTES // 2)]}, config())
        assert sourced(saver) == []


def test_recent_writes_match_only_the_parent_they_were_stored_with() -> None:
    recent = RecentWrites(size=1)
    record = step("t1", {"messages": [say()]}, None)
    data = Serializer().dumps(record.checkpoint.values["messages"])
    write = WriteRow("task", "result", "__start__", b"\x01\x00" + b"pad" + data[2:])
    recent.remember("t1", "", "cp-1", [write])
    rows = [BlobRow("messages", "v1", "v1", None, 0, len(data), data, 1)]
    found = recent.sources("t1", "", "cp-1", rows)[0]
    assert found is not None and (found.at, found.length) == (5, len(data) - 2)
    assert recent.sources("t1", "", "cp-2", rows) == [None]  # another parent
    assert recent.sources("t2", "", "cp-1", rows) == [None]  # another thread
    recent.remember("t2", "", "cp-9", [write])  # size=1: t1's is dropped
    assert recent.sources("t1", "", "cp-1", rows) == [None]
