"""Agents: manage the conversation with a pre_model_hook (trim what the model sees, or rewrite
the stored history)."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, RemoveMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt import create_react_agent

SEEN = []


class FakeToolModel(GenericFakeChatModel):
    """A fake chat model that accepts tools and records what it is sent."""

    def bind_tools(self, tools, **kwargs):
        return self

    def invoke(self, input, config=None, **kwargs):
        SEEN.append([m.content for m in input])
        return super().invoke(input, config, **kwargs)


def get_weather(city: str) -> str:
    """Get the weather for a given city."""
    return f"It's always sunny in {city}!"


def last_two(state):
    """Send the model only the last two messages; keep the history as it is."""
    return {"llm_input_messages": state["messages"][-2:]}


def keep_last_four(state):
    """Rewrite the stored history to its last four messages."""
    return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *state["messages"][-4:]]}


def replies():
    return iter(
        [
            AIMessage(
                "",
                id="a1",
                tool_calls=[{"name": "get_weather", "args": {"city": "sf"}, "id": "c1"}],
            ),
            AIMessage("Sunny in sf.", id="a2"),
            AIMessage("Still sunny.", id="a3"),
        ]
    )


for hook in (last_two, keep_last_four):
    SEEN.clear()
    agent = create_react_agent(
        FakeToolModel(messages=replies()),
        [get_weather],
        pre_model_hook=hook,
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": hook.__name__}}
    agent.invoke(
        {"messages": [("user", "hi"), ("ai", "hello"), ("user", "weather in sf?")]}, config
    )
    result = agent.invoke({"messages": [("user", "and now?")]}, config)
    print(hook.__name__, sorted(n for n in agent.get_graph().nodes if not n.startswith("__")))
    print("  model saw:", SEEN)
    print("  stored:", [m.content for m in result["messages"]])
