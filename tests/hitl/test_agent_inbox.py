"""Reviews asked in Agent Inbox's shape (``shape="agent-inbox"``) and answered in its words."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typing_extensions

from threadline import END, START, Command, StateGraph
from threadline.checkpoint import SqliteSaver
from threadline.errors import InvalidAnswerError
from threadline.hitl import human_review


class State(typing_extensions.TypedDict, total=False):
    order: str
    result: Any


def cfg() -> dict[str, Any]:
    return {"configurable": {"thread_id": "inbox"}}


def refunded() -> tuple[list[tuple[str, float]], Any]:
    done: list[tuple[str, float]] = []

    def refund(order: str, amount: float) -> str:
        """Refund part of an order."""
        done.append((order, amount))
        return f"refunded {amount} on {order}"

    return done, refund


def graph_of(reviewed: Any, tmp_path: Path) -> Any:
    g = StateGraph(State)
    g.add_node("pay", lambda s: {"result": reviewed(order=s["order"], amount=30)})
    g.add_edge(START, "pay")
    g.add_edge("pay", END)
    return g.compile(checkpointer=SqliteSaver(str(tmp_path / "inbox.db")))


@pytest.fixture
def paused(tmp_path: Path) -> tuple[list[tuple[str, float]], Any, Any]:
    done, refund = refunded()
    reviewed = human_review(
        refund, allowed=["accept", "edit", "reject"], description="Moves money", shape="agent-inbox"
    )
    graph = graph_of(reviewed, tmp_path)
    (asked,) = graph.invoke({"order": "A1"}, cfg())["__interrupt__"]
    return done, graph, asked


def test_the_request_is_a_list_of_human_interrupts(paused: Any) -> None:
    _, _, asked = paused
    (request,) = asked.value
    assert request["action_request"] == {"action": "refund", "args": {"order": "A1", "amount": 30}}
    assert request["description"] == "Moves money"
    switches = {k: v for k, v in request["config"].items() if k.startswith("allow_")}
    assert switches == {
        "allow_accept": True,
        "allow_edit": True,
        "allow_respond": False,
        "allow_ignore": True,
    }


def test_agent_inbox_answers_are_read(paused: Any) -> None:
    done, graph, _ = paused
    edit = {"type": "edit", "args": {"action": "refund", "args": {"order": "A1", "amount": 5}}}
    out = graph.invoke(Command(resume=[edit]), cfg())
    assert out["result"] == "refunded 5 on A1" and done == [("A1", 5)]


def test_ignore_does_not_run_the_tool(paused: Any) -> None:
    done, graph, _ = paused
    out = graph.invoke(Command(resume=[{"type": "ignore", "args": None}]), cfg())
    assert "rejected" in out["result"] and done == []


def test_a_decision_the_request_does_not_allow_is_refused(paused: Any) -> None:
    done, graph, _ = paused
    with pytest.raises(InvalidAnswerError, match="respond"):
        graph.invoke(Command(resume=[{"type": "response", "args": "no"}]), cfg())
    assert done == [] and graph.get_state(cfg()).next == ("pay",)


def test_an_unknown_shape_is_refused() -> None:
    with pytest.raises(ValueError, match="agent-inbox"):
        human_review(refunded()[1], shape="inbox")  # type: ignore[arg-type]
