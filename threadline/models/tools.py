"""Tools as chat-completions tool definitions (``{"type": "function", "function": {...}}``).

A tool is given as such a dict (or just its ``{"name", "description", "parameters"}``), a
langchain-core tool, a pydantic model class, or a plain function (its parameters described from
its signature and type hints, its description from its docstring; needs pydantic).
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from typing import Any

_CHOICES = ("auto", "none", "required")


def tool_spec(tool: Any) -> dict[str, Any]:
    """The chat-completions definition of ``tool``."""
    if isinstance(tool, dict):
        return _from_dict(tool)
    schema = getattr(tool, "tool_call_schema", None)  # a langchain-core tool
    if schema is not None and isinstance(getattr(tool, "name", None), str):
        return _function(tool.name, tool.description or "", _parameters(schema))
    if isinstance(tool, type) and hasattr(tool, "model_json_schema"):
        return _function(tool.__name__, inspect.getdoc(tool) or "", _parameters(tool))
    if inspect.isfunction(tool) or inspect.ismethod(tool):
        return _function(tool.__name__, inspect.getdoc(tool) or "", _signature_schema(tool))
    raise TypeError(
        f"cannot offer {tool!r} to a model as a tool: give a function, a langchain-core tool, "
        "a pydantic model class or a tool definition dict"
    )


def tool_choice(choice: Any, specs: Sequence[dict[str, Any]]) -> Any:
    """LangChain's ``tool_choice`` values in chat-completions form.

    ``"auto"``, ``"none"``, ``"required"`` (``"any"`` and ``True`` mean required; ``True``
    with one tool names it), a tool's name, or a dict passed as it is.
    """
    names = [spec["function"]["name"] for spec in specs]
    if isinstance(choice, dict):
        return choice
    if choice is True:
        return _named(names[0]) if len(names) == 1 else "required"
    if choice == "any":
        return "required"
    if choice in _CHOICES:
        return choice
    if isinstance(choice, str) and choice in names:
        return _named(choice)
    raise ValueError(
        f"tool_choice {choice!r} is neither one of {', '.join(_CHOICES)}, 'any' nor the name of "
        f"a bound tool ({', '.join(names) or 'no tools bound'})"
    )


def _named(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name}}


def _from_dict(tool: dict[str, Any]) -> dict[str, Any]:
    if tool.get("type") == "function" and isinstance(tool.get("function"), dict):
        function = tool["function"]
    elif "name" in tool:
        function = tool
    else:
        raise ValueError(
            "a tool definition dict needs a 'name' (or 'type': 'function' and a 'function' "
            f"holding one), got keys {sorted(tool)}"
        )
    if not isinstance(function.get("name"), str):
        raise ValueError(f"a tool definition's name must be a str, got {function.get('name')!r}")
    return {"type": "function", "function": dict(function)}


def _function(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


def _parameters(schema: Any) -> dict[str, Any]:
    """A tool's arguments schema (a pydantic model class or a JSON Schema dict), untitled."""
    raw = schema if isinstance(schema, dict) else schema.model_json_schema()
    return {key: value for key, value in raw.items() if key not in ("title", "description")}


def _signature_schema(function: Any) -> dict[str, Any]:
    """A function's parameters as a JSON Schema, built with pydantic from its type hints."""
    try:
        from pydantic import create_model
    except ImportError:
        raise TypeError(
            f"describing the function {function.__name__} as a tool needs pydantic (pip install "
            "'threadline[pydantic]'); or pass a tool definition dict"
        ) from None
    hints = inspect.get_annotations(function, eval_str=True)
    fields: dict[str, Any] = {}
    for name, param in inspect.signature(function).parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or name in ("self", "cls"):
            continue
        default = ... if param.default is param.empty else param.default
        fields[name] = (hints.get(name, Any), default)
    return _parameters(create_model(function.__name__, **fields))
