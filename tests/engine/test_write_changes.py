"""Applying a step's writes says what happened to each key, and that is what a saver is given.

A reducer that kept the old list and added items is an append (stored as a delta on the stored
base); anything else — a replace, an ``Overwrite``, add_messages replacing or removing a message
by id — is a new value, stored whole.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, TypedDict

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import CheckpointRecord, InMemorySaver
from threadline.checkpoint.changes import SET, Append, Change, changes_of
from threadline.errors import InvalidUpdateError
from threadline.graph.schema import read_schema
from threadline.messages import AIMessage, HumanMessage, RemoveMessage, add_messages
from threadline.runtime.writes import apply_writes
from threadline.types import Overwrite


class State(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    messages: Annotated[list[Any], add_messages]
    note: str


SCHEMA = read_schema(State)
BEFORE = {"log": ["a"], "messages": [HumanMessage("hi", id="1")], "note": "x"}
VERSIONS = dict.fromkeys(BEFORE, "v0")


def changes(*writes: tuple[str, dict[str, Any]]) -> dict[str, Change]:
    pairs = [(writer, tuple(update.items())) for writer, update in writes]
    return apply_writes(SCHEMA, BEFORE, VERSIONS, pairs, "v1")[2]


def test_a_reducer_that_adds_items_appends_to_the_stored_version() -> None:
    assert changes(("n", {"log": ["b"]})) == {"log": Append("v0", 1)}
    added = changes(("n", {"messages": [AIMessage("hello", id="2")]}))
    assert added == {"messages": Append("v0", 1)}


def test_two_appends_in_one_step_are_one_append_on_the_older_base() -> None:
    assert changes(("a", {"log": ["b"]}), ("b", {"log": ["c"]})) == {"log": Append("v0", 1)}


def test_anything_else_is_a_new_value() -> None:
    assert changes(("n", {"note": "y"})) == {"note": SET}
    assert changes(("n", {"log": Overwrite(["a", "b"])})) == {"log": SET}
    assert changes(("a", {"log": ["b"]}), ("b", {"log": Overwrite(["c"])})) == {"log": SET}
    replaced = changes(("n", {"messages": [HumanMessage("hi again", id="1")]}))
    assert replaced == {"messages": SET}
    removed = changes(("n", {"messages": [RemoveMessage(id="1"), AIMessage("x", id="2")]}))
    assert removed == {"messages": SET}


def test_a_write_of_an_equal_value_changes_nothing() -> None:
    assert changes(("n", {"note": "x"}), ("m", {"log": []})) == {}


def test_without_versions_nothing_is_recorded_but_the_values() -> None:
    """A run that saves nothing passes no versions: it gets none back, and no changes."""
    pairs = [("a", (("log", ["b"]),)), ("b", (("note", "y"),))]
    values, versions, changes = apply_writes(SCHEMA, BEFORE, None, pairs, "v1")
    assert values == {**BEFORE, "log": ["a", "b"], "note": "y"}
    assert (versions, changes) == ({}, {})


def test_without_versions_two_writers_of_one_key_are_still_refused() -> None:
    pairs = [("a", (("note", "y"),)), ("b", (("note", "z"),))]
    with pytest.raises(InvalidUpdateError, match="'a' and 'b' both wrote key 'note'"):
        apply_writes(SCHEMA, BEFORE, None, pairs, "v1")


class Recording(InMemorySaver):
    """Keeps what each put was told had changed."""

    def __init__(self) -> None:
        super().__init__()
        self.told: list[Any] = []

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        self.told.append(changes_of(record))
        super().put(record, fork=fork)


def test_steps_saved_together_are_one_change_since_the_last_save() -> None:
    """With ``durability="exit"`` a run saves once: its three appends are one delta."""
    g = StateGraph(State)
    for name in ("a", "b", "c"):
        g.add_node(name, lambda s, name=name: {"log": [name]})
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    g.add_edge("b", "c")
    g.add_edge("c", END)
    saver = Recording()
    graph = g.compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke({"log": ["x"]}, config)
    stored = graph.get_state(config)
    saver.told.clear()
    graph.invoke({"log": ["y"]}, config, durability="exit")
    assert saver.told == [{"log": Append(stored.config["configurable"]["checkpoint_id"], 4)}]
    assert graph.get_state(config).values["log"] == ["x", "a", "b", "c", "y", "a", "b", "c"]
