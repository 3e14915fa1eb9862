"""A compiled graph used as a Runnable: batch, with_config, get_graph and schemas' names."""

from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    n: int


def double(state: State):
    return {"n": state["n"] * 2}


builder = StateGraph(State)
builder.add_node(double)
builder.add_edge(START, "double")
builder.add_edge("double", END)
graph = builder.compile(name="doubler")

print(graph.name)
print(graph.batch([{"n": 1}, {"n": 2}, {"n": 3}]))
configured = graph.with_config(recursion_limit=5, tags=["x"])
print(configured.invoke({"n": 21}))
print(sorted(graph.get_graph().nodes))
print(graph.get_input_jsonschema()["properties"])
print(graph.get_output_jsonschema()["properties"])
