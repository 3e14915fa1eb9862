"""Older docs: MemorySaver (InMemorySaver's earlier name) and add_messages from langgraph.graph."""

from typing import Annotated

from langgraph.checkpoint.memory import MemorySaver
from langgraph.graph import END, START, StateGraph, add_messages
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list, add_messages]


def chatbot(state: State):
    return {"messages": [("assistant", f"echo: {state['messages'][-1].content}")]}


graph_builder = StateGraph(State)
graph_builder.add_node("chatbot", chatbot)
graph_builder.add_edge(START, "chatbot")
graph_builder.add_edge("chatbot", END)
memory = MemorySaver()
graph = graph_builder.compile(checkpointer=memory)

config = {"configurable": {"thread_id": "1"}}
for text in ["Hi there! My name is Will.", "Remember my name?"]:
    events = graph.stream({"messages": [("user", text)]}, config, stream_mode="values")
    for event in events:
        print(event["messages"][-1].type, event["messages"][-1].content)

snapshot = graph.get_state(config)
print(len(snapshot.values["messages"]), snapshot.next, isinstance(snapshot.created_at, str))
