"""Human-in-the-loop: review and edit state produced by an earlier node."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    summary: str


def generate_summary(state: State) -> State:
    return {"summary": "The cat sat on the mat and looked at the stars."}


def human_review_edit(state: State) -> State:
    result = interrupt(
        {
            "task": "Please review and edit the generated summary if necessary.",
            "generated_summary": state["summary"],
        }
    )
    return {"summary": result["edited_summary"]}


def downstream_use(state: State) -> State:
    print(f"✅ Using edited summary: {state['summary']}")
    return state


builder = StateGraph(State)
builder.add_node("generate_summary", generate_summary)
builder.add_node("human_review_edit", human_review_edit)
builder.add_node("downstream_use", downstream_use)
builder.set_entry_point("generate_summary")
builder.add_edge("generate_summary", "human_review_edit")
builder.add_edge("human_review_edit", "downstream_use")
builder.add_edge("downstream_use", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "thread-1"}}
result = graph.invoke({}, config=config)
print(result["__interrupt__"][0].value)

edited_summary = "The cat lay on the rug, gazing peacefully at the night sky."
resumed_result = graph.invoke(Command(resume={"edited_summary": edited_summary}), config=config)
print(resumed_result)
