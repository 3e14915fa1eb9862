"""create_agent(review=...): one interrupt for a turn's reviewed calls; accept, edit, respond
and reject; rejected and answered calls never run; resumed by a fresh agent on the same file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from threadline import Command
from threadline.checkpoint import SqliteSaver
from threadline.errors import GraphValidationError, InvalidAnswerError
from threadline.models import ScriptedChatModel
from threadline.prebuilt import create_agent, validate_history

CONFIG = {"configurable": {"thread_id": "ticket-7"}}
REFUNDS: list[dict[str, Any]] = []


def refund(order: str, amount: float) -> str:
    """Refund an order."""
    REFUNDS.append({"order": order, "amount": amount})
    return f"refunded {amount:.2f} on {order}"


def lookup(order: str) -> str:
    """Look an order up."""
    return f"{order}: delivered damaged"


@pytest.fixture(autouse=True)
def no_refunds_yet() -> Iterator[None]:
    REFUNDS.clear()
    yield
    REFUNDS.clear()


def script(*calls: tuple[str, dict]) -> ScriptedChatModel:
    first = {"content": "", "tool_calls": [{"name": n, "args": a} for n, a in calls]}
    return ScriptedChatModel([first, "All done."])


def agent_on(db: Path, model: ScriptedChatModel, saver: SqliteSaver) -> Any:
    return create_agent(
        model, [refund, lookup], checkpointer=saver, review={"refund": True}, name="support"
    )


def start(db: Path, *calls: tuple[str, dict]) -> dict[str, Any]:
    with SqliteSaver(db) as saver:
        agent = agent_on(db, script(*calls), saver)
        return agent.invoke({"messages": [("user", "my parcel arrived broken")]}, CONFIG)


def resume(db: Path, *decisions: dict[str, Any]) -> dict[str, Any]:
    """A fresh agent and saver on the same file answer, as another process would."""
    with SqliteSaver(db) as saver:
        agent = agent_on(db, ScriptedChatModel(["All done."]), saver)
        result = agent.invoke(Command(resume={"decisions": list(decisions)}), CONFIG)
        assert validate_history(result["messages"]) == []
        return result


def tool_results(result: dict[str, Any]) -> dict[str, Any]:
    return {m.name: m for m in result["messages"] if m.type == "tool"}


def test_one_interrupt_asks_about_every_reviewed_call_of_the_turn(tmp_path: Path) -> None:
    first = start(
        tmp_path / "a.db",
        ("refund", {"order": "A1", "amount": 30}),
        ("lookup", {"order": "A1"}),
        ("refund", {"order": "B2", "amount": 5}),
    )
    (pending,) = first["__interrupt__"]
    requests = pending.value["action_requests"]
    assert [(r["name"], r["args"]) for r in requests] == [
        ("refund", {"order": "A1", "amount": 30}),
        ("refund", {"order": "B2", "amount": 5}),
    ]
    assert pending.value["review_configs"][0]["allowed_decisions"] == [
        "accept",
        "edit",
        "respond",
        "reject",
    ]
    assert REFUNDS == [] and [m.type for m in first["messages"]] == ["human", "ai"]

    done = resume(tmp_path / "a.db", {"type": "accept"}, {"type": "reject", "message": "too small"})
    assert REFUNDS == [{"order": "A1", "amount": 30.0}]
    results = [m for m in done["messages"] if m.type == "tool"]
    assert [m.content for m in results] == [
        "User rejected the tool call for `refund` with reason: too small",
        "refunded 30.00 on A1",
        "A1: delivered damaged",
    ]
    assert done["messages"][-1].content == "All done."


def test_accept_runs_the_call_as_asked(tmp_path: Path) -> None:
    start(tmp_path / "a.db", ("refund", {"order": "A1", "amount": 30}))
    done = resume(tmp_path / "a.db", {"type": "accept"})
    assert REFUNDS == [{"order": "A1", "amount": 30.0}]
    assert tool_results(done)["refund"].content == "refunded 30.00 on A1"


def test_edit_runs_it_with_the_edited_arguments_and_the_history_shows_them(
    tmp_path: Path,
) -> None:
    start(tmp_path / "a.db", ("refund", {"order": "A1", "amount": 30}))
    done = resume(tmp_path / "a.db", {"type": "edit", "args": {"order": "A1", "amount": 5}})
    assert REFUNDS == [{"order": "A1", "amount": 5.0}]
    ai = done["messages"][1]
    assert ai.tool_calls[0]["args"] == {"order": "A1", "amount": 5}
    assert tool_results(done)["refund"].tool_call_id == ai.tool_calls[0]["id"]


def test_an_edit_with_an_argument_the_tool_does_not_have_is_refused(tmp_path: Path) -> None:
    """As ``human_review`` refuses it; ``{"bogus": 1}`` used to be stored and sent on."""
    start(tmp_path / "a.db", ("refund", {"order": "A1", "amount": 30}))
    edit = {"type": "edit", "args": {"order": "A1", "amount": 5, "bogus": 1}}
    with pytest.raises(InvalidAnswerError, match="bogus"):
        resume(tmp_path / "a.db", edit)
    assert REFUNDS == []


def test_respond_answers_the_call_without_running_it(tmp_path: Path) -> None:
    start(tmp_path / "a.db", ("refund", {"order": "A1", "amount": 30}))
    done = resume(tmp_path / "a.db", {"type": "respond", "message": "Send a photo first."})
    assert REFUNDS == []
    answer = tool_results(done)["refund"]
    assert answer.content == "Send a photo first." and answer.status == "success"


def test_reject_answers_the_call_with_a_rejection_and_the_model_goes_on(tmp_path: Path) -> None:
    start(tmp_path / "a.db", ("refund", {"order": "A1", "amount": 30}))
    done = resume(tmp_path / "a.db", {"type": "reject"})
    assert REFUNDS == []
    rejection = tool_results(done)["refund"]
    assert rejection.status == "error"
    assert rejection.content == (
        f"User rejected the tool call for `refund` with id {rejection.tool_call_id}. The tool "
        "was not executed. Do not retry this tool call unless the user explicitly requests it."
    )
    assert done["messages"][-1].content == "All done."


def test_calls_without_review_run_at_once(tmp_path: Path) -> None:
    with SqliteSaver(tmp_path / "a.db") as saver:
        model = ScriptedChatModel(
            [{"content": "", "tool_calls": [{"name": "lookup", "args": {"order": "Z"}}]}, "ok"]
        )
        agent = agent_on(tmp_path / "a.db", model, saver)
        updates = list(agent.stream({"messages": [("user", "status?")]}, CONFIG))
    assert [next(iter(u)) for u in updates] == ["model", "tools", "model"]


def test_review_must_name_known_tools_and_decisions() -> None:
    model = ScriptedChatModel([])
    with pytest.raises(GraphValidationError, match="not among the agent's tools"):
        create_agent(model, [lookup], review={"refund": True})
    with pytest.raises(GraphValidationError, match="list of decisions"):
        create_agent(model, [refund], review={"refund": ["approve"]})
    with pytest.raises(GraphValidationError, match="list of decisions"):
        create_agent(model, [refund], review={"refund": "accept"})


def test_a_later_turn_reusing_a_call_id_is_reviewed_and_run_on_its_own(tmp_path: Path) -> None:
    same = [{"name": "refund", "args": {"order": "A1", "amount": 30}, "id": "call_0"}]
    ask = {"content": "", "tool_calls": same}
    model = ScriptedChatModel([ask, "No refund.", ask, "Refunded."])
    with SqliteSaver(tmp_path / "a.db") as saver:
        agent = agent_on(tmp_path / "a.db", model, saver)
        agent.invoke({"messages": [("user", "refund")]}, CONFIG)
        agent.invoke(Command(resume={"decisions": [{"type": "reject"}]}), CONFIG)
        agent.invoke({"messages": [("user", "please, really")]}, CONFIG)
        done = agent.invoke(Command(resume={"decisions": [{"type": "accept"}]}), CONFIG)
    assert REFUNDS == [{"order": "A1", "amount": 30.0}]
    assert [m.type for m in done["messages"]] == [
        "human",
        "ai",
        "tool",
        "ai",
        "human",
        "ai",
        "tool",
        "ai",
    ]
    assert validate_history(done["messages"]) == []
