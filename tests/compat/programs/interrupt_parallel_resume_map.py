"""Human-in-the-loop: several interrupts at once, resumed with a map of interrupt id to value."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    text_1: str
    text_2: str


def human_node_1(state: State):
    value = interrupt({"text_to_revise": state["text_1"]})
    return {"text_1": value}


def human_node_2(state: State):
    value = interrupt({"text_to_revise": state["text_2"]})
    return {"text_2": value}


graph_builder = StateGraph(State)
graph_builder.add_node("human_node_1", human_node_1)
graph_builder.add_node("human_node_2", human_node_2)
graph_builder.add_edge(START, "human_node_1")
graph_builder.add_edge(START, "human_node_2")

checkpointer = InMemorySaver()
graph = graph_builder.compile(checkpointer=checkpointer)

thread_id = "parallel-thread"
config = {"configurable": {"thread_id": thread_id}}
result = graph.invoke({"text_1": "original text 1", "text_2": "original text 2"}, config=config)
print(sorted(i.value["text_to_revise"] for i in result["__interrupt__"]))
state = graph.get_state(config)
print(sorted(state.next))

resume_map = {
    i.id: f"edited text for {i.value['text_to_revise']}" for i in graph.get_state(config).interrupts
}
print(graph.invoke(Command(resume=resume_map), config=config))
