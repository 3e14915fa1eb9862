"""What nodes get and give: state schemas as instances, the run config, the store, async
nodes, and subgraphs sharing keys with their parent.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Annotated, TypedDict

import pytest
from execution_graphs import (
    State,
    append,
    cfg,
    chain,
)
from pydantic import BaseModel

from threadline import (
    END,
    START,
    StateGraph,
    get_store,
)
from threadline.checkpoint import InMemorySaver
from threadline.errors import ThreadlineError
from threadline.store import InMemoryStore

# ------------------------------------------------------------------ subgraphs


class ChildState(TypedDict, total=False):
    log: Annotated[list[str], operator.add]
    value: str


def test_a_subgraph_sharing_an_append_key_does_not_duplicate_the_parents_items(saver):
    child = StateGraph(ChildState)
    child.add_node("inner_one", append("inner_one"))
    child.add_node("inner_two", lambda s: {"log": ["inner_two"], "value": "set by child"})
    child.add_edge(START, "inner_one")
    child.add_edge("inner_one", "inner_two")
    child.add_edge("inner_two", END)

    parent = StateGraph(State)
    parent.add_node("before", append("before"))
    parent.add_node("child", child.compile())
    parent.add_node("after", append("after"))
    parent.add_edge(START, "before")
    parent.add_edge("before", "child")
    parent.add_edge("child", "after")
    parent.add_edge("after", END)
    out = parent.compile(checkpointer=saver).invoke({"log": ["input"]}, cfg())
    assert out == {
        "log": ["input", "before", "inner_one", "inner_two", "after"],
        "value": "set by child",
    }


def test_get_store_inside_a_subgraph_node_is_the_parents_store():
    store = InMemoryStore()

    def remember(state: State) -> dict:
        get_store().put(("memories",), "m1", {"text": "from subgraph"})
        return {"log": ["remembered"]}

    child = StateGraph(State)
    child.add_node("remember", remember)
    child.add_edge(START, "remember")
    child.add_edge("remember", END)
    parent = StateGraph(State)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    parent.compile(store=store).invoke({"log": []})
    item = store.get(("memories",), "m1")
    assert item is not None and item.value == {"text": "from subgraph"}


# ------------------------------------------------------------------ state schemas


@dataclass
class DataState:
    topic: str
    notes: Annotated[list[str], operator.add] = field(default_factory=list)
    mood: str = "calm"


def test_a_dataclass_state_reaches_nodes_as_an_instance():
    received: list[object] = []

    def research(state: DataState) -> dict:
        received.append(state)
        return {"notes": [state.topic.upper()], "mood": "busy"}

    g = StateGraph(DataState)
    g.add_node("research", research)
    g.add_node("again", lambda s: {"notes": [f"{len(s.notes)} notes"]})
    g.add_edge(START, "research")
    g.add_edge("research", "again")
    g.add_edge("again", END)
    out = g.compile().invoke({"topic": "owls"})
    assert isinstance(received[0], DataState) and received[0].topic == "owls"
    assert out == {"topic": "owls", "notes": ["OWLS", "1 notes"], "mood": "busy"}


class ModelState(BaseModel):
    topic: str
    notes: Annotated[list[str], operator.add] = []
    mood: str = "calm"


def test_a_pydantic_state_reaches_nodes_as_a_model_and_invoke_returns_a_dict():
    received: list[object] = []

    def research(state: ModelState) -> dict:
        received.append(state)
        return {"notes": [state.topic.upper()]}

    g = StateGraph(ModelState)
    g.add_node("research", research)
    g.add_edge(START, "research")
    g.add_edge("research", END)
    graph = g.compile()
    out = graph.invoke({"topic": "owls"})
    assert isinstance(received[0], ModelState) and received[0].topic == "owls"
    assert type(out) is dict
    assert out["topic"] == "owls" and out["notes"] == ["OWLS"]
    assert graph.invoke(ModelState(topic="bees"))["notes"] == ["BEES"]


# ------------------------------------------------------------------ config and store


def test_a_node_taking_config_receives_the_run_config():
    seen: list[dict] = []

    def node(state: State, config: dict) -> dict:
        seen.append(config)
        return {"log": ["node"]}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    g.add_edge("node", END)
    graph = g.compile(checkpointer=InMemorySaver())
    graph.invoke({"log": []}, {"configurable": {"thread_id": "t-42", "user": "ada"}})
    assert seen[0]["configurable"]["thread_id"] == "t-42"
    assert seen[0]["configurable"]["user"] == "ada"


def test_a_node_with_a_store_parameter_and_get_store_share_the_compiled_store():
    store = InMemoryStore()

    def remember(state: State, *, store) -> dict:
        store.put(("users", "ada"), "profile", {"name": state["value"]})
        return {"log": ["remembered"]}

    def recall(state: State) -> dict:
        item = get_store().get(("users", "ada"), "profile")
        return {"log": [f"recalled {item.value['name']}"]}

    g = StateGraph(State)
    g.add_node("remember", remember)
    g.add_node("recall", recall)
    g.add_edge(START, "remember")
    g.add_edge("remember", "recall")
    g.add_edge("recall", END)
    out = g.compile(store=store).invoke({"value": "Ada", "log": []})
    assert out["log"] == ["remembered", "recalled Ada"]
    assert store.get(("users", "ada"), "profile").value == {"name": "Ada"}


# ------------------------------------------------------------------ sync and async


async def test_async_nodes_run_with_ainvoke(saver):
    async def fetch(state: State) -> dict:
        return {"log": ["fetched"]}

    def parse(state: State) -> dict:  # sync nodes may sit in an async graph
        return {"log": ["parsed"]}

    g = StateGraph(State)
    g.add_node("fetch", fetch)
    g.add_node("parse", parse)
    g.add_edge(START, "fetch")
    g.add_edge("fetch", "parse")
    g.add_edge("parse", END)
    assert await g.compile(checkpointer=saver).ainvoke({"log": []}, cfg()) == {
        "log": ["fetched", "parsed"]
    }


def test_sync_invoke_of_a_graph_with_an_async_node_names_the_node():
    ran: list[str] = []

    async def slow_lookup(state: State) -> dict:
        ran.append("slow_lookup")
        return {"log": ["looked up"]}

    g = StateGraph(State)
    g.add_node("first", append("first", ran))
    g.add_node("slow_lookup", slow_lookup)
    g.add_edge(START, "first")
    g.add_edge("first", "slow_lookup")
    g.add_edge("slow_lookup", END)
    with pytest.raises((ThreadlineError, TypeError), match="slow_lookup"):
        g.compile().invoke({"log": []})
    assert "slow_lookup" not in ran


def test_a_graph_without_a_checkpointer_returns_the_final_state_and_keeps_nothing():
    graph = chain("a", "b").compile()
    assert graph.invoke({"value": "v", "log": []}) == {"value": "v", "log": ["a", "b"]}
    assert graph.invoke({"log": ["again"]}) == {"log": ["again", "a", "b"]}


class CountState(TypedDict, total=False):
    x: int
    results: Annotated[list[int], operator.add]
    count: Annotated[int, operator.add]


def test_a_node_may_run_a_compiled_graph_several_times_each_on_its_own_input(saver):
    child = StateGraph(CountState)
    child.add_node("double", lambda s: {"x": s["x"] * 2})
    child.add_edge(START, "double")
    child.add_edge("double", END)
    doubler = child.compile()

    def map_items(state: CountState) -> dict:
        return {"results": [doubler.invoke({"x": i})["x"] for i in (1, 2, 3)]}

    g = StateGraph(CountState)
    g.add_node("map_items", map_items)
    g.add_edge(START, "map_items")
    g.add_edge("map_items", END)
    assert g.compile(checkpointer=saver).invoke({"results": []}, cfg())["results"] == [2, 4, 6]


def test_a_subgraph_sharing_a_counter_key_does_not_add_the_parents_value_twice():
    child = StateGraph(CountState)
    child.add_node("increment", lambda s: {"count": 1})
    child.add_edge(START, "increment")
    child.add_edge("increment", END)
    parent = StateGraph(CountState)
    parent.add_node("child", child.compile())
    parent.add_edge(START, "child")
    parent.add_edge("child", END)
    assert parent.compile().invoke({"count": 5})["count"] == 6
