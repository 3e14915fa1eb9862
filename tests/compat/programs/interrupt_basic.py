"""Human-in-the-loop: pause with interrupt() and resume with Command(resume=...)."""

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict


class State(TypedDict):
    some_text: str


def human_node(state: State):
    value = interrupt({"text_to_revise": state["some_text"]})
    return {"some_text": value}


graph_builder = StateGraph(State)
graph_builder.add_node("human_node", human_node)
graph_builder.add_edge(START, "human_node")

checkpointer = InMemorySaver()
graph = graph_builder.compile(checkpointer=checkpointer)

config = {"configurable": {"thread_id": "some_id"}}
result = graph.invoke({"some_text": "original text"}, config=config)
print(sorted(result))
print(result["some_text"])
print([i.value for i in result["__interrupt__"]])

state = graph.get_state(config)
print(state.next)
print([i.value for i in state.interrupts])
print([(t.name, [i.value for i in t.interrupts]) for t in state.tasks])

print(graph.invoke(Command(resume="Edited text"), config=config))
print(graph.get_state(config).next)
