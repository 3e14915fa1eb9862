"""Agents: create_react_agent with tools, a prompt, memory, and a pause before the tools."""

from typing import Annotated

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import InjectedState, create_react_agent


class FakeToolModel(GenericFakeChatModel):
    """A fake chat model that accepts tools (it replies from its script anyway)."""

    def bind_tools(self, tools, **kwargs):
        return self


def get_weather(city: str) -> str:
    """Get the weather for a given city."""
    return f"It's always sunny in {city}!"


def count_messages(state: Annotated[dict, InjectedState]) -> int:
    """How many messages the conversation has."""
    return len(state["messages"])


model = FakeToolModel(
    messages=iter(
        [
            AIMessage(
                "",
                id="ai-1",
                tool_calls=[
                    {"name": "get_weather", "args": {"city": "sf"}, "id": "call_1"},
                    {"name": "count_messages", "args": {}, "id": "call_2"},
                    {"name": "get_weather", "args": {"town": "nyc"}, "id": "call_3"},
                    {"name": "book_flight", "args": {}, "id": "call_4"},
                ],
            ),
            AIMessage("It's sunny in sf.", id="ai-2"),
            AIMessage(
                "",
                id="ai-3",
                tool_calls=[{"name": "get_weather", "args": {"city": "la"}, "id": "call_5"}],
            ),
            AIMessage("Sunny in la too.", id="ai-4"),
        ]
    )
)

agent = create_react_agent(
    model,
    tools=[get_weather, count_messages],
    prompt="You are a helpful assistant",
    checkpointer=InMemorySaver(),
    interrupt_before=["tools"],
    name="weather_agent",
)
config = {"configurable": {"thread_id": "1"}}

first = agent.invoke(
    {"messages": [{"role": "user", "content": "what is the weather in sf"}]}, config
)
print(sorted(first), agent.get_state(config).next)
result = agent.invoke(None, config)
for message in result["messages"]:
    print(
        message.type,
        getattr(message, "name", None),
        repr(message.content),
        getattr(message, "status", ""),
    )
print(sorted(n for n in agent.get_graph().nodes if not n.startswith("__")))

agent.invoke({"messages": [{"role": "user", "content": "and la?"}]}, config)
state = agent.get_state(config)
print(state.next, [t.name for t in state.tasks])
final = agent.invoke(None, config)
print(len(final["messages"]), final["messages"][-2].content, final["messages"][-1].content)
