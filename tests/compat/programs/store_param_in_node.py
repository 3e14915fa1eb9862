"""Memory store injected into a node by a `store` parameter, and found with get_store()."""

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_store
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore
from typing_extensions import TypedDict


class State(TypedDict):
    fact: str
    known: list[str]


def remember(state: State, config: RunnableConfig, *, store: BaseStore):
    user_id = config["configurable"]["user_id"]
    store.put(("facts", user_id), state["fact"], {"fact": state["fact"]})
    return {}


def recall(state: State, config: RunnableConfig):
    store = get_store()
    user_id = config["configurable"]["user_id"]
    return {"known": sorted(item.key for item in store.search(("facts", user_id)))}


builder = StateGraph(State)
builder.add_node(remember)
builder.add_node(recall)
builder.add_edge(START, "remember")
builder.add_edge("remember", "recall")
builder.add_edge("recall", END)
graph = builder.compile(store=InMemoryStore())

print(graph.invoke({"fact": "likes tea"}, {"configurable": {"user_id": "u1"}}))
print(graph.invoke({"fact": "plays chess"}, {"configurable": {"user_id": "u1"}}))
print(graph.invoke({"fact": "hates rain"}, {"configurable": {"user_id": "u2"}}))
