"""How to use the graph API: add retry policies to nodes."""

import sqlite3

from langgraph.graph import END, START, StateGraph
from langgraph.types import RetryPolicy
from typing_extensions import TypedDict


class State(TypedDict):
    attempts: int
    rows: list[str]


calls = {"query_database": 0, "flaky_api": 0}


def query_database(state: State):
    calls["query_database"] += 1
    if calls["query_database"] < 3:
        raise sqlite3.OperationalError("database is locked")
    return {"rows": ["AC/DC", "Accept"], "attempts": calls["query_database"]}


def flaky_api(state: State):
    calls["flaky_api"] += 1
    raise ValueError("bad request")


builder = StateGraph(State)
builder.add_node(
    "query_database",
    query_database,
    retry_policy=RetryPolicy(retry_on=sqlite3.OperationalError, initial_interval=0.01),
)
builder.add_node(
    "flaky_api", flaky_api, retry_policy=RetryPolicy(max_attempts=5, initial_interval=0.01)
)
builder.add_edge(START, "query_database")
builder.add_edge("query_database", "flaky_api")
builder.add_edge("flaky_api", END)
graph = builder.compile()

try:
    graph.invoke({"attempts": 0, "rows": []})
except ValueError as e:
    print("ValueError:", e)
print(calls)

policy = RetryPolicy()
print(policy.initial_interval, policy.backoff_factor, policy.max_interval, policy.max_attempts)
print(policy.jitter)
