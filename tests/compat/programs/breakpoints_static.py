"""Human-in-the-loop: static breakpoints with interrupt_before / interrupt_after."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    input: str


def step_1(state):
    print("---Step 1---")


def step_2(state):
    print("---Step 2---")


def step_3(state):
    print("---Step 3---")


builder = StateGraph(State)
builder.add_node("step_1", step_1)
builder.add_node("step_2", step_2)
builder.add_node("step_3", step_3)
builder.add_edge(START, "step_1")
builder.add_edge("step_1", "step_2")
builder.add_edge("step_2", "step_3")
builder.add_edge("step_3", END)

checkpointer = InMemorySaver()
graph = builder.compile(checkpointer=checkpointer, interrupt_before=["step_3"])

initial_input = {"input": "hello world"}
thread = {"configurable": {"thread_id": "1"}}

for event in graph.stream(initial_input, thread, stream_mode="values"):
    print(event)

print(graph.get_state(thread).next)

for event in graph.stream(None, thread, stream_mode="values"):
    print(event)

graph = builder.compile(checkpointer=checkpointer)
thread = {"configurable": {"thread_id": "2"}}
for event in graph.stream(initial_input, thread, interrupt_after=["step_1"]):
    print(event)
print(graph.get_state(thread).next)
for event in graph.stream(None, thread):
    print(event)
