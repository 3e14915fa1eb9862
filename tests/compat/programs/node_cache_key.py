"""Node caching with a key_func: inputs that map to the same key share one cached result."""

from langgraph.cache.memory import InMemoryCache
from langgraph.graph import END, START, StateGraph
from langgraph.types import CachePolicy
from typing_extensions import TypedDict


class State(TypedDict):
    query: str
    answer: str


calls = []


def lookup(state: State):
    calls.append(state["query"])
    return {"answer": f"answer to {state['query'].strip().lower()}"}


builder = StateGraph(State)
builder.add_node(
    "lookup",
    lookup,
    cache_policy=CachePolicy(key_func=lambda state: state["query"].strip().lower()),
)
builder.add_edge(START, "lookup")
builder.add_edge("lookup", END)
graph = builder.compile(cache=InMemoryCache())

for query in ["Weather", "weather ", "WEATHER", "news"]:
    for chunk in graph.stream({"query": query}):
        print(chunk)
print(calls)
graph.clear_cache()
print(graph.invoke({"query": "weather"}))
print(calls)
