"""A tool's body runs at most once per call, even when the node running it runs again: after
an interrupt in a sibling call, and in an agent resumed after review."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from threadline import END, START, Command, StateGraph, interrupt
from threadline.checkpoint import SqliteSaver
from threadline.messages import AIMessage, MessagesState
from threadline.models import ScriptedChatModel
from threadline.prebuilt import ToolNode, create_react_agent, validate_history

CONFIG = {"configurable": {"thread_id": "once"}}
RAN: list[str] = []


def refund(order: str) -> str:
    """Refund an order (a side effect)."""
    RAN.append(order)
    return f"refunded {order}"


def confirm(question: str) -> str:
    """Ask the person."""
    return f"person said {interrupt(question)}"


def calls(*pairs: tuple[str, dict]) -> list[dict[str, Any]]:
    return [{"name": n, "args": a, "id": f"c{i}"} for i, (n, a) in enumerate(pairs)]


def test_a_sibling_interrupt_does_not_run_a_finished_tool_again(tmp_path: Path) -> None:
    RAN.clear()

    def model(state: MessagesState) -> dict:
        asks = calls(("refund", {"order": "A1"}), ("confirm", {"question": "ok?"}))
        return {"messages": [AIMessage(content="", tool_calls=asks)]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([refund, confirm]))  # both calls in one task
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    with SqliteSaver(tmp_path / "once.db") as saver:
        app = graph.compile(checkpointer=saver)
        first = app.invoke({"messages": [("user", "go")]}, CONFIG)
        assert first["__interrupt__"][0].value == "ok?"
        assert RAN == ["A1"]
    with SqliteSaver(tmp_path / "once.db") as saver:  # another process, as far as it knows
        app = graph.compile(checkpointer=saver)
        done = app.invoke(Command(resume="yes"), CONFIG)
    assert RAN == ["A1"]  # the node ran again; the refund did not
    assert [m.content for m in done["messages"][2:]] == ["refunded A1", "person said yes"]
    assert validate_history(done["messages"]) == []


def test_turns_that_reuse_a_call_id_keep_their_own_results(tmp_path: Path) -> None:
    same_id = [{"name": "confirm", "args": {"question": "?"}, "id": "call_0"}]
    model = ScriptedChatModel(
        [{"content": "", "tool_calls": same_id}, {"content": "", "tool_calls": same_id}, "done"]
    )
    with SqliteSaver(tmp_path / "two.db") as saver:
        agent = create_react_agent(model, [confirm, refund], checkpointer=saver)
        agent.invoke({"messages": [("user", "go")]}, CONFIG)
        agent.invoke(Command(resume="yes"), CONFIG)
        done = agent.invoke(Command(resume="no"), CONFIG)
    assert [m.content for m in done["messages"] if m.type == "tool"] == [
        "person said yes",
        "person said no",
    ]
    assert validate_history(done["messages"]) == []


def test_a_human_review_tool_in_the_react_agent_runs_once_after_accept(tmp_path: Path) -> None:
    from threadline.hitl import human_review

    RAN.clear()
    model = ScriptedChatModel(
        [
            {
                "content": "",
                "tool_calls": calls(("refund", {"order": "A1"}), ("confirm", {"question": "?"})),
            },
            "done",
        ]
    )
    with SqliteSaver(tmp_path / "hr.db") as saver:
        agent = create_react_agent(
            model, [human_review(refund), confirm], checkpointer=saver, version="v1"
        )
        first = agent.invoke({"messages": [("user", "go")]}, CONFIG)
        review, question = first["__interrupt__"]  # both calls of the turn stopped
        assert review.value["action_requests"][0]["args"] == {"order": "A1"}
        done = agent.invoke(
            Command(resume={review.id: {"decisions": [{"type": "accept"}]}, question.id: "ok"}),
            CONFIG,
        )
    assert RAN == ["A1"]
    assert [m.content for m in done["messages"] if m.type == "tool"] == [
        "refunded A1",
        "person said ok",
    ]
