"""Command with goto=Send(...): a node routes to several workers with their own inputs."""

import operator
from typing import Annotated

from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, Send
from typing_extensions import TypedDict


class State(TypedDict):
    numbers: list[int]
    squares: Annotated[list[int], operator.add]


def plan(state: State) -> Command:
    return Command(
        update={"squares": []},
        goto=[Send("square", {"n": n}) for n in state["numbers"]],
    )


def square(state: dict):
    return {"squares": [state["n"] ** 2]}


def total(state: State):
    print("total of", sorted(state["squares"]), "=", sum(state["squares"]))
    return {}


builder = StateGraph(State)
builder.add_node(plan, destinations=("square",))
builder.add_node(square)
builder.add_node(total)
builder.add_edge(START, "plan")
builder.add_edge("square", "total")
builder.add_edge("total", END)
graph = builder.compile()

result = graph.invoke({"numbers": [1, 2, 3, 4], "squares": []})
print(sorted(result["squares"]))
