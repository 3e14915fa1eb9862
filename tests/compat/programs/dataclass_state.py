"""State schema as a dataclass, with a default value and a reducer field."""

import operator
from dataclasses import dataclass, field
from typing import Annotated

from langgraph.graph import END, START, StateGraph


@dataclass
class State:
    topic: str
    drafts: Annotated[list[str], operator.add] = field(default_factory=list)
    rounds: int = 0


def draft(state: State):
    print(type(state).__name__, state.topic, state.drafts, state.rounds)
    return {"drafts": [f"draft {state.rounds + 1} on {state.topic}"], "rounds": state.rounds + 1}


def route(state: State):
    return "draft" if state.rounds < 3 else END


builder = StateGraph(State)
builder.add_node(draft)
builder.add_edge(START, "draft")
builder.add_conditional_edges("draft", route)
graph = builder.compile()

print(graph.invoke({"topic": "owls"}))
print(graph.invoke(State(topic="bats", rounds=2)))
