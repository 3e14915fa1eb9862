"""How to use the graph API: add runtime configuration with a context schema and Runtime."""

from dataclasses import dataclass

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict


@dataclass
class ContextSchema:
    my_runtime_value: str


class State(TypedDict):
    my_state_value: int


def node(state: State, runtime: Runtime[ContextSchema]):
    if runtime.context.my_runtime_value == "a":
        return {"my_state_value": 1}
    elif runtime.context.my_runtime_value == "b":
        return {"my_state_value": 2}
    else:
        raise ValueError("Unknown values.")


builder = StateGraph(State, context_schema=ContextSchema)
builder.add_node(node)
builder.add_edge(START, "node")
builder.add_edge("node", END)
graph = builder.compile()

print(graph.invoke({}, context={"my_runtime_value": "a"}))
print(graph.invoke({}, context={"my_runtime_value": "b"}))
print(graph.invoke({}, context=ContextSchema(my_runtime_value="a")))
