"""Time travel: replaying from before an interrupt makes it fire again; the old branch stays."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    request: str
    decision: str
    outcome: str


def prepare(state: State):
    return {"request": state["request"].strip()}


def approve(state: State):
    return {"decision": interrupt(f"approve '{state['request']}'?")}


def act(state: State):
    return {"outcome": f"{state['request']}: {state['decision']}"}


builder = StateGraph(State)
builder.add_node(prepare)
builder.add_node(approve)
builder.add_node(act)
builder.add_edge(START, "prepare")
builder.add_edge("prepare", "approve")
builder.add_edge("approve", "act")
builder.add_edge("act", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
graph.invoke({"request": " refund order 7 "}, config)
print(graph.invoke(Command(resume="denied"), config))

before_approval = next(s for s in graph.get_state_history(config) if s.next == ("approve",))
print(before_approval.values)

result = graph.invoke(None, before_approval.config)
print([i.value for i in result["__interrupt__"]])
print(graph.invoke(Command(resume="granted"), config))

history = list(graph.get_state_history(config))
print(len(history))
print([(s.metadata["source"], s.metadata["step"], s.next) for s in history])
