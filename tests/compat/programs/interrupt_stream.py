"""Human-in-the-loop: interrupts seen while streaming, then resumed by streaming a Command."""

import operator
from typing import Annotated

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    steps: Annotated[list[str], operator.add]
    answer: str


def step_1(state: State):
    return {"steps": ["step_1"]}


def human_feedback(state: State):
    feedback = interrupt("Please provide feedback:")
    return {"steps": ["human_feedback"], "answer": feedback}


def step_3(state: State):
    return {"steps": ["step_3"]}


builder = StateGraph(State)
builder.add_node("step_1", step_1)
builder.add_node("human_feedback", human_feedback)
builder.add_node("step_3", step_3)
builder.add_edge(START, "step_1")
builder.add_edge("step_1", "human_feedback")
builder.add_edge("human_feedback", "step_3")
builder.add_edge("step_3", END)
graph = builder.compile(checkpointer=InMemorySaver())

thread = {"configurable": {"thread_id": "1"}}
for event in graph.stream({"steps": []}, thread, stream_mode="updates"):
    if "__interrupt__" in event:
        print("interrupt:", [i.value for i in event["__interrupt__"]])
    else:
        print(event)

print(graph.get_state(thread).next)

for event in graph.stream(Command(resume="go to step 3!"), thread, stream_mode="updates"):
    print(event)

print(graph.get_state(thread).values)
