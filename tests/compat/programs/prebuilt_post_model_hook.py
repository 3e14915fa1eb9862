"""Agents: a post_model_hook that vets tool calls (answering a forbidden one itself) and
tidies final answers."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.prebuilt import create_react_agent


class FakeToolModel(GenericFakeChatModel):
    """A fake chat model that accepts tools (it replies from its script anyway)."""

    def bind_tools(self, tools, **kwargs):
        return self


def get_weather(city: str) -> str:
    """Get the weather for a given city."""
    return f"It's always sunny in {city}!"


def delete_account(user: str) -> str:
    """Delete a user's account."""
    return f"deleted {user}"


def guardrail(state):
    last = state["messages"][-1]
    blocked = [c for c in last.tool_calls if c["name"] == "delete_account"]
    if blocked:
        answers = [
            ToolMessage("Blocked by policy.", tool_call_id=c["id"], name=c["name"]) for c in blocked
        ]
        return {"messages": answers}
    if not last.tool_calls:
        return {"messages": [AIMessage(last.content.upper(), id=last.id)]}
    return {}


model = FakeToolModel(
    messages=iter(
        [
            AIMessage(
                "",
                id="a1",
                tool_calls=[
                    {"name": "get_weather", "args": {"city": "sf"}, "id": "c1"},
                    {"name": "delete_account", "args": {"user": "bob"}, "id": "c2"},
                ],
            ),
            AIMessage("done: sunny, and bob stays.", id="a2"),
        ]
    )
)
agent = create_react_agent(model, [get_weather, delete_account], post_model_hook=guardrail)
print(sorted(n for n in agent.get_graph().nodes if not n.startswith("__")))
result = agent.invoke({"messages": [("user", "weather in sf, and delete bob")]})
for message in result["messages"]:
    print(message.type, getattr(message, "name", None), repr(message.content))

plain = create_react_agent(
    FakeToolModel(messages=iter([AIMessage("hello there", id="b1")])), [], post_model_hook=guardrail
)
print([m.content for m in plain.invoke({"messages": [("user", "hi")]})["messages"]])
