"""get_state_history with limit and before, walking a thread back page by page."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from typing_extensions import TypedDict


class State(TypedDict):
    step: int


def tick(state: State):
    return {"step": state["step"] + 1}


def route(state: State):
    return "tick" if state["step"] < 5 else "__end__"


builder = StateGraph(State)
builder.add_node(tick)
builder.add_edge(START, "tick")
builder.add_conditional_edges("tick", route)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
graph.invoke({"step": 0}, config)

pages = []
before = None
while True:
    page = list(graph.get_state_history(config, limit=3, before=before))
    if not page:
        break
    pages.append([s.values.get("step") for s in page])
    before = page[-1].config
print(pages)
