"""How to use the graph API: Pydantic models for graph state (validation on input)."""

from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ValidationError


class OverallState(BaseModel):
    a: str


def node(state: OverallState):
    return {"a": "goodbye"}


builder = StateGraph(OverallState)
builder.add_node(node)
builder.add_edge(START, "node")
builder.add_edge("node", END)
graph = builder.compile()

print(graph.invoke({"a": "hello"}))

try:
    graph.invoke({"a": 123})
except ValidationError as e:
    print("An exception was raised because `a` is an integer rather than a string.")
    error = e.errors()[0]
    print(error["type"], error["loc"], error["input"])


class NestedModel(BaseModel):
    value: str


class ComplexState(BaseModel):
    text: str
    count: int
    nested: NestedModel


def process_node(state: ComplexState):
    print(f"Input state type: {type(state).__name__}")
    print(f"Nested type: {type(state.nested).__name__}")
    return {"text": state.text + " processed", "count": state.count + 1}


builder = StateGraph(ComplexState)
builder.add_node("process", process_node)
builder.add_edge(START, "process")
builder.add_edge("process", END)
graph = builder.compile()

input_state = ComplexState(text="hello", count=0, nested=NestedModel(value="test"))
result = graph.invoke(input_state)
print(f"Output type: {type(result).__name__}")
print(f"Output content: {result}")
print(f"Converted back to Pydantic: {type(ComplexState(**result)).__name__}")
