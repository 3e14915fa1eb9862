"""How to use the graph API: return state on hitting the recursion limit with RemainingSteps."""

import operator
from typing import Annotated, Literal

from langgraph.graph import END, START, StateGraph
from langgraph.managed.is_last_step import RemainingSteps
from typing_extensions import TypedDict


class State(TypedDict):
    aggregate: Annotated[list, operator.add]
    remaining_steps: RemainingSteps


def a(state: State):
    print(f"Node A sees {state['aggregate']}")
    return {"aggregate": ["A"]}


def b(state: State):
    print(f"Node B sees {state['aggregate']}")
    return {"aggregate": ["B"]}


def route(state: State) -> Literal["b", END]:
    if state["remaining_steps"] <= 2:
        return END
    else:
        return "b"


builder = StateGraph(State)
builder.add_node(a)
builder.add_node(b)
builder.add_edge(START, "a")
builder.add_conditional_edges("a", route)
builder.add_edge("b", "a")
graph = builder.compile()

result = graph.invoke({"aggregate": []}, {"recursion_limit": 4})
print(result)
