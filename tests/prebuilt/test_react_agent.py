"""create_react_agent: LangGraph's nodes, loop, prompt, structured output and breakpoints, and a
history repaired before every model call."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from pydantic import BaseModel

from threadline import Runtime
from threadline.checkpoint import InMemorySaver, SqliteSaver
from threadline.errors import NotSupportedError
from threadline.messages import (
    USES_LANGCHAIN,
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
    add_messages,
)
from threadline.messages.reducer import REMOVE_ALL_MESSAGES
from threadline.models import ScriptedChatModel
from threadline.prebuilt import InjectedState, create_react_agent, validate_history

CONFIG = {"configurable": {"thread_id": "t1"}}


def get_weather(city: str) -> str:
    """The weather of a city."""
    return f"It's always sunny in {city}"


def wants(*calls: tuple[str, dict]) -> dict[str, Any]:
    return {"content": "", "tool_calls": [{"name": n, "args": a} for n, a in calls]}


def test_the_agent_loops_model_tools_model_with_langgraphs_updates() -> None:
    model = ScriptedChatModel(
        [wants(("get_weather", {"city": "sf"}), ("get_weather", {"city": "nyc"})), "Sunny both."]
    )
    agent = create_react_agent(model, [get_weather])
    updates = list(agent.stream({"messages": [{"role": "user", "content": "weather?"}]}))
    assert [next(iter(u)) for u in updates] == ["agent", "tools", "tools", "agent"]
    # Each call streams its update when it finishes (as in LangGraph); the state keeps call order
    assert sorted(u["tools"]["messages"][0].content for u in updates[1:3]) == [
        "It's always sunny in nyc",
        "It's always sunny in sf",
    ]
    bound = model.calls[0].kwargs["tools"][0]["function"]
    assert bound["name"] == "get_weather" and bound["description"] == "The weather of a city."
    assert model.calls[1].messages[-1].content == "It's always sunny in nyc"


def test_invoke_returns_the_conversation_only() -> None:
    model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "Sunny."])
    result = create_react_agent(model, [get_weather]).invoke({"messages": [("user", "hi")]})
    assert list(result) == ["messages"]
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["messages"][-1].content == "Sunny."


def test_version_v1_runs_a_turns_calls_in_one_tools_task() -> None:
    model = ScriptedChatModel(
        [wants(("get_weather", {"city": "a"}), ("get_weather", {"city": "b"})), "ok"]
    )
    agent = create_react_agent(model, [get_weather], version="v1")
    updates = list(agent.stream({"messages": [("user", "hi")]}))
    assert [next(iter(u)) for u in updates] == ["agent", "tools", "agent"]
    assert len(updates[1]["tools"]["messages"]) == 2


def test_prompt_as_str_system_message_or_function() -> None:
    for prompt, first in [
        ("Be brief.", "Be brief."),
        (SystemMessage("Be kind."), "Be kind."),
        (lambda state: [SystemMessage("From a function."), *state["messages"]], "From a function."),
    ]:
        model = ScriptedChatModel(["hi"])
        create_react_agent(model, [], prompt=prompt).invoke({"messages": [("user", "hello")]})
        sent = model.calls[0].messages
        assert isinstance(sent[0], SystemMessage) and sent[0].content == first
        assert sent[1].content == "hello"


def test_the_agents_name_is_put_on_its_messages() -> None:
    model = ScriptedChatModel(["hi"])
    result = create_react_agent(model, [], name="helper").invoke({"messages": [("user", "x")]})
    assert result["messages"][-1].name == "helper"


class Weather(BaseModel):
    city: str
    sunny: bool


def test_response_format_asks_once_more_for_a_structured_answer() -> None:
    model = ScriptedChatModel(
        [wants(("get_weather", {"city": "sf"})), "Sunny.", '{"city": "sf", "sunny": true}']
    )
    agent = create_react_agent(
        model, [get_weather], response_format=("Answer in the schema.", Weather)
    )
    result = agent.invoke({"messages": [("user", "weather in sf?")]})
    assert result["structured_response"] == Weather(city="sf", sunny=True)
    last_call = model.calls[-1].messages
    assert last_call[0].content == "Answer in the schema."
    assert last_call[-1].content == "Sunny."


def test_a_dynamic_model_is_chosen_per_call_from_state_and_context() -> None:
    @dataclass
    class Context:
        tier: str

    fast, smart = ScriptedChatModel(["fast answer"]), ScriptedChatModel(["smart answer"])

    def choose(state: dict, runtime: Runtime[Context]) -> Any:
        return smart if runtime.context.tier == "pro" else fast

    agent = create_react_agent(choose, [], context_schema=Context)
    result = agent.invoke({"messages": [("user", "hi")]}, context={"tier": "pro"})
    assert result["messages"][-1].content == "smart answer" and fast.remaining == 1


def test_a_tool_reads_the_state_through_injected_state() -> None:
    def count(state: Annotated[dict, InjectedState]) -> int:
        """How many messages so far."""
        return len(state["messages"])

    model = ScriptedChatModel([wants(("count", {})), "done"])
    result = create_react_agent(model, [count]).invoke({"messages": [("user", "count")]})
    assert result["messages"][2].content == "2"
    assert model.calls[0].kwargs["tools"][0]["function"]["parameters"]["properties"] == {}


@pytest.mark.skipif(not USES_LANGCHAIN, reason="needs langchain-core")
def test_a_return_direct_tool_ends_the_run_with_its_result() -> None:
    from langchain_core.tools import tool

    @tool(return_direct=True)
    def final_answer(text: str) -> str:
        """Answer the user directly."""
        return text.upper()

    model = ScriptedChatModel([wants(("final_answer", {"text": "bye"}))])
    result = create_react_agent(model, [final_answer]).invoke({"messages": [("user", "x")]})
    assert result["messages"][-1].content == "BYE" and model.remaining == 0


def test_interrupt_before_tools_then_continue_runs_the_tool(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "agent.db") as saver:
        model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "Sunny."])
        agent = create_react_agent(
            model, [get_weather], checkpointer=saver, interrupt_before=["tools"]
        )
        agent.invoke({"messages": [("user", "weather?")]}, CONFIG)
        assert agent.get_state(CONFIG).next == ("tools",)
        result = agent.invoke(None, CONFIG)
        assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]


def test_new_input_instead_of_continuing_repairs_the_orphaned_call(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "agent.db") as saver:
        model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "Fine, no weather."])
        agent = create_react_agent(
            model, [get_weather], checkpointer=saver, interrupt_before=["tools"]
        )
        agent.invoke({"messages": [("user", "weather?")]}, CONFIG)
        result = agent.invoke({"messages": [("user", "never mind")]}, CONFIG)
        messages = result["messages"]
        assert [m.type for m in messages] == ["human", "ai", "tool", "human", "ai"]
        filler = messages[2]
        assert filler.status == "error" and "was not executed" in filler.content
        assert validate_history(messages) == []
        sent = model.calls[1].messages  # the model saw the repaired history
        assert [m.type for m in sent] == ["human", "ai", "tool", "human"]
        again = agent.get_state(CONFIG).values["messages"]
        assert [m.id for m in again] == [m.id for m in messages]


def test_an_invalid_history_given_as_input_is_repaired_before_the_model_sees_it() -> None:
    orphan = AIMessage(
        content="", tool_calls=[{"name": "get_weather", "args": {"city": "x"}, "id": "old"}]
    )
    model = ScriptedChatModel(["hello"])
    agent = create_react_agent(model, [get_weather], checkpointer=InMemorySaver())
    result = agent.invoke({"messages": [HumanMessage("hi"), orphan, HumanMessage("hey")]}, CONFIG)
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "human", "ai"]
    assert validate_history(model.calls[0].messages) == []


def test_unsupported_and_wrong_arguments_are_refused_clearly() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(NotSupportedError, match="init_chat_model"):
        create_react_agent("openai:gpt-4o", [])
    with pytest.raises(TypeError, match="unexpected keyword arguments: \\['tool_choice'\\]"):
        create_react_agent(model, [], tool_choice="auto")
    with pytest.raises(ValueError, match="Invalid version v3"):
        create_react_agent(model, [], version="v3")

    class Other(TypedDict):
        notes: Annotated[list, add_messages]

    with pytest.raises(ValueError, match="Missing required key"):
        create_react_agent(model, [], state_schema=Other)


def test_a_state_schema_with_a_sequence_of_messages_takes_message_likes() -> None:
    class State(TypedDict):  # as LangGraph's docs write it
        messages: Annotated[Sequence[BaseMessage], add_messages]
        topic: str

    model = ScriptedChatModel(["hi"])
    agent = create_react_agent(model, [get_weather], state_schema=State)
    orphan = AIMessage(content="", tool_calls=[{"name": "get_weather", "args": {}, "id": "o"}])
    result = agent.invoke({"messages": [{"role": "user", "content": "x"}, orphan], "topic": "t"})
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    assert result["topic"] == "t"


def test_stream_mode_messages_streams_the_models_tokens_from_the_agent_node() -> None:
    model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "It is sunny today."])
    agent = create_react_agent(model, [get_weather])
    parts = list(agent.stream({"messages": [("user", "hi")]}, stream_mode="messages"))
    text = "".join(c.content for c, meta in parts if meta["langgraph_node"] == "agent")
    assert text == "It is sunny today."
    tools = [c for c, meta in parts if meta["langgraph_node"] == "tools"]
    assert [m.content for m in tools] == ["It's always sunny in sf"]


def test_langgraphs_module_paths_hold_the_same_names() -> None:
    from threadline.prebuilt import ToolNode
    from threadline.prebuilt import create_react_agent as top
    from threadline.prebuilt.chat_agent_executor import AgentState, create_react_agent
    from threadline.prebuilt.tool_node import ToolNode as ToolNodeThere

    assert create_react_agent is top and ToolNodeThere is ToolNode
    assert "messages" in AgentState.__annotations__


def test_a_pre_model_hook_chooses_what_the_model_is_sent() -> None:
    def last_two(state: dict) -> dict:
        return {"llm_input_messages": state["messages"][-2:]}

    model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "Sunny."])
    agent = create_react_agent(model, [get_weather], pre_model_hook=last_two, prompt="Hi.")
    result = agent.invoke({"messages": [("user", "a"), ("ai", "b"), ("user", "weather?")]})
    assert [m.content for m in model.calls[0].messages] == ["Hi.", "b", "weather?"]
    assert [m.type for m in model.calls[1].messages] == ["system", "ai", "tool"]
    assert len(result["messages"]) == 6 and "llm_input_messages" not in result


def test_a_hook_that_cuts_a_call_from_its_result_is_repaired_before_the_model() -> None:
    def last_three(state: dict) -> dict:
        return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *state["messages"][-3:]]}

    model = ScriptedChatModel([wants(("get_weather", {"city": "sf"})), "Sunny.", "Again."])
    agent = create_react_agent(
        model, [get_weather], pre_model_hook=last_three, checkpointer=InMemorySaver()
    )
    agent.invoke({"messages": [("user", "a"), ("ai", "b"), ("user", "weather?")]}, CONFIG)
    result = agent.invoke({"messages": [("user", "and now?")]}, CONFIG)
    # the hook kept [tool result, "Sunny.", "and now?"]: a result whose call is gone
    assert [m.type for m in model.calls[2].messages] == ["ai", "human"]
    assert [m.content for m in result["messages"]] == ["Sunny.", "and now?", "Again."]
    assert validate_history(result["messages"]) == []


def test_a_pre_model_hook_with_a_pydantic_state() -> None:
    class State(BaseModel):
        messages: Annotated[list[AnyMessage], add_messages]
        topic: str = ""

    def last_one(state: State) -> dict:
        return {"llm_input_messages": state.messages[-1:]}

    model = ScriptedChatModel(["ok"])
    agent = create_react_agent(model, [], state_schema=State, pre_model_hook=last_one)
    result = agent.invoke({"messages": [("user", "a"), ("user", "b")], "topic": "t"})
    assert [m.content for m in model.calls[0].messages] == ["b"]
    assert [m.content for m in result["messages"]] == ["a", "b", "ok"]


def test_a_post_model_hook_answers_a_call_itself_and_the_others_run() -> None:
    def guardrail(state: dict) -> dict:
        last = state["messages"][-1]
        blocked = [c for c in last.tool_calls if c["args"].get("city") == "moscow"]
        return {
            "messages": [
                ToolMessage("Blocked.", tool_call_id=c["id"], name=c["name"]) for c in blocked
            ]
        }

    model = ScriptedChatModel(
        [wants(("get_weather", {"city": "sf"}), ("get_weather", {"city": "moscow"})), "ok"]
    )
    agent = create_react_agent(model, [get_weather], post_model_hook=guardrail)
    updates = list(agent.stream({"messages": [("user", "weather?")]}))
    assert [next(iter(u)) for u in updates] == [
        "agent",
        "post_model_hook",
        "tools",
        "agent",
        "post_model_hook",
    ]
    sent = model.calls[1].messages
    assert sorted(m.content for m in sent if m.type == "tool") == [
        "Blocked.",
        "It's always sunny in sf",
    ]
    assert validate_history(sent) == []


def test_near_the_recursion_limit_the_agent_says_it_needs_more_steps() -> None:
    model = ScriptedChatModel([wants(("get_weather", {"city": f"c{n}"})) for n in range(5)])
    agent = create_react_agent(model, [get_weather])
    result = agent.invoke({"messages": [("user", "go on")]}, {"recursion_limit": 4})
    assert [m.type for m in result["messages"]] == ["human", "ai", "tool", "ai"]
    last = result["messages"][-1]
    assert last.content == "Sorry, need more steps to process this request."
    assert not last.tool_calls and last.id == model.calls[1].reply.id
    assert "remaining_steps" not in result
