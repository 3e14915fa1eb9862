"""A chat history a provider accepts: every tool call answered by exactly one tool result.

Chat APIs refuse (HTTP 400) a conversation in which an assistant's tool call has no result
right after it, a result has no call, or a call has two results. Such histories arise when a
run stops between the model's tool call and the tool's result (a crash, a cancellation, an
interrupt answered with new input) or when results are edited by hand. ``validate_history``
finds the problems; ``repair_history`` fixes them, filling each unanswered call with an explicit
"not executed" result that says why, so the model is never told a tool ran when it did not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from threadline.errors import InvalidChatHistoryError
from threadline.messages import (
    AIMessage,
    BaseMessage,
    RemoveMessage,
    ToolMessage,
    convert_to_messages,
)
from threadline.messages.reducer import REMOVE_ALL_MESSAGES

ProblemKind = Literal["missing_result", "misplaced_result", "duplicate_result", "stray_result"]

NOT_EXECUTED_REASON = (
    "the run stopped before the tool returned a result (it was interrupted and the "
    "conversation went on, cancelled, or the process died)"
)


@dataclass(frozen=True, slots=True)
class HistoryProblem:
    """One reason a provider would refuse the history.

    ``index`` is the position of the message concerned: the assistant message for a
    ``missing_result``, the tool message otherwise.
    """

    kind: ProblemKind
    tool_call_id: str
    index: int

    def __str__(self) -> str:
        return {
            "missing_result": f"tool call {self.tool_call_id!r} (message {self.index}) has no "
            "result",
            "misplaced_result": f"the result of tool call {self.tool_call_id!r} (message "
            f"{self.index}) does not directly follow its call",
            "duplicate_result": f"tool call {self.tool_call_id!r} has a second result (message "
            f"{self.index})",
            "stray_result": f"tool result {self.index} answers {self.tool_call_id!r}, which no "
            "assistant message called",
        }[self.kind]


def validate_history(messages: Sequence[Any], *, raise_error: bool = False) -> list[HistoryProblem]:
    """The problems a chat provider would refuse ``messages`` for; an empty list if none.

    With ``raise_error=True``, problems raise ``InvalidChatHistoryError`` (a ``ValueError``)
    listing them, as LangGraph's agent does before calling its model.
    """
    problems = _Layout(_as_messages(messages)).problems()
    if problems and raise_error:
        shown = "; ".join(str(p) for p in problems[:5])
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise InvalidChatHistoryError(
            f"invalid chat history: {shown}{more}. Every tool call must be answered by exactly "
            "one ToolMessage right after its AIMessage; repair_history() fixes it.",
            tuple(problems),
        )
    return problems


def repair_history(
    messages: Sequence[Any], *, reason: str = NOT_EXECUTED_REASON
) -> list[BaseMessage]:
    """``messages`` made valid for a provider; the same messages if they already are.

    Each unanswered tool call gets a ``ToolMessage`` (status ``error``) right after its call,
    saying the tool was not executed and ``reason``. A result that does not follow its call is
    moved there; a second result of a call, and a result of no call, are dropped.
    """
    listed = _as_messages(messages)
    layout = _Layout(listed)
    if not layout.problems():
        return listed
    kept = layout.kept_results()
    repaired: list[BaseMessage] = []
    for message in listed:
        if isinstance(message, ToolMessage):
            continue  # placed after its call below, or dropped
        repaired.append(message)
        calls = _calls(message)
        answered = sorted(kept[c["id"]] for c in calls if c["id"] in kept)
        repaired.extend(listed[at] for at in answered)
        repaired.extend(not_executed(c, reason) for c in calls if c["id"] not in kept)
    return repaired


def not_executed(call: dict[str, Any], reason: str) -> ToolMessage:
    """The result of a tool call that did not run. Its id derives from the call's, so making
    it again (a node that runs again) replaces rather than duplicates it."""
    return ToolMessage(
        content=f"Tool call {call['name']!r} (id {call['id']}) was not executed: {reason}.",
        name=call["name"],
        tool_call_id=call["id"],
        status="error",
        id=f"not-executed-{call['id']}",
    )


def history_update(before: Sequence[BaseMessage], after: list[BaseMessage]) -> list[Any]:
    """The ``add_messages`` update that turns ``before`` into ``after``: the new messages when
    ``after`` only appends to ``before``, else a rewrite of the whole list."""
    if len(after) >= len(before) and all(a.id == b.id for a, b in zip(after, before, strict=False)):
        return after[len(before) :]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *after]


class _Layout:
    """Where each tool call and each tool result sits in one history."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = messages
        self.results: dict[str, list[int]] = {}  # call id -> positions of its results
        self.block: dict[int, int | None] = {}  # result position -> the call message it follows
        self.calls: list[tuple[int, str]] = []  # (position of the assistant message, call id)
        current: int | None = None
        for index, message in enumerate(messages):
            if isinstance(message, ToolMessage):
                self.results.setdefault(message.tool_call_id, []).append(index)
                self.block[index] = current
                continue
            calls = _calls(message)
            current = index if calls else None
            self.calls.extend((index, call["id"]) for call in calls)

    def problems(self) -> list[HistoryProblem]:
        found: list[HistoryProblem] = []
        called = {call_id for _, call_id in self.calls}
        for at, call_id in self.calls:
            positions = self.results.get(call_id, [])
            if not positions:
                found.append(HistoryProblem("missing_result", call_id, at))
                continue
            kept = self._kept(at, positions)
            if self.block[kept] != at:
                found.append(HistoryProblem("misplaced_result", call_id, kept))
            found.extend(
                HistoryProblem("duplicate_result", call_id, p) for p in positions if p != kept
            )
        for call_id, positions in self.results.items():
            if call_id not in called:
                found.extend(HistoryProblem("stray_result", call_id, p) for p in positions)
        return sorted(found, key=lambda p: p.index)

    def kept_results(self) -> dict[str, int]:
        """The one result kept for each answered call: the first in its block, else the first."""
        kept: dict[str, int] = {}
        for at, call_id in self.calls:
            positions = self.results.get(call_id)
            if positions and call_id not in kept:
                kept[call_id] = self._kept(at, positions)
        return kept

    def _kept(self, at: int, positions: list[int]) -> int:
        return next((p for p in positions if self.block[p] == at), positions[0])


def _calls(message: BaseMessage) -> list[dict[str, Any]]:
    return list(message.tool_calls) if isinstance(message, AIMessage) else []


def _as_messages(messages: Sequence[Any]) -> list[BaseMessage]:
    if isinstance(messages, str | BaseMessage) or not isinstance(messages, Sequence):
        raise TypeError(f"expected a list of messages, got {type(messages).__name__}")
    if all(isinstance(m, BaseMessage) for m in messages):
        return list(messages)
    return list(convert_to_messages(list(messages)))
