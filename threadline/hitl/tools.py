"""``human_review``: a tool that asks a person before it runs.

Wraps a plain function (sync or async) or a langchain-core tool. Calling the wrapped tool inside
a node raises one review interrupt for the call; the decision then says what happens:
``accept`` runs the tool with the arguments it was called with, ``edit`` with the reviewer's
arguments (checked against the tool's argument schema at resume), ``respond`` returns the
reviewer's text as the tool's result, ``reject`` returns a rejection message; neither of the
last two runs the tool.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import sys
from collections.abc import Callable, Sequence
from typing import Any

from threadline.hitl.review import (
    ActionRequest,
    Decision,
    DecisionType,
    RequestShape,
    request_review,
)
from threadline.hitl.review_answers import DECISION_TYPES


class _Reviewed:
    """What the wrapper needs to know about the tool: its name, how to call it, its schema."""

    def __init__(
        self,
        name: str,
        body: Callable[..., Any],
        args_schema: dict[str, Any] | None,
        description: str | None,
        allowed: Sequence[DecisionType],
        shape: RequestShape = "threadline",
    ) -> None:
        self.name = name
        self.body = body
        self.template = ActionRequest(name, {}, description, tuple(allowed), args_schema)
        self.shape = shape

    def decide(self, args: dict[str, Any]) -> tuple[Decision, dict[str, Any]]:
        """Ask for review of a call with ``args``; the decision and the arguments to run with."""
        asked = dataclasses.replace(self.template, args=args)
        (decision,) = request_review([asked], shape=self.shape)
        # only an edit has args: a dict (``Decision`` checks it)
        return decision, decision.args if isinstance(decision.args, dict) else args

    def skipped(self, decision: Decision) -> Any:
        """The result of a call the reviewer answered or rejected: it does not run."""
        if decision.type == "respond":
            return decision.message
        return decision.message or f"User rejected the tool call for `{self.name}`."

    def __call__(self, args: dict[str, Any]) -> Any:
        if _on_event_loop():  # the result could only be awaited, and this call cannot
            raise RuntimeError(
                f"the reviewed tool {self.name!r} is sync but was called in an async node; "
                "review an async function there (or call the tool's ainvoke)"
            )
        decision, run_args = self.decide(args)
        if decision.type in ("respond", "reject"):
            return self.skipped(decision)
        return _run_once(self.name, self.body, run_args).result()

    async def acall(self, args: dict[str, Any]) -> Any:
        decision, run_args = self.decide(args)
        if decision.type in ("respond", "reject"):
            return self.skipped(decision)
        return await _run_once(self.name, self.body, run_args)


def human_review(
    tool: Any,
    *,
    allowed: Sequence[DecisionType] = DECISION_TYPES,
    description: str | None = None,
    shape: RequestShape = "threadline",
) -> Any:
    """``tool`` behind a review: each call asks a person first (see the module docstring).

    ``tool`` is a function (sync or async) or a langchain-core tool; the result is the same
    kind of thing, with the same name, signature or argument schema, so it can be offered to a
    model and called by a tool node as the original would. ``allowed`` limits the decisions;
    ``description`` is shown to the reviewer; ``shape="agent-inbox"`` asks in Agent Inbox's
    shape (see ``request_review``).

    An accepted or edited call runs at most once: its result is saved as a ``@task`` result
    of the node, so when the node runs again (a later interrupt in it, a retry) the call
    returns the saved result instead of running the tool again.
    """
    if shape not in ("threadline", "agent-inbox"):
        raise ValueError(f"shape must be 'threadline' or 'agent-inbox', got {shape!r}")
    if _is_langchain_tool(tool):
        return _review_langchain_tool(tool, allowed, description, shape)
    if inspect.isfunction(tool) or inspect.ismethod(tool) or inspect.isbuiltin(tool):
        return _review_function(tool, allowed, description, shape)
    raise TypeError(
        f"human_review() wraps a function or a langchain-core tool, got {tool!r}; wrap a "
        "callable object's method (human_review(obj.method)) instead"
    )


def _on_event_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def _is_langchain_tool(tool: Any) -> bool:
    tools = sys.modules.get("langchain_core.tools")  # not imported: tool cannot be one
    return tools is not None and isinstance(tool, tools.BaseTool)


def _review_function(
    fn: Callable[..., Any],
    allowed: Sequence[DecisionType],
    description: str | None,
    shape: RequestShape,
) -> Callable[..., Any]:
    signature = inspect.signature(fn)
    for param in signature.parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.POSITIONAL_ONLY):
            raise TypeError(
                f"human_review({fn.__name__}): parameter {param.name!r} cannot be given by name, "
                "so a reviewer could not edit it; make it a keyword-or-positional parameter"
            )
    takes_more = any(p.kind is p.VAR_KEYWORD for p in signature.parameters.values())
    schema = _function_schema(fn, takes_more)
    reviewed = _Reviewed(fn.__name__, fn, schema, description, allowed, shape)

    def named(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
        bound = signature.bind(*args, **kwargs)  # a wrong call fails here, as it would unwrapped
        named_args = dict(bound.arguments)
        for param in signature.parameters.values():
            if param.kind is param.VAR_KEYWORD:
                named_args.update(named_args.pop(param.name, {}))
        return named_args

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def areview(*args: Any, **kwargs: Any) -> Any:
            return await reviewed.acall(named(args, kwargs))

        return areview

    @functools.wraps(fn)
    def review(*args: Any, **kwargs: Any) -> Any:
        return reviewed(named(args, kwargs))

    return review


def _function_schema(fn: Callable[..., Any], takes_more: bool) -> dict[str, Any] | None:
    """The JSON Schema of ``fn``'s arguments, so edits are checked at resume; None without
    pydantic (an edit is then checked only when the tool is called)."""
    from threadline.models.tools import tool_spec

    try:
        schema = tool_spec(fn)["function"]["parameters"]
    except TypeError:
        return None
    return schema if takes_more else {**schema, "additionalProperties": False}


def _review_langchain_tool(
    tool: Any, allowed: Sequence[DecisionType], description: str | None, shape: RequestShape
) -> Any:
    from langchain_core.tools import StructuredTool

    from threadline.models.tools import tool_spec

    schema = tool_spec(tool)["function"]["parameters"]
    injected = sorted(set(_input_fields(tool)) - set(schema.get("properties", {})))
    if injected:
        raise TypeError(
            f"human_review({tool.name}): tools with injected arguments ({', '.join(injected)}) "
            "are not supported yet; review a tool whose arguments all come from the model"
        )
    schema.setdefault("additionalProperties", False)

    def body(**kwargs: Any) -> Any:
        return tool.invoke(kwargs)

    async def abody(**kwargs: Any) -> Any:
        return await tool.ainvoke(kwargs)

    reviewed = _Reviewed(tool.name, body, schema, description, allowed, shape)
    areviewed = _Reviewed(tool.name, abody, schema, description, allowed, shape)

    def run(**kwargs: Any) -> Any:
        return reviewed(kwargs)

    async def arun(**kwargs: Any) -> Any:
        return await areviewed.acall(kwargs)

    return StructuredTool(
        name=tool.name,
        description=tool.description,
        args_schema=tool.args_schema,
        func=run,
        coroutine=arun,
        return_direct=tool.return_direct,
    )


def _input_fields(tool: Any) -> list[str]:
    """Every argument the tool takes, those it is given by the runtime included."""
    schema = tool.get_input_schema()
    raw = schema if isinstance(schema, dict) else schema.model_json_schema()
    return list(raw.get("properties", {}))


def _run_once(name: str, body: Callable[..., Any], args: dict[str, Any]) -> Any:
    """Start ``body(**args)`` as a ``@task`` call of the running node, and return its future.

    The call's result is saved when it returns, so when the node runs again (a later
    interrupt in it, a retry after a failure, a crash) the same call gets the saved result
    and the tool does not run a second time.
    """
    from threadline.func import task

    return task(body, name=name)(**args)
