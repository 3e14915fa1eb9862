"""How to use the graph API: runtime type coercion of a Pydantic state."""

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel


class CoercionExample(BaseModel):
    number: int
    flag: bool


def inspect_node(state: CoercionExample):
    print(f"number: {state.number} (type: {type(state.number).__name__})")
    print(f"flag: {state.flag} (type: {type(state.flag).__name__})")
    return {}


builder = StateGraph(CoercionExample)
builder.add_node("inspect", inspect_node)
builder.add_edge(START, "inspect")
builder.add_edge("inspect", END)
graph = builder.compile()

print(graph.invoke({"number": "42", "flag": "true"}))

try:
    graph.invoke({"number": "not-a-number", "flag": "true"})
except Exception as e:
    print("Expected validation error:", type(e).__name__, e.errors()[0]["type"])
