"""``ToolNode`` and ``tools_condition``: run the tool calls of the last assistant message, as
LangGraph's prebuilt names do.

Every call gets exactly one ``ToolMessage``: the tool's result, or an error message (status
``error``) when the model named an unknown tool or, by ``handle_tool_errors``, when the tool
failed. Several calls run concurrently. Each call goes through ``ToolNode.execute``, the one
place a tool body runs: inside a graph node it runs as a ``@task`` (``threadline.func``), so its
result is saved as soon as it returns, and a node that runs again (resumed after an interrupt
in another call, or after a crash) gets the saved result back instead of running the tool
again.
"""

from __future__ import annotations

import asyncio
import contextvars
import inspect
import json
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

from threadline.constants import END
from threadline.errors import GraphInterrupt, NotSupportedError, ToolInvocationError
from threadline.func import task
from threadline.messages import AIMessage, ToolMessage
from threadline.prebuilt.injection import InjectedState, InjectedStore, ToolRuntime
from threadline.prebuilt.tools import AnyTool, as_tool
from threadline.runtime.context import current_task
from threadline.store.base import BaseStore
from threadline.types import Command

INVALID_TOOL_NAME_ERROR_TEMPLATE = (
    "Error: {requested_tool} is not a valid tool, try one of [{available_tools}]."
)
TOOL_CALL_ERROR_TEMPLATE = "Error: {error}\n Please fix your mistakes."
# Content block types a tool may return as they are (langchain-core's list).
_BLOCK_TYPES = (
    "text",
    "image_url",
    "image",
    "json",
    "search_result",
    "custom_tool_call_output",
    "document",
    "file",
)

# LangGraph's ``langgraph.prebuilt.tool_node`` holds these names too.
__all__ = [
    "InjectedState",
    "InjectedStore",
    "ToolNode",
    "ToolRuntime",
    "tools_condition",
]

ErrorHandling = bool | str | Callable[..., str] | type[Exception] | tuple[type[Exception], ...]
InputKind = Literal["list", "dict", "tool_calls"]


def default_handle_tool_errors(e: Exception) -> str:
    """LangGraph's default: the model's bad arguments go back to it; the tool's own errors
    are raised."""
    if isinstance(e, ToolInvocationError):
        return e.message
    raise e


class ToolNode:
    """A graph node that runs the tool calls of the last ``AIMessage`` in its input.

    The input is the state (a dict or object with ``messages_key``), a list of messages, a list
    of tool calls, or one call sent by ``Send`` (``{"__type": "tool_call_with_context",
    "tool_call": ..., "state": ...}``, as ``create_react_agent`` sends). The output is
    ``{messages_key: [ToolMessage, ...]}``, or a list of messages for a list of messages.

    ``handle_tool_errors``: ``True`` turns any exception into an error message, a str is the
    message to send, an exception type or tuple of types limits which are caught, a callable
    makes the message (it catches the types its first parameter is annotated with), ``False``
    raises. By default only bad arguments are sent back to the model.
    """

    def __init__(
        self,
        tools: Sequence[Any],
        *,
        name: str = "tools",
        tags: list[str] | None = None,
        handle_tool_errors: ErrorHandling = default_handle_tool_errors,
        messages_key: str = "messages",
        wrap_tool_call: Any = None,
        awrap_tool_call: Any = None,
    ) -> None:
        if wrap_tool_call is not None or awrap_tool_call is not None:
            raise NotSupportedError(
                "ToolNode(wrap_tool_call=..., awrap_tool_call=...) is not supported; wrap the "
                "tool functions themselves"
            )
        if tags:
            raise NotSupportedError("ToolNode(tags=...) is not supported (there is no tracing)")
        self.name = name
        self.tools_by_name: dict[str, Any] = {}
        self._tools: dict[str, AnyTool] = {}
        for tool in tools:
            runnable = as_tool(tool)
            self._tools[runnable.name] = runnable
            self.tools_by_name[runnable.name] = tool
        self.messages_key = messages_key
        self.handle_tool_errors = handle_tool_errors
        self._handled = handled_types(handle_tool_errors)
        # In a node, each call of a tool is a call of this task: its result is saved once.
        self._tasks = {name: task(name=name)(self.execute) for name in self._tools}

    # ------------------------------------------------------------------ running
    def __call__(self, input: Any) -> Any:
        return self.invoke(input)

    def invoke(self, input: Any) -> Any:
        """Run the input's tool calls (concurrently when there are several)."""
        calls, kind, state = self._parse(input)
        ctx = current_task()
        if ctx is not None:
            messages = self._run_as_tasks(calls, state, ctx.store)
        elif len(calls) == 1:
            messages = [self.execute(calls[0], state, None)]
        else:
            messages = _in_threads([(self.execute, (c, state, None)) for c in calls])
        return self._output(messages, kind)

    async def ainvoke(self, input: Any) -> Any:
        calls, kind, state = self._parse(input)
        ctx = current_task()
        store = ctx.store if ctx is not None else None
        done = await asyncio.gather(
            *(self.aexecute(c, state, store) for c in calls), return_exceptions=True
        )
        return self._output(_raise_first(done), kind)

    def _run_as_tasks(
        self, calls: list[Mapping[str, Any]], state: Any, store: BaseStore | None
    ) -> list[Any]:
        """Each call as a ``@task`` call, all started at once: a saved result comes back at
        once, the others run concurrently and are saved as each finishes."""
        started = [
            self._tasks[c["name"]](c, state, store) if c["name"] in self._tasks else c
            for c in calls
        ]
        done: list[Any] = []
        for item in started:
            if isinstance(item, Mapping):  # an unknown tool: its error message, nothing runs
                done.append(self._unknown(item))
                continue
            try:
                done.append(item.result())
            except BaseException as exc:  # an interrupt too: raised once all have finished
                done.append(exc)
        return _raise_first(done)

    def execute(self, call: Mapping[str, Any], state: Any, store: BaseStore | None) -> ToolMessage:
        """One tool call's result message; the tool body runs here and nowhere else."""
        tool = self._tools.get(call["name"])
        if tool is None:
            return self._unknown(call)
        injected = tool.injections.values(call, state, store)
        try:
            output = tool.run(call, injected)
        except Exception as exc:
            return self._failed(call, exc)
        return self._message(call, output)

    async def aexecute(
        self, call: Mapping[str, Any], state: Any, store: BaseStore | None
    ) -> ToolMessage:
        tool = self._tools.get(call["name"])
        if tool is None:
            return self._unknown(call)
        injected = tool.injections.values(call, state, store)
        try:
            output = await tool.arun(call, injected)
        except Exception as exc:
            return self._failed(call, exc)
        return self._message(call, output)

    # ------------------------------------------------------------------ messages
    def _unknown(self, call: Mapping[str, Any]) -> ToolMessage:
        content = INVALID_TOOL_NAME_ERROR_TEMPLATE.format(
            requested_tool=call["name"], available_tools=", ".join(self._tools)
        )
        return ToolMessage(content, name=call["name"], tool_call_id=call["id"], status="error")

    def _failed(self, call: Mapping[str, Any], exc: Exception) -> ToolMessage:
        flag = self.handle_tool_errors
        if not flag or not isinstance(exc, self._handled):
            raise exc
        if isinstance(flag, str):
            content = flag
        elif callable(flag) and not isinstance(flag, type):
            content = flag(exc)
        else:
            content = TOOL_CALL_ERROR_TEMPLATE.format(error=repr(exc))
        return ToolMessage(content, name=call["name"], tool_call_id=call["id"], status="error")

    def _message(self, call: Mapping[str, Any], output: Any) -> ToolMessage:
        if isinstance(output, Command):
            raise NotSupportedError(
                f"tool {call['name']!r} returned a Command; tools returning Command are not "
                "supported yet: return the result, or update the state from a node"
            )
        if isinstance(output, ToolMessage):
            output.content = content_of(output.content)
            return output
        return ToolMessage(content_of(output), name=call["name"], tool_call_id=call["id"])

    # ------------------------------------------------------------------ input and output
    def _parse(self, input: Any) -> tuple[list[Mapping[str, Any]], InputKind, Any]:
        """The calls to run, the input's kind, and the state tools may have injected."""
        key = self.messages_key
        kind: InputKind
        if isinstance(input, list):
            if input and isinstance(input[-1], dict) and input[-1].get("type") == "tool_call":
                return list(input), "tool_calls", {key: []}
            messages, kind, state = input, "list", {key: input}
        elif isinstance(input, dict) and input.get("__type") == "tool_call_with_context":
            return [input["tool_call"]], "tool_calls", input.get("state")
        elif isinstance(input, dict) and input.get(key):
            messages, kind, state = input[key], "dict", input
        elif getattr(input, key, None):
            messages, kind, state = getattr(input, key), "dict", input
        else:
            raise ValueError("No message found in input")
        last = next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)
        if last is None:
            raise ValueError("No AIMessage found in input")
        return list(last.tool_calls), kind, state

    def _output(self, messages: list[ToolMessage], kind: InputKind) -> Any:
        return messages if kind == "list" else {self.messages_key: messages}


def tools_condition(state: Any, messages_key: str = "messages") -> Literal["tools", "__end__"]:
    """``"tools"`` when the last message asks for tools, else ``"__end__"`` (the route after a
    model node)."""
    if isinstance(state, list):
        messages = state
    elif isinstance(state, dict):
        messages = state.get(messages_key, [])
    else:
        messages = getattr(state, messages_key, [])
    if not messages:
        raise ValueError(f"No messages found in input state to tool_edge: {state}")
    return "tools" if getattr(messages[-1], "tool_calls", None) else END  # type: ignore[return-value]


def content_of(output: Any) -> Any:
    """A tool's output as message content: a str or content blocks as they are, else JSON
    (or ``str`` for what JSON cannot hold)."""
    if isinstance(output, str):
        return output
    if isinstance(output, list) and all(
        isinstance(x, dict) and x.get("type") in _BLOCK_TYPES for x in output
    ):
        return output
    try:
        return json.dumps(output, ensure_ascii=False)
    except Exception:
        return str(output)


def handled_types(flag: Any) -> tuple[type[Exception], ...]:
    """Which exceptions ``handle_tool_errors`` turns into messages."""
    if isinstance(flag, type) and issubclass(flag, Exception):
        return (flag,)
    if isinstance(flag, tuple):
        return flag
    if isinstance(flag, bool | str):
        return (Exception,)
    if callable(flag):
        return _annotated_types(flag)
    raise ValueError(
        "Got unexpected type of `handle_tool_error`. Expected bool, str or callable. "
        f"Received: {flag}"
    )


def _annotated_types(handler: Callable[..., str]) -> tuple[type[Exception], ...]:
    """The exception types a handler's first parameter is annotated with; all without one."""
    params = list(inspect.signature(handler).parameters.values())
    if not params:
        return (Exception,)
    first = params[1] if params[0].name in ("self", "cls") and len(params) == 2 else params[0]
    hint = typing.get_type_hints(handler).get(first.name)
    if hint is None:
        return (Exception,)
    options = (
        typing.get_args(hint)
        if typing.get_origin(hint) in (typing.Union, types.UnionType)
        else (hint,)
    )
    if not all(isinstance(t, type) and issubclass(t, Exception) for t in options):
        raise ValueError(
            "the error handler's first parameter must be annotated with Exception types "
            f"(def handler(e: ValueError) or e: ValueError | TypeError), got {hint!r}"
        )
    return tuple(options)


def _in_threads(jobs: list[tuple[Callable[..., Any], tuple[Any, ...]]]) -> list[Any]:
    """Run the jobs concurrently, each in a copy of this context; results in order, or the
    first failure (in order) raised once all have finished."""
    with ThreadPoolExecutor(max_workers=len(jobs)) as pool:
        futures = [pool.submit(contextvars.copy_context().run, fn, *args) for fn, args in jobs]
        done: list[Any] = []
        for future in futures:
            try:
                done.append(future.result())
            except BaseException as exc:  # an interrupt too: raised after all have finished
                done.append(exc)
    return _raise_first(done)


def _raise_first(done: Sequence[Any]) -> list[Any]:
    """The results; or the first error among them; or, when only interrupts stopped calls,
    one interrupt carrying them all (each call asks under its own id)."""
    failed = [item for item in done if isinstance(item, BaseException)]
    errors = [item for item in failed if not isinstance(item, GraphInterrupt)]
    if errors:
        raise errors[0]
    asked = [item for item in failed if isinstance(item, GraphInterrupt)]
    if asked:
        raise GraphInterrupt(tuple(i for exc in asked for i in exc.interrupts))
    return list(done)
