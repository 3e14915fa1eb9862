"""``add_node(..., defer=True)``: the node waits until the run has nothing else to do."""

from __future__ import annotations

import operator
from typing import Annotated, TypedDict

import pytest

from threadline import END, START, Send, StateGraph
from threadline.checkpoint import InMemorySaver
from threadline.errors import GraphValidationError


class State(TypedDict):
    aggregate: Annotated[list, operator.add]


class ReturnNodeValue:
    """The node of LangGraph's "defer node execution" how-to: it says what it adds to what."""

    def __init__(self, node_secret: str, printed: list[str]):
        self._value = node_secret
        self._printed = printed

    def __call__(self, state: State) -> dict:
        self._printed.append(f"Adding {self._value} to {state['aggregate']}")
        return {"aggregate": [self._value]}


def uneven_branches(printed: list[str], defer: bool = True) -> StateGraph:
    """a fans out to b -> b_2 and to c; both branches end in d."""
    builder = StateGraph(State)
    for name in ("a", "b", "b_2", "c"):
        builder.add_node(name, ReturnNodeValue(f"I'm {name.upper()}", printed))
    builder.add_node("d", ReturnNodeValue("I'm D", printed), defer=defer)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge("b", "b_2")
    builder.add_edge("b_2", "d")
    builder.add_edge("c", "d")
    builder.add_edge("d", END)
    return builder


def test_the_how_to_example_prints_what_langgraph_prints():
    printed: list[str] = []
    graph = uneven_branches(printed).compile()
    result = graph.invoke({"aggregate": []})
    assert printed == [
        "Adding I'm A to []",
        "Adding I'm B to [\"I'm A\"]",
        "Adding I'm C to [\"I'm A\"]",
        'Adding I\'m B_2 to ["I\'m A", "I\'m B", "I\'m C"]',
        'Adding I\'m D to ["I\'m A", "I\'m B", "I\'m C", "I\'m B_2"]',
    ]
    assert result == {"aggregate": ["I'm A", "I'm B", "I'm C", "I'm B_2", "I'm D"]}


def test_without_defer_the_join_runs_once_per_arriving_branch():
    printed: list[str] = []
    result = uneven_branches(printed, defer=False).compile().invoke({"aggregate": []})
    assert result["aggregate"].count("I'm D") == 2


def test_a_join_edge_into_a_deferred_node_waits_too():
    printed: list[str] = []
    builder = StateGraph(State)
    for name in ("a", "b", "b_2", "c"):
        builder.add_node(name, ReturnNodeValue(name, printed))
    builder.add_node("d", ReturnNodeValue("d", printed), defer=True)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "c")
    builder.add_edge("b", "b_2")
    builder.add_edge(["b_2", "c"], "d")
    builder.add_edge("d", END)
    updates = list(builder.compile().stream({"aggregate": []}))
    names = [name for chunk in updates for name in chunk]
    # b and c run in one step and stream as they finish, in either order
    assert names[0] == "a" and sorted(names[1:3]) == ["b", "c"] and names[3:] == ["b_2", "d"]


def test_sends_still_pending_do_not_hold_a_deferred_node_back():
    """As in LangGraph: only nodes triggered by edges keep a deferred node waiting."""
    printed: list[str] = []
    builder = StateGraph(State)
    builder.add_node("a", ReturnNodeValue("A", printed))
    builder.add_node("b", ReturnNodeValue("B", printed))
    builder.add_node("b_2", ReturnNodeValue("B_2", printed))
    builder.add_node("d", ReturnNodeValue("D", printed), defer=True)
    builder.add_edge(START, "a")
    builder.add_conditional_edges("a", lambda s: [Send("b", {"aggregate": []}), "d"])
    builder.add_edge("b", "b_2")
    builder.add_edge("b_2", END)
    builder.add_edge("d", END)
    result = builder.compile().invoke({"aggregate": []})
    assert printed[-1] == "Adding B_2 to ['A', 'D', 'B']"  # d ran in the same step as b
    assert result == {"aggregate": ["A", "D", "B", "B_2"]}


def test_a_deferred_node_in_a_loop_runs_each_time_the_run_quiets():
    printed: list[str] = []
    builder = StateGraph(State)
    builder.add_node("a", ReturnNodeValue("A", printed))
    builder.add_node("b", ReturnNodeValue("B", printed))
    builder.add_node("d", ReturnNodeValue("D", printed), defer=True)
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("a", "d")
    builder.add_edge("b", END)
    builder.add_conditional_edges("d", lambda s: "a" if len(s["aggregate"]) < 6 else END)
    result = builder.compile().invoke({"aggregate": []})
    assert result == {"aggregate": ["A", "B", "D", "A", "B", "D"]}


def test_a_deferred_node_right_after_start_runs_at_once():
    printed: list[str] = []
    builder = StateGraph(State)
    builder.add_node("d", ReturnNodeValue("D", printed), defer=True)
    builder.add_edge(START, "d")
    builder.add_edge("d", END)
    assert builder.compile().invoke({"aggregate": []}) == {"aggregate": ["D"]}


def test_the_waiting_node_is_kept_in_the_checkpoint_and_runs_after_a_resume(saver):
    printed: list[str] = []
    graph = uneven_branches(printed).compile(checkpointer=saver, interrupt_before=["b_2"])
    config = {"configurable": {"thread_id": "1"}}
    graph.invoke({"aggregate": []}, config)
    assert graph.get_state(config).next == ("b_2",)  # d waits, but is not a next task

    printed.clear()
    again = uneven_branches(printed).compile(checkpointer=saver)  # as a new process would
    assert again.invoke(None, config)["aggregate"][-2:] == ["I'm B_2", "I'm D"]
    assert printed == [
        'Adding I\'m B_2 to ["I\'m A", "I\'m B", "I\'m C"]',
        'Adding I\'m D to ["I\'m A", "I\'m B", "I\'m C", "I\'m B_2"]',
    ]
    history = [(s.metadata["step"], s.next) for s in again.get_state_history(config)]
    assert history == [
        (4, ()),
        (3, ("d",)),
        (2, ("b_2",)),
        (1, ("b", "c")),
        (0, ("a",)),
        (-1, ("__start__",)),
    ]


async def test_deferred_nodes_in_async_runs():
    printed: list[str] = []
    graph = uneven_branches(printed).compile(checkpointer=InMemorySaver())
    result = await graph.ainvoke({"aggregate": []}, {"configurable": {"thread_id": "t"}})
    assert result["aggregate"] == ["I'm A", "I'm B", "I'm C", "I'm B_2", "I'm D"]


def test_defer_must_be_a_bool():
    with pytest.raises(GraphValidationError, match="defer of 'd' must be True or False"):
        StateGraph(State).add_node("d", lambda s: {}, defer="yes")


def test_the_drawing_marks_a_deferred_node_as_langgraph_does():
    mermaid = uneven_branches([]).compile().get_graph().draw_mermaid()
    assert "\td(d<hr/><small><em>defer = True</em></small>)\n" in mermaid
    assert "\tc(c)\n" in mermaid
