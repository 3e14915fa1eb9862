"""Add tools: ToolNode and tools_condition with a fake chat model that calls a tool."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition


@tool
def get_weather(city: str) -> str:
    """Get the weather for a city."""
    return f"It's always sunny in {city}!"


model = GenericFakeChatModel(
    messages=iter(
        [
            AIMessage(
                "",
                tool_calls=[{"name": "get_weather", "args": {"city": "sf"}, "id": "call_1"}],
            ),
            AIMessage("The weather in sf is sunny."),
        ]
    )
)


def call_model(state: MessagesState):
    return {"messages": [model.invoke(state["messages"])]}


builder = StateGraph(MessagesState)
builder.add_node("call_model", call_model)
builder.add_node("tools", ToolNode([get_weather]))
builder.add_edge(START, "call_model")
builder.add_conditional_edges("call_model", tools_condition)
builder.add_edge("tools", "call_model")
graph = builder.compile()

result = graph.invoke({"messages": [{"role": "user", "content": "what is the weather in sf"}]})
for message in result["messages"]:
    print(message.type, repr(message.content), getattr(message, "tool_calls", None) or "")
