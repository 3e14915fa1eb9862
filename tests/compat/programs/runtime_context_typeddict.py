"""Runtime context as a TypedDict, read in a node and in a conditional edge (get_runtime too)."""

from typing import Literal

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime, get_runtime
from typing_extensions import TypedDict


class Context(TypedDict):
    user_name: str
    shout: bool


class State(TypedDict):
    greeting: str


def greet(state: State, runtime: Runtime[Context]):
    return {"greeting": f"hello {runtime.context['user_name']}"}


def route(state: State, runtime: Runtime[Context]) -> Literal["shout", "__end__"]:
    return "shout" if runtime.context["shout"] else END


def shout(state: State):
    runtime = get_runtime(Context)
    return {"greeting": state["greeting"].upper() + "!" * len(runtime.context["user_name"])}


builder = StateGraph(State, context_schema=Context)
builder.add_node(greet)
builder.add_node(shout)
builder.add_edge(START, "greet")
builder.add_conditional_edges("greet", route)
builder.add_edge("shout", END)
graph = builder.compile()

print(graph.invoke({"greeting": ""}, context={"user_name": "ada", "shout": False}))
print(graph.invoke({"greeting": ""}, context={"user_name": "ada", "shout": True}))
