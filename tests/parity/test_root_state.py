"""States that are one value, not a class of keys: ``StateGraph(int)``, ``StateGraph(list[str])``,
``StateGraph(Annotated[list, operator.add])``, ``StateGraph(dict)``. Expected values are what
LangGraph 1.2.22 gives for the same programs."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest

from threadline import START, Command, StateGraph
from threadline.checkpoint.memory import InMemorySaver

CASES = [
    (int, 1, lambda s: s + 1, 2, [1, 2]),
    (list[str], ["x"], lambda s: ["a"], ["a"], [["x"], ["a"]]),
    (Annotated[list, operator.add], ["x"], lambda s: ["a"], ["x", "a"], None),
    (dict, {"z": 2}, lambda s: {"k": 1}, {"k": 1}, [{"z": 2}, {"k": 1}]),
]


def two_nodes(schema: Any, node: Any, saver: Any = None):
    g = StateGraph(schema)
    g.add_node("a", node)
    g.add_node("b", lambda s: None)  # None writes nothing
    g.add_edge(START, "a")
    g.add_edge("a", "b")
    return g.compile(checkpointer=saver)


@pytest.mark.parametrize(("schema", "given", "node", "result", "values"), CASES)
def test_a_one_value_state_runs_streams_and_is_kept(schema, given, node, result, values):
    graph = two_nodes(schema, node, InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke(given, config) == result
    state = graph.get_state(config)
    assert state.values == result and state.next == ()
    assert len(list(graph.get_state_history(config))) == 4
    fresh = two_nodes(schema, node)
    assert list(fresh.stream(given)) == [{"a": node(given)}, {"b": None}]
    if values is not None:
        assert list(fresh.stream(given, stream_mode="values")) == values


def test_a_reducer_on_the_root_appends_across_runs_and_updates():
    graph = two_nodes(Annotated[list, operator.add], lambda s: ["a"], InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    graph.invoke(["x"], config)
    assert graph.invoke(["y"], config) == ["x", "a", "y", "a"]
    graph.update_state(config, ["u"])
    assert graph.get_state(config).values == ["x", "a", "y", "a", "u"]


def test_update_state_replaces_a_plain_root_and_command_updates_it():
    g = StateGraph(int)
    g.add_node("a", lambda n: Command(update=n * 10))
    g.add_edge(START, "a")
    graph = g.compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    assert graph.invoke(3, config) == 30
    graph.update_state(config, 7)
    assert graph.get_state(config).values == 7
