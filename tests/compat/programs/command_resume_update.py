"""Resume with Command(resume=..., update=...), and update_state(...) while paused, then resume."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    draft: str
    reviewer: str
    verdict: str


def review(state: State):
    verdict = interrupt({"draft": state["draft"], "reviewer": state["reviewer"]})
    return {"verdict": f"{state['reviewer']}: {verdict}"}


builder = StateGraph(State)
builder.add_node(review)
builder.add_edge(START, "review")
builder.add_edge("review", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
print(graph.invoke({"draft": "v1", "reviewer": "ann"}, config)["__interrupt__"][0].value)
print(graph.invoke(Command(resume="ok", update={"reviewer": "bob"}), config))

config = {"configurable": {"thread_id": "2"}}
print(graph.invoke({"draft": "v1", "reviewer": "ann"}, config)["__interrupt__"][0].value)
graph.update_state(config, {"draft": "v2"})
state = graph.get_state(config)
print(state.values, state.next, [i.value for i in state.interrupts])
print(graph.invoke(Command(resume="fine"), config))
