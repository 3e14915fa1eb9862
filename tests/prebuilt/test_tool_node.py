"""ToolNode and tools_condition: LangGraph's shapes, texts and error handling."""

from __future__ import annotations

import asyncio
import threading
from typing import Annotated, Any

import pytest

from threadline import END, START, StateGraph
from threadline.checkpoint import InMemorySaver
from threadline.errors import NotSupportedError
from threadline.messages import USES_LANGCHAIN, AIMessage, HumanMessage, MessagesState
from threadline.prebuilt import InjectedState, InjectedStore, ToolNode, tools_condition
from threadline.store import InMemoryStore

needs_langchain = pytest.mark.skipif(not USES_LANGCHAIN, reason="needs langchain-core")


def add(a: int, b: int) -> int:
    """Add two numbers."""
    return a + b


def lookup(order: str) -> dict:
    """Look an order up."""
    return {"order": order, "status": "shipped", "note": "déjà vu"}


def explode(reason: str) -> str:
    """Always fails."""
    raise ConnectionError(f"payments down: {reason}")


def call(name: str, args: dict, id: str = "c1") -> dict[str, Any]:
    return {"name": name, "args": args, "id": id, "type": "tool_call"}


def asking(*calls: dict[str, Any]) -> dict[str, Any]:
    return {"messages": [HumanMessage("go"), AIMessage(content="", tool_calls=list(calls))]}


def test_results_come_back_as_tool_messages_in_the_inputs_shape() -> None:
    node = ToolNode([add, lookup])
    out = node.invoke(asking(call("add", {"a": 2, "b": 3}), call("lookup", {"order": "A1"}, "c2")))
    first, second = out["messages"]
    assert (first.content, first.name, first.tool_call_id, first.status) == (
        "5",
        "add",
        "c1",
        "success",
    )
    assert second.content == '{"order": "A1", "status": "shipped", "note": "déjà vu"}'
    as_list = node.invoke(asking(call("add", {"a": 1, "b": 1}))["messages"])
    assert isinstance(as_list, list) and as_list[0].content == "2"
    direct = node.invoke([call("add", {"a": 4, "b": 4})])
    assert direct["messages"][0].content == "8"


def test_several_calls_run_at_the_same_time() -> None:
    barrier = threading.Barrier(3, timeout=5)

    def wait(n: int) -> int:
        """Waits for the others."""
        barrier.wait()
        return n

    node = ToolNode([wait])
    out = node.invoke(asking(*(call("wait", {"n": n}, f"c{n}") for n in range(3))))
    assert [m.content for m in out["messages"]] == ["0", "1", "2"]


def test_an_unknown_tool_gets_langgraphs_error_message() -> None:
    out = ToolNode([add, lookup]).invoke(asking(call("refund", {})))
    message = out["messages"][0]
    assert message.content == "Error: refund is not a valid tool, try one of [add, lookup]."
    assert message.status == "error" and message.tool_call_id == "c1"


def test_bad_arguments_go_back_to_the_model_by_default() -> None:
    out = ToolNode([add]).invoke(asking(call("add", {"a": "x"})))
    message = out["messages"][0]
    assert message.status == "error"
    assert message.content == (
        "Error invoking tool 'add' with kwargs {'a': 'x'} with error:\n"
        " a: Input should be a valid integer, unable to parse string as an integer\n"
        "b: Field required\n"
        " Please fix the error and try again."
    )


def test_a_tools_own_error_is_raised_by_default_as_in_langgraph_1() -> None:
    with pytest.raises(ConnectionError, match="payments down"):
        ToolNode([explode]).invoke(asking(call("explode", {"reason": "x"})))


def test_handle_tool_errors_true_returns_langgraphs_error_text() -> None:
    out = ToolNode([explode], handle_tool_errors=True).invoke(
        asking(call("explode", {"reason": "x"}))
    )
    message = out["messages"][0]
    assert message.content == (
        "Error: ConnectionError('payments down: x')\n Please fix your mistakes."
    )
    assert message.status == "error"


def test_handle_tool_errors_str_type_and_callable() -> None:
    req = asking(call("explode", {"reason": "x"}))
    assert ToolNode([explode], handle_tool_errors="try later").invoke(req)["messages"][
        0
    ].content == ("try later")
    caught = ToolNode([explode], handle_tool_errors=(ConnectionError,)).invoke(req)
    assert caught["messages"][0].content.startswith("Error: ConnectionError(")
    with pytest.raises(ConnectionError):
        ToolNode([explode], handle_tool_errors=ValueError).invoke(req)

    def polite(e: ConnectionError) -> str:
        return f"sorry: {e}"

    out = ToolNode([explode], handle_tool_errors=polite).invoke(req)
    assert out["messages"][0].content == "sorry: payments down: x"

    def only_values(e: ValueError) -> str:
        return "never"

    with pytest.raises(ConnectionError):
        ToolNode([explode], handle_tool_errors=only_values).invoke(req)
    with pytest.raises(ConnectionError):
        ToolNode([explode], handle_tool_errors=False).invoke(req)


def test_one_failing_call_does_not_lose_the_others_when_errors_are_handled() -> None:
    out = ToolNode([add, explode], handle_tool_errors=True).invoke(
        asking(call("explode", {"reason": "x"}), call("add", {"a": 1, "b": 2}, "c2"))
    )
    assert [m.status for m in out["messages"]] == ["error", "success"]


def test_injected_state_and_store_are_filled_in_and_hidden_from_the_model() -> None:
    seen: dict[str, Any] = {}

    def remember(
        fact: str,
        messages: Annotated[list, InjectedState("messages")],
        state: Annotated[dict, InjectedState],
        store: Annotated[Any, InjectedStore()],
    ) -> str:
        """Remember a fact."""
        store.put(("facts",), fact, {"after": len(messages)})
        seen["keys"] = sorted(state)
        return "ok"

    node = ToolNode([remember])
    spec = node._tools["remember"].for_model()
    assert list(spec["function"]["parameters"]["properties"]) == ["fact"]

    def model(state: MessagesState) -> dict:
        return {"messages": [AIMessage(content="", tool_calls=[call("remember", {"fact": "x"})])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", node)
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    store = InMemoryStore()
    app = graph.compile(checkpointer=InMemorySaver(), store=store)
    final = app.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert final["messages"][-1].content == "ok"
    assert store.get(("facts",), "x").value == {"after": 2}
    assert seen["keys"] == ["messages"]


def test_injecting_a_store_without_one_is_a_clear_error() -> None:
    def needs_store(x: int, store: Annotated[Any, InjectedStore()]) -> int:
        """Needs a store."""
        return x

    with pytest.raises(ValueError, match="please compile your graph with a store"):
        ToolNode([needs_store]).invoke(asking(call("needs_store", {"x": 1})))


def test_async_tools_and_ainvoke() -> None:
    started: list[int] = []

    async def together(n: int) -> int:
        """Returns once all three calls have started: they run at the same time."""
        started.append(n)
        async with asyncio.timeout(5):
            while len(started) < 3:
                await asyncio.sleep(0.01)
        return n + 1

    node = ToolNode([together])
    req = asking(*(call("together", {"n": n}, f"c{n}") for n in range(3)))
    out = asyncio.run(node.ainvoke(req))
    assert [m.content for m in out["messages"]] == ["1", "2", "3"]
    started.clear()
    started.extend([7, 8])  # a sync invoke runs the coroutine to its end on its own loop
    assert node.invoke(asking(call("together", {"n": 1})))["messages"][0].content == "2"


@needs_langchain
def test_langchain_core_tools_run_as_langgraph_runs_them() -> None:
    from langchain_core.tools import tool

    @tool
    def multiply(a: int, b: int, state: Annotated[dict, InjectedState]) -> int:
        """Multiply two numbers."""
        return a * b * len(state["messages"])

    node = ToolNode([multiply])
    assert node.tools_by_name["multiply"] is multiply
    assert list(node._tools["multiply"].for_model().tool_call_schema.model_fields) == ["a", "b"]
    out = node.invoke(asking(call("multiply", {"a": 2, "b": 3})))
    assert out["messages"][0].content == "12"
    bad = node.invoke(asking(call("multiply", {"a": "x", "b": 1})))["messages"][0]
    assert bad.status == "error"
    assert bad.content.startswith("Error invoking tool 'multiply' with kwargs {'a': 'x', 'b': 1}")
    assert "state" not in bad.content


def test_refused_options_and_bad_tools_are_clear_errors() -> None:
    with pytest.raises(NotSupportedError, match="wrap_tool_call"):
        ToolNode([add], wrap_tool_call=lambda request, execute: execute(request))
    with pytest.raises(TypeError, match="cannot use 3 as a tool"):
        ToolNode([3])
    with pytest.raises(ValueError, match="No AIMessage found in input"):
        ToolNode([add]).invoke({"messages": [HumanMessage("hi")]})


def test_tools_condition_routes_on_the_last_messages_tool_calls() -> None:
    assert tools_condition(asking(call("add", {}))) == "tools"
    assert tools_condition({"messages": [AIMessage("hi")]}) == END
    assert tools_condition([AIMessage(content="", tool_calls=[call("add", {})])]) == "tools"
    with pytest.raises(ValueError, match="No messages found"):
        tools_condition({"messages": []})


def test_a_tool_runtime_parameter_gets_state_context_config_writer_and_call_id() -> None:
    from dataclasses import dataclass

    from threadline.models import ScriptedChatModel
    from threadline.prebuilt import ToolRuntime, create_react_agent

    @dataclass
    class Ctx:
        user: str

    def whoami(greeting: str, runtime: ToolRuntime[Ctx, dict]) -> str:
        """Say who is asking."""
        runtime.stream_writer({"progress": "looking up"})
        runtime.store.put(("seen",), runtime.context.user, {"n": len(runtime.state["messages"])})
        thread = runtime.config["configurable"]["thread_id"]
        return f"{greeting} {runtime.context.user} ({runtime.tool_call_id}, {thread})"

    model = ScriptedChatModel(
        [
            {"content": "", "tool_calls": [{"name": "whoami", "args": {"greeting": "hi"}}]},
            "done",
        ]
    )
    store = InMemoryStore()
    agent = create_react_agent(
        model, [whoami], context_schema=Ctx, checkpointer=InMemorySaver(), store=store
    )
    config = {"configurable": {"thread_id": "t9"}}
    parts = list(
        agent.stream(
            {"messages": [("user", "who?")]},
            config,
            context={"user": "ada"},
            stream_mode=["custom", "values"],
        )
    )
    assert ("custom", {"progress": "looking up"}) in parts
    result = parts[-1][1]
    call_id = result["messages"][1].tool_calls[0]["id"]
    assert result["messages"][2].content == f"hi ada ({call_id}, t9)"
    assert store.get(("seen",), "ada").value == {"n": 2}
    offered = model.calls[0].kwargs["tools"][0]["function"]["parameters"]["properties"]
    assert list(offered) == ["greeting"]
