"""Tools as an agent runs them: a plain function or a langchain-core tool, behind one face.

Each offers what the model is shown (``for_model``: injected parameters left out), its injected
parameters, and ``run``/``arun`` of one tool call, which raise ``ToolInvocationError`` when the
model's arguments do not fit the tool's parameters.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Mapping
from typing import Any

from threadline.errors import ToolInvocationError
from threadline.models.tools import tool_spec
from threadline.prebuilt.injection import (
    Injections,
    injections_of_function,
    injections_of_langchain_tool,
    type_hints,
)

TOOL_INVOCATION_ERROR_TEMPLATE = (
    "Error invoking tool '{tool_name}' with kwargs {tool_kwargs} with error:\n"
    " {error}\n"
    " Please fix the error and try again."
)


class FunctionTool:
    """A plain function (sync or async) used as a tool: its name, docstring and parameters
    describe it; its arguments are checked (and coerced, with pydantic) before it runs."""

    return_direct = False

    def __init__(self, fn: Any) -> None:
        self.fn = fn
        self.name: str = fn.__name__
        self.description = inspect.getdoc(fn) or ""
        self.injections: Injections = injections_of_function(fn)
        self._signature = inspect.signature(fn)
        self._args = _args_model(fn, self._signature, self.injections.names)

    def for_model(self) -> dict[str, Any]:
        if self._args is None:
            raise TypeError(
                f"describing the function {self.name} as a tool needs pydantic (pip install "
                "'threadline[pydantic]')"
            )
        schema = self._args.model_json_schema()
        parameters = {k: v for k, v in schema.items() if k not in ("title", "description")}
        spec = {"name": self.name, "description": self.description, "parameters": parameters}
        return tool_spec(spec)

    def args_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the arguments the model gives; None without pydantic."""
        return self.for_model()["function"]["parameters"] if self._args is not None else None

    def run(self, call: Mapping[str, Any], injected: dict[str, Any]) -> Any:
        result = self.fn(**self._checked(call["args"]), **injected)
        return asyncio.run(result) if inspect.iscoroutine(result) else result

    async def arun(self, call: Mapping[str, Any], injected: dict[str, Any]) -> Any:
        result = self.fn(**self._checked(call["args"]), **injected)
        return await result if inspect.isawaitable(result) else result

    def _checked(self, args: dict[str, Any]) -> dict[str, Any]:
        if self._args is None:
            try:
                self._signature.bind(**args, **dict.fromkeys(self.injections.names))
            except TypeError as exc:
                raise _invocation_error(self.name, args, str(exc)) from None
            return dict(args)
        from pydantic import ValidationError

        try:
            checked = self._args.model_validate(args)
        except ValidationError as exc:
            raise _invocation_error(self.name, args, _errors_text(exc.errors())) from None
        return {name: getattr(checked, name) for name in args if name in self._args.model_fields}


class LangChainTool:
    """A langchain-core tool (``@tool``, ``StructuredTool``, any ``BaseTool``), run as
    LangGraph runs it: invoked with the tool call, so it returns the ``ToolMessage``."""

    def __init__(self, tool: Any) -> None:
        self.tool = tool
        self.name: str = tool.name
        self.return_direct = bool(getattr(tool, "return_direct", False))
        self.injections = injections_of_langchain_tool(tool)

    def for_model(self) -> Any:
        return self.tool

    def args_schema(self) -> dict[str, Any] | None:
        """The JSON Schema of the arguments the model gives (injected ones left out)."""
        schema = self.tool.tool_call_schema
        raw = schema if isinstance(schema, dict) else schema.model_json_schema()
        return {k: v for k, v in raw.items() if k not in ("title", "description")}

    def run(self, call: Mapping[str, Any], injected: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return self.tool.invoke(self._payload(call, injected))
        except ValidationError as exc:
            raise self._invocation_error(call, exc) from None

    async def arun(self, call: Mapping[str, Any], injected: dict[str, Any]) -> Any:
        from pydantic import ValidationError

        try:
            return await self.tool.ainvoke(self._payload(call, injected))
        except ValidationError as exc:
            raise self._invocation_error(call, exc) from None

    def _payload(self, call: Mapping[str, Any], injected: dict[str, Any]) -> dict[str, Any]:
        return {**call, "args": {**call["args"], **injected}, "type": "tool_call"}

    def _invocation_error(self, call: Mapping[str, Any], exc: Any) -> ToolInvocationError:
        hidden = self.injections.names
        errors = [e for e in exc.errors() if e.get("loc") and e["loc"][0] not in hidden]
        return _invocation_error(self.name, call["args"], _errors_text(errors))


AnyTool = FunctionTool | LangChainTool


def as_tool(tool: Any) -> AnyTool:
    """``tool`` as an agent runs it; a clear error for what cannot be a tool."""
    if isinstance(tool, FunctionTool | LangChainTool):
        return tool
    named = isinstance(getattr(tool, "name", None), str)
    if named and callable(getattr(tool, "invoke", None)) and hasattr(tool, "get_input_schema"):
        return LangChainTool(tool)
    if callable(tool) and isinstance(getattr(tool, "__name__", None), str):
        return FunctionTool(tool)  # a function, or a callable wrapping one (functools.wraps)
    raise TypeError(
        f"cannot use {tool!r} as a tool: give a function or a langchain-core tool "
        "(tool definition dicts can be bound to a model, but the agent cannot run them)"
    )


def _args_model(fn: Any, signature: inspect.Signature, injected: frozenset[str]) -> Any:
    """A pydantic model of the parameters the model fills in; None without pydantic."""
    try:
        from pydantic import create_model
    except ImportError:
        return None
    hints = type_hints(fn)
    fields: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if name in injected or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        default = ... if param.default is param.empty else param.default
        hint = hints.get(name, Any)
        fields[name] = (Any if isinstance(hint, str) else hint, default)  # str: unresolvable
    return create_model(fn.__name__, **fields)


def _errors_text(errors: list[Any]) -> str:
    return "\n".join(
        f"{'.'.join(str(part) for part in e.get('loc', ()))}: {e.get('msg', 'Unknown error')}"
        for e in errors
    )


def _invocation_error(name: str, args: dict[str, Any], error: str) -> ToolInvocationError:
    message = TOOL_INVOCATION_ERROR_TEMPLATE.format(tool_name=name, tool_kwargs=args, error=error)
    return ToolInvocationError(message, tool_name=name, tool_kwargs=args)
