"""Routing: Send fan-out, conditional edges, and Command updates and gotos (to a parent too)."""

from __future__ import annotations

import operator
from typing import Annotated, Literal, TypedDict

import pytest
from execution_graphs import (
    State,
    append,
    cfg,
)

from threadline import (
    END,
    START,
    Command,
    Send,
    StateGraph,
)
from threadline.errors import InvalidUpdateError

# ------------------------------------------------------------------ Send


class MapState(TypedDict, total=False):
    subjects: list[str]
    jokes: Annotated[list[str], operator.add]
    summary: str


def test_send_fans_out_and_an_append_reducer_gathers_the_results(saver):
    received: list[dict] = []
    summaries: list[list[str]] = []

    def write_joke(arg: dict) -> dict:
        received.append(arg)
        return {"jokes": [f"joke about {arg['subject']}"]}

    def summarize(state: MapState) -> dict:
        summaries.append(list(state["jokes"]))
        return {"summary": f"{len(state['jokes'])} jokes"}

    subjects = ["cats", "dogs", "owls", "bees", "eels"]
    g = StateGraph(MapState)
    g.add_node("write_joke", write_joke)
    g.add_node("summarize", summarize)
    g.add_conditional_edges(
        START, lambda s: [Send("write_joke", {"subject": x}) for x in s["subjects"]], ["write_joke"]
    )
    g.add_edge("write_joke", "summarize")
    g.add_edge("summarize", END)
    out = g.compile(checkpointer=saver).invoke({"subjects": subjects}, cfg())
    assert sorted(received, key=lambda a: a["subject"]) == sorted(
        ({"subject": x} for x in subjects), key=lambda a: a["subject"]
    )
    assert out["jokes"] == [f"joke about {x}" for x in subjects]
    assert summaries == [out["jokes"]]
    assert out["summary"] == "5 jokes"


# ------------------------------------------------------------------ conditional edges


def branching_graph(path, path_map=None) -> tuple[StateGraph, list[str]]:
    calls: list[str] = []
    g = StateGraph(State)
    g.add_node("decide", append("decide", calls))
    for name in ("left", "right"):
        g.add_node(name, append(name, calls))
        g.add_edge(name, END)
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", path, path_map)
    return g, calls


def test_conditional_edge_returning_a_node_name():
    g, _ = branching_graph(lambda s: "right" if s["value"] == "r" else "left")
    graph = g.compile()
    assert graph.invoke({"value": "r", "log": []})["log"] == ["decide", "right"]
    assert graph.invoke({"value": "l", "log": []})["log"] == ["decide", "left"]


def test_conditional_edge_sees_the_write_of_its_own_node():
    g = StateGraph(State)
    g.add_node("decide", lambda s: {"value": "r"})
    g.add_node("left", append("left"))
    g.add_node("right", append("right"))
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", lambda s: s["value"] == "r", {True: "right", False: "left"})
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert g.compile().invoke({"value": "l", "log": []})["log"] == ["right"]


def test_conditional_edge_returning_a_list_runs_both_in_the_next_step():
    g, _ = branching_graph(lambda s: ["left", "right"])
    out = g.compile().invoke({"log": []})
    assert out["log"][0] == "decide" and sorted(out["log"][1:]) == ["left", "right"]


def test_conditional_edge_returning_end_stops_the_run():
    g, calls = branching_graph(lambda s: END)
    assert g.compile().invoke({"log": []}) == {"log": ["decide"]}
    assert calls == ["decide"]


def test_conditional_edge_with_a_path_map_dict():
    g, _ = branching_graph(
        lambda s: "go right" if s["value"] == "r" else "stop",
        {"go left": "left", "go right": "right", "stop": END},
    )
    graph = g.compile()
    assert graph.invoke({"value": "r", "log": []})["log"] == ["decide", "right"]
    assert graph.invoke({"value": "x", "log": []})["log"] == ["decide"]


def test_conditional_edge_with_a_path_map_list():
    g, _ = branching_graph(lambda s: "left", ["left", "right"])
    assert g.compile().invoke({"log": []})["log"] == ["decide", "left"]


async def async_decide(state: State) -> dict:
    return {"log": ["decide"]}


@pytest.mark.parametrize(
    "decide", [append("decide"), async_decide], ids=["sync-node", "async-node"]
)
async def test_an_async_path_function_routes_under_ainvoke(decide):
    async def choose(state: State) -> str:
        return "right"

    g = StateGraph(State)
    g.add_node("decide", decide)
    g.add_node("left", append("left"))
    g.add_node("right", append("right"))
    g.add_edge(START, "decide")
    g.add_conditional_edges("decide", choose, ["left", "right"])
    g.add_edge("left", END)
    g.add_edge("right", END)
    assert await g.compile().ainvoke({"log": []}) == {"log": ["decide", "right"]}


def test_conditional_edge_returning_an_unknown_node_is_an_error_naming_it():
    g, calls = branching_graph(lambda s: "nowhere")
    with pytest.raises(InvalidUpdateError, match="nowhere"):
        g.compile().invoke({"log": []})
    assert "left" not in calls and "right" not in calls


# ------------------------------------------------------------------ Command


def review(state: State) -> Command[Literal["approve", "reject"]]:
    target = "approve" if state["value"] == "ok" else "reject"
    return Command(update={"log": ["review"]}, goto=target)


def test_a_node_returning_command_updates_and_routes(saver):
    g = StateGraph(State)
    g.add_node("review", review)
    g.add_node("approve", append("approve"))
    g.add_node("reject", append("reject"))
    g.add_edge(START, "review")
    g.add_edge("approve", END)
    g.add_edge("reject", END)
    graph = g.compile(checkpointer=saver)
    assert graph.invoke({"value": "ok", "log": []}, cfg("1"))["log"] == ["review", "approve"]
    assert graph.invoke({"value": "no", "log": []}, cfg("2"))["log"] == ["review", "reject"]


def test_command_goto_with_destinations_declared_on_add_node(saver):
    def route(state: State) -> Command:
        return Command(update={"value": "routed"}, goto=["left", Send("right", {"log": []})])

    g = StateGraph(State)
    g.add_node("route", route, destinations=["left", "right"])
    g.add_node("left", append("left"))
    g.add_node("right", lambda arg: {"log": [f"right got {arg}"]})
    g.add_edge(START, "route")
    g.add_edge("left", END)
    g.add_edge("right", END)
    out = g.compile(checkpointer=saver).invoke({"log": []}, cfg())
    assert out == {"value": "routed", "log": ["left", "right got {'log': []}"]}


class TeamState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    owner: str


def handoff_graph(saver, ran: list[str]):
    """A parent whose ``writer`` subgraph hands off to the parent's ``reviewer`` node."""

    def hand_off(state: TeamState) -> Command:
        return Command(graph=Command.PARENT, goto="reviewer", update={"owner": "reviewer"})

    child = StateGraph(TeamState)
    child.add_node("hand_off", hand_off, destinations=[END])
    child.add_edge(START, "hand_off")

    def reviewer(state: TeamState) -> dict:
        ran.append(state["owner"])
        return {"log": ["reviewed"]}

    parent = StateGraph(TeamState)
    parent.add_node("writer", child.compile(), destinations=["reviewer"])
    parent.add_node("reviewer", reviewer)
    parent.add_edge(START, "writer")
    parent.add_edge("reviewer", END)
    return parent.compile(checkpointer=saver)


def test_command_to_parent_from_a_subgraph_routes_in_the_parent(saver):
    ran: list[str] = []
    out = handoff_graph(saver, ran).invoke({"log": ["start"]}, cfg())
    assert ran == ["reviewer"]
    assert out == {"log": ["start", "reviewed"], "owner": "reviewer"}


async def test_command_to_parent_from_a_subgraph_routes_in_the_parent_async(saver):
    ran: list[str] = []
    out = await handoff_graph(saver, ran).ainvoke({"log": ["start"]}, cfg())
    assert ran == ["reviewer"]
    assert out == {"log": ["start", "reviewed"], "owner": "reviewer"}
