"""validate_history and repair_history: every tool call answered by exactly one result."""

from __future__ import annotations

import pytest

from threadline.errors import InvalidChatHistoryError
from threadline.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from threadline.prebuilt import repair_history, validate_history


def ask(*call_ids: str, id: str = "ai-1") -> AIMessage:
    calls = [{"name": "refund", "args": {"amount": 5}, "id": c} for c in call_ids]
    return AIMessage(content="", tool_calls=calls, id=id)


def result(call_id: str, content: str = "done", id: str | None = None) -> ToolMessage:
    return ToolMessage(content, tool_call_id=call_id, name="refund", id=id or f"r-{call_id}")


def kinds(messages: list) -> list[tuple[str, str, int]]:
    return [(p.kind, p.tool_call_id, p.index) for p in validate_history(messages)]


def test_a_valid_history_has_no_problems_and_is_left_as_it_is() -> None:
    history = [
        SystemMessage("be kind", id="s"),
        HumanMessage("refund me", id="h"),
        ask("c1", "c2"),
        result("c2"),
        result("c1"),
        AIMessage("done", id="ai-2"),
    ]
    assert validate_history(history) == []
    assert repair_history(history) == history


def test_each_kind_of_problem_is_found_with_the_message_concerned() -> None:
    history = [
        HumanMessage("hi", id="h"),
        ask("c1", "c2", "c3"),
        result("c1"),
        result("c1", id="again"),
        HumanMessage("hello?", id="h2"),
        result("c3"),
        result("nobody-called-me"),
    ]
    assert kinds(history) == [
        ("missing_result", "c2", 1),
        ("duplicate_result", "c1", 3),
        ("misplaced_result", "c3", 5),
        ("stray_result", "nobody-called-me", 6),
    ]


def test_raise_error_lists_the_problems_as_a_value_error() -> None:
    with pytest.raises(InvalidChatHistoryError) as caught:
        validate_history([HumanMessage("hi"), ask("c1")], raise_error=True)
    assert isinstance(caught.value, ValueError)
    assert "tool call 'c1' (message 1) has no result" in str(caught.value)
    assert [p.kind for p in caught.value.problems] == ["missing_result"]


def test_repair_fills_an_orphaned_call_right_after_it_and_says_why() -> None:
    history = [HumanMessage("refund", id="h"), ask("c1"), HumanMessage("never mind", id="h2")]
    repaired = repair_history(history, reason="the person changed the subject")
    assert [m.id for m in repaired] == ["h", "ai-1", "not-executed-ai-1-c1", "h2"]
    filler = repaired[2]
    assert isinstance(filler, ToolMessage)
    assert filler.tool_call_id == "c1" and filler.status == "error" and filler.name == "refund"
    assert filler.content == (
        "Tool call 'refund' (id c1) was not executed: the person changed the subject."
    )
    assert validate_history(repaired) == []


def test_repair_moves_misplaced_results_and_drops_duplicates_and_strays() -> None:
    history = [
        ask("c1", "c2", "c3"),
        result("c1"),
        result("c1", id="again"),
        HumanMessage("hello?", id="h2"),
        result("c3"),
        result("stray"),
    ]
    repaired = repair_history(history)
    assert [m.id for m in repaired] == ["ai-1", "r-c1", "r-c3", "not-executed-ai-1-c2", "h2"]
    assert validate_history(repaired) == []


def test_repair_accepts_message_likes_and_keeps_the_input_list_untouched() -> None:
    history = [("user", "hi"), ask("c1")]
    repaired = repair_history(history)
    assert len(history) == 2
    assert [type(m).__name__ for m in repaired] == ["HumanMessage", "AIMessage", "ToolMessage"]


def test_a_str_is_not_a_history() -> None:
    with pytest.raises(TypeError, match="list of messages"):
        validate_history("hello")


def test_two_turns_may_reuse_a_call_id() -> None:
    history = [
        ask("call_0"),
        result("call_0", id="r1"),
        ask("call_0", id="ai-2"),
        result("call_0", id="r2"),
    ]
    assert validate_history(history) == []
    orphan = history[:3]
    assert kinds(orphan) == [("missing_result", "call_0", 2)]
    assert [m.id for m in repair_history(orphan)] == [
        "ai-1",
        "r1",
        "ai-2",
        "not-executed-ai-2-call_0",
    ]
