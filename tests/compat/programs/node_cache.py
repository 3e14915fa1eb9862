"""Low-level concepts: node caching with CachePolicy and InMemoryCache."""

import time

from langgraph.cache.memory import InMemoryCache
from langgraph.graph import StateGraph
from langgraph.types import CachePolicy
from typing_extensions import TypedDict


class State(TypedDict):
    x: int
    result: int


builder = StateGraph(State)
calls = []


def expensive_node(state: State) -> dict[str, int]:
    calls.append(state["x"])
    time.sleep(0.2)
    return {"result": state["x"] * 2}


builder.add_node("expensive_node", expensive_node, cache_policy=CachePolicy(ttl=3))
builder.set_entry_point("expensive_node")
builder.set_finish_point("expensive_node")

graph = builder.compile(cache=InMemoryCache())

print(graph.invoke({"x": 5}, stream_mode="updates"))
print(graph.invoke({"x": 5}, stream_mode="updates"))
print(graph.invoke({"x": 6}, stream_mode="updates"))
print(calls)
