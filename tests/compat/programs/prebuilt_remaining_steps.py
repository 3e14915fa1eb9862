"""Agents: a model that keeps asking for tools stops politely before the recursion limit."""

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.errors import GraphRecursionError
from langgraph.prebuilt import create_react_agent


class FakeToolModel(GenericFakeChatModel):
    """A fake chat model that accepts tools (it replies from its script anyway)."""

    def bind_tools(self, tools, **kwargs):
        return self


def search(query: str) -> str:
    """Search the web."""
    return f"results for {query}"


def asks(n):
    return AIMessage(
        "", id=f"a{n}", tool_calls=[{"name": "search", "args": {"query": f"q{n}"}, "id": f"c{n}"}]
    )


for limit in (2, 4, 6, 8):
    model = FakeToolModel(messages=iter([asks(n) for n in range(10)]))
    agent = create_react_agent(model, [search])
    try:
        result = agent.invoke({"messages": [("user", "research")]}, {"recursion_limit": limit})
    except GraphRecursionError:
        print(limit, "recursion limit reached")
        continue
    print(limit, [m.type for m in result["messages"]], repr(result["messages"][-1].content))
