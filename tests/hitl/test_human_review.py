"""human_review(tool): accept, edit, respond, reject, and the tool body running at most once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool, InjectedToolCallId, tool

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import SqliteSaver
from threadline.errors import InvalidAnswerError
from threadline.hitl import human_review


class State(typing_extensions.TypedDict, total=False):
    order: str
    result: Any
    confirmed: Any


def cfg(thread: str = "t") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread}}


class Payments:
    """A refund API that records every refund it makes."""

    def __init__(self) -> None:
        self.refunds: list[tuple[str, float]] = []

    def refund(self, order: str, amount: float, note: str = "") -> str:
        """Refund part of an order."""
        self.refunds.append((order, amount))
        return f"refunded {amount} on {order}" + (f" ({note})" if note else "")


@pytest.fixture
def saver(tmp_path: Path):
    with SqliteSaver(str(tmp_path / "review.db")) as instance:
        yield instance


def refund_graph(reviewed: Any, saver: SqliteSaver, *, confirm: bool = False):
    """A node that calls the reviewed refund tool, then (optionally) asks for a confirmation:
    that second interrupt makes the whole node run again after the tool has run."""

    def pay(state: State) -> dict[str, Any]:
        result = reviewed(order=state["order"], amount=30)
        update = {"result": result}
        if confirm:
            update["confirmed"] = interrupt(f"tool said {result!r}; confirm?")
        return update

    g = StateGraph(State)
    g.add_node("pay", pay)
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=saver)


def test_the_call_is_shown_for_review_with_the_tools_schema(saver) -> None:
    payments = Payments()
    refund = human_review(payments.refund, description="Refunds move real money")
    graph = refund_graph(refund, saver)
    (asked,) = graph.invoke({"order": "A1"}, cfg())["__interrupt__"]
    assert asked.value["action_requests"] == [
        {
            "name": "refund",
            "args": {"order": "A1", "amount": 30},
            "description": "Refunds move real money",
        }
    ]
    (config,) = asked.value["review_configs"]
    assert config["allowed_decisions"] == ["accept", "edit", "respond", "reject"]
    assert config["args_schema"]["required"] == ["order", "amount"]
    assert config["args_schema"]["additionalProperties"] is False
    assert payments.refunds == []


def test_accept_runs_the_tool_once_even_when_the_node_runs_again(saver) -> None:
    payments = Payments()
    graph = refund_graph(human_review(payments.refund), saver, confirm=True)
    graph.invoke({"order": "A1"}, cfg())
    out = graph.invoke(Command(resume={"decisions": [{"type": "accept"}]}), cfg())
    assert out["__interrupt__"][0].value == "tool said 'refunded 30 on A1'; confirm?"
    assert payments.refunds == [("A1", 30)]
    out = graph.invoke(Command(resume="yes"), cfg())  # the node runs a third time
    assert out["result"] == "refunded 30 on A1" and out["confirmed"] == "yes"
    assert payments.refunds == [("A1", 30)]  # not twice


def test_edit_runs_the_tool_with_the_edited_arguments(saver) -> None:
    payments = Payments()
    graph = refund_graph(human_review(payments.refund), saver)
    graph.invoke({"order": "A1"}, cfg())
    edit = {"type": "edit", "args": {"order": "A1", "amount": 12.5, "note": "partial"}}
    out = graph.invoke(Command(resume=[edit]), cfg())
    assert out["result"] == "refunded 12.5 on A1 (partial)"
    assert payments.refunds == [("A1", 12.5)]


def test_an_edit_the_signature_refuses_leaves_the_review_pending(saver) -> None:
    payments = Payments()
    graph = refund_graph(human_review(payments.refund), saver)
    graph.invoke({"order": "A1"}, cfg())
    before = graph.get_state(cfg())
    with pytest.raises(InvalidAnswerError) as caught:
        graph.invoke(Command(resume=[{"type": "edit", "args": {"order": "A1", "amont": 1}}]), cfg())
    assert [p for p, _ in caught.value.problems] == [
        "decisions[0].args.amount",
        "decisions[0].args.amont",
    ]
    with pytest.raises(InvalidAnswerError, match=r"decisions\[0\].args.amount: expected number"):
        graph.invoke(
            Command(resume=[{"type": "edit", "args": {"order": "A1", "amount": "all"}}]), cfg()
        )
    assert graph.get_state(cfg()) == before and payments.refunds == []
    out = graph.invoke(Command(resume=[{"type": "accept"}]), cfg())
    assert out["result"] == "refunded 30 on A1"


def test_respond_and_reject_return_text_without_running_the_tool(saver) -> None:
    payments = Payments()
    graph = refund_graph(human_review(payments.refund), saver)
    graph.invoke({"order": "A1"}, cfg("respond"))
    out = graph.invoke(
        Command(resume={"type": "respond", "message": "Refunded by phone."}), cfg("respond")
    )
    assert out["result"] == "Refunded by phone."

    graph.invoke({"order": "A1"}, cfg("reject"))
    out = graph.invoke(Command(resume={"type": "reject"}), cfg("reject"))
    assert out["result"] == "User rejected the tool call for `refund`."

    graph.invoke({"order": "A1"}, cfg("reject-why"))
    out = graph.invoke(
        Command(resume={"type": "reject", "message": "Over the limit."}), cfg("reject-why")
    )
    assert out["result"] == "Over the limit."
    assert payments.refunds == []


def test_allowed_limits_the_decisions(saver) -> None:
    payments = Payments()
    graph = refund_graph(human_review(payments.refund, allowed=("accept", "reject")), saver)
    (asked,) = graph.invoke({"order": "A1"}, cfg())["__interrupt__"]
    assert asked.value["review_configs"][0]["allowed_decisions"] == ["accept", "reject"]
    with pytest.raises(InvalidAnswerError, match="'edit' is not allowed for action 'refund'"):
        graph.invoke(Command(resume={"type": "edit", "args": {"order": "A1", "amount": 1}}), cfg())


def test_a_langchain_tool_stays_a_tool_and_is_reviewed(saver) -> None:
    made: list[str] = []

    @tool
    def send_email(to: str, body: str) -> str:
        """Send an email."""
        made.append(to)
        return f"sent to {to}"

    reviewed = human_review(send_email)
    assert isinstance(reviewed, BaseTool)
    assert reviewed.name == "send_email" and reviewed.description == "Send an email."
    assert (
        reviewed.tool_call_schema.model_json_schema()
        == send_email.tool_call_schema.model_json_schema()
    )

    def node(state: State) -> dict[str, Any]:
        call = {
            "name": "send_email",
            "args": {"to": "ada@x.org", "body": "hi"},
            "id": "call_1",
            "type": "tool_call",
        }
        message = reviewed.invoke(call)
        assert isinstance(message, ToolMessage) and message.tool_call_id == "call_1"
        return {"result": message.content, "confirmed": interrupt("done?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=saver)
    graph.invoke({}, cfg())
    edit = {
        "type": "edit",
        "edited_action": {"name": "send_email", "args": {"to": "bob@x.org", "body": "hi"}},
    }
    graph.invoke(Command(resume={"decisions": [edit]}), cfg())
    out = graph.invoke(Command(resume="yes"), cfg())
    assert out["result"] == "sent to bob@x.org"
    assert made == ["bob@x.org"]


async def test_an_async_function_is_reviewed_in_an_async_node(saver) -> None:
    sent: list[str] = []

    async def notify(user: str) -> str:
        sent.append(user)
        return f"notified {user}"

    reviewed = human_review(notify)

    async def node(state: State) -> dict[str, Any]:
        result = await reviewed("ada")
        return {"result": result, "confirmed": interrupt("ok?")}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=saver)
    await graph.ainvoke({}, cfg())
    await graph.ainvoke(Command(resume={"type": "accept"}), cfg())
    out = await graph.ainvoke(Command(resume="ok"), cfg())
    assert out["result"] == "notified ada"
    assert sent == ["ada"]


def test_what_cannot_be_reviewed_is_refused_at_once() -> None:
    def spread(*items: str) -> None: ...

    with pytest.raises(TypeError, match="parameter 'items' cannot be given by name"):
        human_review(spread)
    with pytest.raises(TypeError, match="wraps a function or a langchain-core tool"):
        human_review(42)
    with pytest.raises(ValueError, match="must name some of"):
        human_review(Payments().refund, allowed=("approve",))  # type: ignore[arg-type]


async def test_a_sync_tool_in_an_async_node_is_refused_before_it_asks(saver) -> None:
    payments = Payments()
    reviewed = human_review(payments.refund)

    async def node(state: State) -> dict[str, Any]:
        return {"result": reviewed(order="A1", amount=1)}

    g = StateGraph(State)
    g.add_node("node", node)
    g.add_edge(START, "node")
    graph = g.compile(checkpointer=saver)
    with pytest.raises(RuntimeError, match="'refund' is sync but was called in an async node"):
        await graph.ainvoke({}, cfg())
    assert graph.get_state(cfg()).interrupts == () and payments.refunds == []


def test_a_langchain_tool_with_injected_arguments_is_refused() -> None:
    @tool
    def stamp(text: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
        """Stamp a text with the call's id."""
        return f"{text} {tool_call_id}"

    with pytest.raises(TypeError, match=r"injected arguments \(tool_call_id\) are not supported"):
        human_review(stamp)
