"""A value changed in place, by a node or by the caller, never reaches the next run.

SQLite and PostgreSQL hold a long conversation decoded between runs (``chains.HeldChains``) and
give each load its own copies; the other savers decode at every load. Either way the next run
must see what was stored, whatever was done to the objects a run handed out.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from factories import SAVER_FACTORIES

from threadline import END, START, StateGraph
from threadline.checkpoint import BaseSaver

TURNS = 30  # 60 messages of 1 KB: a chain long enough to be held


class Chat(TypedDict, total=False):
    messages: Annotated[list[Any], operator.add]
    poke: bool


@pytest.fixture(params=sorted(SAVER_FACTORIES))
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance


def message(turn: int, role: str) -> dict[str, Any]:
    """A flat message, or (the AI's) one with a nested dict and list, which copies of one level
    would share."""
    flat = {"role": role, "turn": turn, "content": "x" * 1000}
    return flat if role != "ai" else {**flat, "meta": {"tags": [role]}}


def chat(saver: BaseSaver, seen: list[list[Any]]):
    """One node: records the messages it is given, may change them in place, then replies."""

    def reply(state: Chat) -> dict[str, Any]:
        messages = state["messages"]
        seen.append(copy.deepcopy(messages))
        answer = message(messages[-1]["turn"], "ai")
        if state.get("poke"):  # a node that (wrongly) changes its state in place
            messages[0]["content"] = "poked"
            messages[1]["meta"]["tags"].append("poked")
            messages.append(message(-1, "stray"))
        return {"messages": [answer], "poke": False}

    g = StateGraph(Chat)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def converse(graph: Any, config: dict[str, Any], turns: range, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for turn in turns:
        out = graph.invoke({"messages": [message(turn, "human")], **extra}, config)
    return out


def expected(turns: int) -> list[dict[str, Any]]:
    return [message(t, role) for t in range(turns) for role in ("human", "ai")]


def test_changing_what_a_run_returned_does_not_reach_the_next_run(saver: BaseSaver) -> None:
    seen: list[list[Any]] = []
    graph = chat(saver, seen)
    config = {"configurable": {"thread_id": "t"}}
    out = converse(graph, config, range(TURNS))
    out["messages"][0]["content"] = "changed"
    out["messages"][1]["meta"]["tags"].append("changed")
    out["messages"].append(message(-1, "stray"))
    converse(graph, config, range(TURNS, TURNS + 1))
    assert seen[-1] == [*expected(TURNS), message(TURNS, "human")]
    assert graph.get_state(config).values["messages"] == expected(TURNS + 1)


def test_a_node_changing_its_state_in_place_does_not_reach_the_next_run(saver: BaseSaver) -> None:
    seen: list[list[Any]] = []
    graph = chat(saver, seen)
    config = {"configurable": {"thread_id": "t"}}
    converse(graph, config, range(TURNS))
    converse(graph, config, range(TURNS, TURNS + 1), poke=True)
    converse(graph, config, range(TURNS + 1, TURNS + 2))
    assert seen[-1] == [*expected(TURNS + 1), message(TURNS + 1, "human")]
    assert graph.get_state(config).values["messages"] == expected(TURNS + 2)


def test_items_that_are_not_plain_still_load_as_stored(saver: BaseSaver) -> None:
    """A set, a tuple around a list: items the saver cannot share, decoded at every load."""
    seen: list[list[Any]] = []
    graph = chat(saver, [])
    config = {"configurable": {"thread_id": "t"}}
    converse(graph, config, range(TURNS))
    odd = [{"role": "tool", "turn": TURNS, "meta": {"tags": ["t"]}, "ids": {1, 2}, "pair": ([1],)}]
    graph.update_state(config, {"messages": odd})
    out = converse(graph, config, range(TURNS + 1, TURNS + 2))
    out["messages"][2 * TURNS]["ids"].add(3)
    out["messages"][2 * TURNS]["pair"][0].append(2)
    assert graph.get_state(config).values["messages"][2 * TURNS] == odd[0]
    assert seen == []
