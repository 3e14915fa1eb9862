"""How to use the graph API: the add_messages reducer (OpenAI-style dicts are coerced)."""

from typing import Annotated

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langgraph.graph import StateGraph
from langgraph.graph.message import add_messages
from typing_extensions import TypedDict


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    extra_field: int


def node(state: State):
    new_message = AIMessage("Hello!")
    return {"messages": [new_message], "extra_field": 10}


graph = StateGraph(State).add_node(node).set_entry_point("node").compile()

input_message = {"role": "user", "content": "Hi"}
result = graph.invoke({"messages": [input_message]})
for message in result["messages"]:
    message.pretty_print()
print([type(m).__name__ for m in result["messages"]])
print(all(isinstance(m.id, str) and m.id for m in result["messages"]))

# The reducer on its own: a message whose id is already there replaces it.
msgs1 = [HumanMessage(content="Hello", id="1")]
msgs2 = [AIMessage(content="Hi there!", id="2")]
print(add_messages(msgs1, msgs2))
msgs2 = [HumanMessage(content="Hello again", id="1")]
print(add_messages(msgs1, msgs2))
