"""Add memory: delete messages with RemoveMessage, and all of them with REMOVE_ALL_MESSAGES."""

from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import REMOVE_ALL_MESSAGES


def reply(state: MessagesState):
    n = len(state["messages"])
    return {"messages": [AIMessage(f"reply {n}", id=f"ai-{n}")]}


def delete_messages(state: MessagesState):
    messages = state["messages"]
    if len(messages) > 2:
        return {"messages": [RemoveMessage(id=m.id) for m in messages[:2]]}
    return {}


builder = StateGraph(MessagesState)
builder.add_sequence([reply, delete_messages])
builder.add_edge(START, "reply")
builder.add_edge("delete_messages", END)
graph = builder.compile(checkpointer=InMemorySaver())

config = {"configurable": {"thread_id": "1"}}
for i, text in enumerate(["hi! I'm bob", "what's my name?", "bye"]):
    result = graph.invoke({"messages": [HumanMessage(text, id=f"h-{i}")]}, config)
    print([(m.type, m.content) for m in result["messages"]])


def clear(state: MessagesState):
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), AIMessage("fresh start", id="new")]}


builder = StateGraph(MessagesState)
builder.add_node(clear)
builder.add_edge(START, "clear")
graph = builder.compile()
result = graph.invoke({"messages": [HumanMessage("one", id="1"), HumanMessage("two", id="2")]})
print([(m.type, m.content, m.id) for m in result["messages"]])
print(REMOVE_ALL_MESSAGES)
