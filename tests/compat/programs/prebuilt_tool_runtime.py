"""Agents: a tool that reads the run's context, the state, the store and its own call id
through ToolRuntime, and writes to the custom stream."""

from dataclasses import dataclass

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.prebuilt import ToolRuntime, create_react_agent
from langgraph.store.memory import InMemoryStore


class FakeToolModel(GenericFakeChatModel):
    """A fake chat model that accepts tools (it replies from its script anyway)."""

    def bind_tools(self, tools, **kwargs):
        return self


@dataclass
class UserContext:
    user_id: str


def get_profile(field: str, runtime: ToolRuntime[UserContext]) -> str:
    """Look a field of the user's profile up."""
    runtime.stream_writer(f"looking up {field}")
    item = runtime.store.get(("profiles",), runtime.context.user_id)
    seen = len(runtime.state["messages"])
    return f"{field}={item.value[field]} (call {runtime.tool_call_id}, {seen} messages)"


@tool
def greet(name: str, runtime: ToolRuntime) -> str:
    """Greet someone."""
    return f"hello {name}, says {runtime.context.user_id}"


store = InMemoryStore()
store.put(("profiles",), "u-7", {"city": "Lisbon"})
model = FakeToolModel(
    messages=iter(
        [
            AIMessage(
                "",
                id="a1",
                tool_calls=[
                    {"name": "get_profile", "args": {"field": "city"}, "id": "call_1"},
                    {"name": "greet", "args": {"name": "Ana"}, "id": "call_2"},
                ],
            ),
            AIMessage("You live in Lisbon.", id="a2"),
        ]
    )
)
agent = create_react_agent(model, [get_profile, greet], context_schema=UserContext, store=store)
for mode, chunk in agent.stream(
    {"messages": [("user", "where do I live?")]},
    context=UserContext(user_id="u-7"),
    stream_mode=["custom", "values"],
):
    if mode == "custom":
        print("custom:", chunk)
    else:
        final = chunk
for message in final["messages"]:
    print(message.type, repr(message.content))
