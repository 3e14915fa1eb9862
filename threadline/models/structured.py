"""Structured output: a schema sent as ``response_format``, the model's JSON reply parsed.

A schema is a pydantic model (the reply becomes an instance), a TypedDict or dataclass (a dict
or an instance, validated by pydantic), or a JSON Schema dict (the reply's dict; its
top-level ``required`` keys are checked).
"""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from threadline.errors import ModelResponseError
from threadline.graph.schema import is_pydantic_model
from threadline.messages import AIMessage
from threadline.models.protocol import ModelInput, text_of

if TYPE_CHECKING:
    from pydantic import TypeAdapter

_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.DOTALL)


def response_format(schema: Any, *, strict: bool | None = None) -> dict[str, Any]:
    """The chat-completions ``response_format`` asking for JSON that matches ``schema``."""
    spec: dict[str, Any] = {"name": _name(schema), "schema": json_schema(schema)}
    if strict is not None:
        spec["strict"] = strict
    return {"type": "json_schema", "json_schema": spec}


def json_schema(schema: Any) -> dict[str, Any]:
    """``schema`` as a JSON Schema dict."""
    if isinstance(schema, dict):
        if schema.get("type") != "object" and "properties" not in schema:
            raise TypeError("a JSON Schema for structured output must describe an object")
        return schema
    if isinstance(schema, type) and is_pydantic_model(schema):
        return schema.model_json_schema()
    return _adapter(schema).json_schema()


def parse(schema: Any, message: AIMessage) -> Any:
    """The model's reply as ``schema`` describes it; ``ModelResponseError`` saying why not."""
    text = text_of(message)
    fenced = _FENCE.match(text)
    if fenced:  # some local models wrap JSON in a Markdown code block
        text = fenced.group(1)
    name = _name(schema)
    if not text.strip():
        raise ModelResponseError(f"the model gave no JSON for {name}: its reply was empty")
    try:
        if isinstance(schema, dict):
            return _checked_dict(json.loads(text), schema, name)
        if isinstance(schema, type) and hasattr(schema, "model_validate_json"):
            return schema.model_validate_json(text)
        return _adapter(schema).validate_json(text)
    except ValueError as exc:  # json's and pydantic's errors are both ValueErrors
        raise ModelResponseError(
            f"the model's reply does not match {name}: {exc}\nreply: {text[:500]}"
        ) from exc


def _checked_dict(value: Any, schema: dict[str, Any], name: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    missing = [key for key in schema.get("required", ()) if key not in value]
    if missing:
        raise ValueError(f"missing required field(s) {', '.join(map(repr, missing))}")
    return value


def _adapter(schema: Any) -> TypeAdapter[Any]:
    try:
        from pydantic import TypeAdapter
    except ImportError:
        raise TypeError(
            f"structured output with {_name(schema)} needs pydantic (pip install "
            "'threadline[pydantic]'); or pass a JSON Schema dict"
        ) from None
    try:
        return TypeAdapter(schema)
    except Exception as exc:  # pydantic says what it cannot handle
        raise TypeError(f"cannot use {schema!r} as a structured-output schema: {exc}") from exc


def _name(schema: Any) -> str:
    raw = schema.get("title", "response") if isinstance(schema, dict) else schema.__name__
    return re.sub(r"[^a-zA-Z0-9_-]", "_", str(raw))[:64] or "response"


class StructuredChatModel:
    """A chat model whose answers are parsed into a schema (``with_structured_output``).

    ``invoke`` returns the parsed value, or with ``include_raw=True`` a dict ``{"raw": message,
    "parsed": value or None, "parsing_error": error or None}`` as LangChain's does.
    """

    def __init__(
        self, model: Any, schema: Any, *, include_raw: bool = False, strict: bool | None = None
    ) -> None:
        self.model = model
        self.schema = schema
        self.include_raw = include_raw
        self.response_format = response_format(schema, strict=strict)

    def invoke(self, input: ModelInput, **kwargs: Any) -> Any:
        return self._result(
            self.model.invoke(input, response_format=self.response_format, **kwargs)
        )

    async def ainvoke(self, input: ModelInput, **kwargs: Any) -> Any:
        message = await self.model.ainvoke(input, response_format=self.response_format, **kwargs)
        return self._result(message)

    def _result(self, message: AIMessage) -> Any:
        if not self.include_raw:
            return parse(self.schema, message)
        try:
            return {"raw": message, "parsed": parse(self.schema, message), "parsing_error": None}
        except ModelResponseError as exc:
            return {"raw": message, "parsed": None, "parsing_error": exc}
