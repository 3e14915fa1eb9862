"""A chat history a provider accepts: every tool call answered by exactly one tool result.

Chat APIs refuse (HTTP 400) a conversation in which an assistant's tool call has no result
right after it, a result has no call, or a call has two results. Such histories arise when a
run stops between the model's tool call and the tool's result (a crash, a cancellation, an
interrupt answered with new input) or when results are edited by hand. ``validate_history``
finds the problems; ``repair_history`` fixes them, filling each unanswered call with an explicit
"not executed" result that says why, so the model is never told a tool ran when it did not.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    problems = _Layout(_as_messages(messages)).problems
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
    if not layout.problems:
        return listed
    repaired: list[BaseMessage] = []
    for at, message in enumerate(listed):
        if isinstance(message, ToolMessage):
            continue  # placed after its call below, or dropped
        repaired.append(message)
        calls = _calls(message)
        kept = {c["id"]: layout.kept[(at, c["id"])] for c in calls if (at, c["id"]) in layout.kept}
        repaired.extend(listed[p] for p in sorted(kept.values()))
        repaired.extend(not_executed(c, reason, message.id) for c in calls if c["id"] not in kept)
    return repaired


def not_executed(call: Mapping[str, Any], reason: str, asked_in: str | None = None) -> ToolMessage:
    """The result of a tool call that did not run. Its id derives from the call's and from the
    id of the assistant message ``asked_in``, so making it again (a node that runs again)
    replaces rather than duplicates it."""
    return ToolMessage(
        content=f"Tool call {call['name']!r} (id {call['id']}) was not executed: {reason}.",
        name=call["name"],
        tool_call_id=call["id"],
        status="error",
        id=f"not-executed-{asked_in}-{call['id']}" if asked_in else f"not-executed-{call['id']}",
    )


def history_update(before: Sequence[BaseMessage], after: list[BaseMessage]) -> list[Any]:
    """The ``add_messages`` update that turns ``before`` into ``after``: the new messages when
    ``after`` only appends to ``before``, else a rewrite of the whole list."""
    if len(after) >= len(before) and all(a.id == b.id for a, b in zip(after, before, strict=False)):
        return after[len(before) :]
    return [RemoveMessage(id=REMOVE_ALL_MESSAGES), *after]


class _Layout:
    """Which result answers which call of which assistant message, and what is wrong.

    A call is answered by a result with its id among the tool messages right after its
    assistant message; failing that, by one elsewhere (misplaced). Ids are matched per
    assistant message, so two turns may reuse a call id (some servers number their calls).
    """

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.kept: dict[tuple[int, str], int] = {}  # (assistant position, call id) -> result
        self.problems: list[HistoryProblem] = []
        calls: list[tuple[int, str]] = []
        call_keys: set[tuple[int, str]] = set()
        # (position, call id) of results not answering a call of the message they follow
        loose: list[tuple[int, str]] = []
        owner: int | None = None
        for at, message in enumerate(messages):
            if not isinstance(message, ToolMessage):
                ids = [c["id"] for c in _calls(message)]
                calls.extend((at, call_id) for call_id in ids)
                call_keys.update((at, call_id) for call_id in ids)
                owner = at if ids else None
                continue
            key = (owner, message.tool_call_id) if owner is not None else None
            if key is not None and key in call_keys and key not in self.kept:
                self.kept[key] = at
            else:
                loose.append((at, message.tool_call_id))
        missing = [key for key in calls if key not in self.kept]
        called = {call_id for _, call_id in calls}
        for at, call_id in loose:
            self.problems.append(self._placed(call_id, at, missing, called))
        self.problems.extend(HistoryProblem("missing_result", c, a) for a, c in missing)
        self.problems.sort(key=lambda p: p.index)

    def _placed(
        self, call_id: str, at: int, missing: list[tuple[int, str]], called: set[str]
    ) -> HistoryProblem:
        """What a result outside its call's tool messages is: the misplaced answer of an
        unanswered call with its id (the nearest before it), a duplicate, or a stray."""
        waiting = [key for key in missing if key[1] == call_id]
        if waiting:
            before = [key for key in waiting if key[0] < at]
            key = before[-1] if before else waiting[0]
            missing.remove(key)
            self.kept[key] = at
            return HistoryProblem("misplaced_result", call_id, at)
        return HistoryProblem(
            "duplicate_result" if call_id in called else "stray_result", call_id, at
        )


def _calls(message: BaseMessage) -> list[Mapping[str, Any]]:
    return list(message.tool_calls) if isinstance(message, AIMessage) else []


def _as_messages(messages: Sequence[Any]) -> list[BaseMessage]:
    if isinstance(messages, str | BaseMessage) or not isinstance(messages, Sequence):
        raise TypeError(f"expected a list of messages, got {type(messages).__name__}")
    if all(isinstance(m, BaseMessage) for m in messages):
        return list(messages)
    return list(convert_to_messages(list(messages)))
