"""How to use the graph API: MessagesState subclassed with an extra field."""

from langchain_core.messages import AIMessage
from langgraph.graph import END, START, MessagesState, StateGraph


class State(MessagesState):
    extra_field: int


def node(state: State):
    return {"messages": [AIMessage("Hello!", id="ai-1")], "extra_field": len(state["messages"])}


builder = StateGraph(State)
builder.add_node(node)
builder.add_edge(START, "node")
builder.add_edge("node", END)
graph = builder.compile()

result = graph.invoke({"messages": [("user", "hi")]})
print(result["extra_field"])
for message in result["messages"]:
    print(type(message).__name__, repr(message.content))
