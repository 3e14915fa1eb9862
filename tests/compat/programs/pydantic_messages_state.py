"""How to use the graph API: a Pydantic state holding LangChain messages."""

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel


class ChatState(BaseModel):
    messages: list[AnyMessage]
    context: str


def add_message(state: ChatState):
    return {"messages": state.messages + [AIMessage(content="Hello there!")]}


builder = StateGraph(ChatState)
builder.add_node("add_message", add_message)
builder.add_edge(START, "add_message")
builder.add_edge("add_message", END)
graph = builder.compile()

initial_state = ChatState(messages=[HumanMessage(content="Hi")], context="Customer support chat")
result = graph.invoke(initial_state)
print(f"Output: {result}")

output_model = ChatState(**result)
for i, msg in enumerate(output_model.messages):
    print(f"Message {i}: {type(msg).__name__} - {msg.content}")
