"""Light chat messages for when langchain-core is not installed.

They copy langchain-core's names, attributes and constructor arguments (``HumanMessage("hi",
id="1")``, ``AIMessage(content=..., tool_calls=[...])``, ``RemoveMessage(id=...)``) so that code
written for LangGraph runs on them unchanged, and so that messages stored by either kind load as
the other (see ``threadline.serde.known``). Unknown keyword arguments are kept as attributes,
as langchain-core's ``extra="allow"`` models do.
"""

from __future__ import annotations

from typing import Any, ClassVar

from threadline.messages._chunks import merge_chunks, tool_calls_of

_UNSET: Any = object()
# The default of each field that has one other than None (repr leaves defaults out).
_DEFAULTS: dict[str, Any] = {
    "additional_kwargs": {},
    "response_metadata": {},
    "tool_calls": [],
    "invalid_tool_calls": [],
    "tool_call_chunks": [],
    "status": "success",
}


class BaseMessage:
    """A chat message: ``content`` (a str or a list of content blocks) plus metadata."""

    type: str = "base"
    _fields: ClassVar[tuple[str, ...]] = (
        "content",
        "additional_kwargs",
        "response_metadata",
        "type",
        "name",
        "id",
    )
    # Fields always shown by repr (langchain-core shows fields made by a default factory).
    _shown: ClassVar[tuple[str, ...]] = ("content", "additional_kwargs", "response_metadata")

    def __init__(self, content: str | list[Any] = _UNSET, **kwargs: Any) -> None:
        if content is _UNSET:
            raise TypeError(f"{type(self).__name__} needs a content argument")
        if not isinstance(content, str | list):
            raise TypeError(
                f"{type(self).__name__}.content must be a str or a list of content blocks, "
                f"got {type(content).__name__}"
            )
        kind = kwargs.pop("type", type(self).type)
        if kind != type(self).type:
            raise ValueError(
                f"{type(self).__name__} has type {type(self).type!r}, not {kind!r}; "
                "use the class of that type"
            )
        self.content = content
        self.additional_kwargs: dict[str, Any] = _dict(kwargs.pop("additional_kwargs", None))
        self.response_metadata: dict[str, Any] = _dict(kwargs.pop("response_metadata", None))
        self.type = kind
        self.name: str | None = kwargs.pop("name", None)
        self.id: str | None = _id(kwargs.pop("id", None))
        self._init_fields(kwargs)
        self.__dict__.update(kwargs)  # extra attributes, as langchain-core keeps them

    def _init_fields(self, kwargs: dict[str, Any]) -> None:
        """Set the fields a subclass adds, popping them from ``kwargs``."""

    # -- what langchain-core's messages offer ----------------------------------------------------

    @property
    def text(self) -> str:
        """The text of ``content``: the str itself, or its text blocks joined."""
        if isinstance(self.content, str):
            return self.content
        parts = []
        for block in self.content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict) and block.get("type") == "text":
                parts.append(str(block.get("text", "")))
        return "".join(parts)

    def model_dump(self) -> dict[str, Any]:
        """The message's fields as a dict (extras included), as a pydantic model gives them."""
        return dict(vars(self))

    def model_copy(self, *, update: dict[str, Any] | None = None, deep: bool = False) -> Any:
        """A copy with ``update`` applied (``deep`` copies the nested dicts and lists too)."""
        import copy

        values = copy.deepcopy(vars(self)) if deep else dict(vars(self))
        values.update(update or {})
        clone = object.__new__(type(self))
        clone.__dict__.update(values)
        return clone

    def pretty_repr(self, html: bool = False) -> str:
        """The message as langchain-core's ``pretty_repr`` shows it (``html`` is ignored)."""
        title = _title(self.type.title() + " Message")
        if self.name is not None:
            title += f"\nName: {self.name}"
        return f"{title}\n\n{self.content}"

    def pretty_print(self) -> None:
        print(self.pretty_repr())

    # -- value semantics ---------------------------------------------------------------------

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and vars(other) == vars(self)

    __hash__ = None  # type: ignore[assignment]  # mutable, like a pydantic model

    def __repr__(self) -> str:
        shown = []
        for key, value in vars(self).items():
            if key in self._shown or (key not in self._fields or value != self._default(key)):
                shown.append(f"{key}={value!r}")
        return f"{type(self).__name__}({', '.join(shown)})"

    def _default(self, key: str) -> Any:
        if key == "type":
            return type(self).type
        return _DEFAULTS.get(key)

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: Any) -> Any:
        """Let pydantic state schemas hold these messages (checked with isinstance)."""
        from pydantic_core import core_schema

        return core_schema.is_instance_schema(cls)


class BaseMessageChunk(BaseMessage):
    """A piece of a streamed message; pieces join with ``+``."""


class HumanMessage(BaseMessage):
    """A message from the user."""

    type = "human"


class SystemMessage(BaseMessage):
    """Instructions for the model."""

    type = "system"


class AIMessage(BaseMessage):
    """A model's answer, possibly asking for tools (``tool_calls``)."""

    type = "ai"
    _fields = (*BaseMessage._fields, "tool_calls", "invalid_tool_calls", "usage_metadata")
    _shown = (*BaseMessage._shown, "tool_calls", "invalid_tool_calls")

    def _init_fields(self, kwargs: dict[str, Any]) -> None:
        self.tool_calls: list[dict[str, Any]] = [
            _tool_call(call) for call in kwargs.pop("tool_calls", None) or []
        ]
        self.invalid_tool_calls: list[dict[str, Any]] = [
            _invalid_tool_call(call) for call in kwargs.pop("invalid_tool_calls", None) or []
        ]
        self.usage_metadata: dict[str, Any] | None = kwargs.pop("usage_metadata", None)

    def pretty_repr(self, html: bool = False) -> str:
        lines = []
        for label, calls in (
            ("Tool Calls:", self.tool_calls),
            ("Invalid Tool Calls:", self.invalid_tool_calls),
        ):
            if calls:
                lines.append(label)
                for call in calls:
                    lines.extend(_tool_call_lines(call))
        return (super().pretty_repr(html).strip() + "\n" + "\n".join(lines)).strip()


class AIMessageChunk(AIMessage, BaseMessageChunk):
    """A streamed piece of a model's answer; ``a + b`` joins pieces as langchain-core does."""

    type = "AIMessageChunk"
    _fields = (*AIMessage._fields, "tool_call_chunks", "chunk_position")
    _shown = (*AIMessage._shown, "tool_call_chunks")

    def _init_fields(self, kwargs: dict[str, Any]) -> None:
        chunks = [_tool_call_chunk(chunk) for chunk in kwargs.pop("tool_call_chunks", None) or []]
        super()._init_fields(kwargs)
        self.tool_call_chunks: list[dict[str, Any]] = chunks
        self.chunk_position: str | None = kwargs.pop("chunk_position", None)
        if chunks:  # tool calls are parsed from the chunks, as far as their JSON goes
            self.tool_calls, self.invalid_tool_calls = tool_calls_of(chunks)

    def __add__(self, other: Any) -> AIMessageChunk:
        others = other if isinstance(other, list | tuple) else [other]
        if not others or not all(isinstance(o, AIMessageChunk) for o in others):
            return NotImplemented
        return AIMessageChunk(**merge_chunks(self, *others))


class ToolMessage(BaseMessage):
    """A tool's result, answering the tool call ``tool_call_id``."""

    type = "tool"
    _fields = (*BaseMessage._fields, "tool_call_id", "artifact", "status")
    _shown = ("content",)

    def _init_fields(self, kwargs: dict[str, Any]) -> None:
        if "tool_call_id" not in kwargs:
            raise TypeError("ToolMessage needs a tool_call_id (the id of the call it answers)")
        self.tool_call_id = str(kwargs.pop("tool_call_id"))
        self.artifact: Any = kwargs.pop("artifact", None)
        self.status: str = kwargs.pop("status", "success")
        if self.status not in ("success", "error"):
            raise ValueError(
                f"ToolMessage.status must be 'success' or 'error', not {self.status!r}"
            )


class RemoveMessage(BaseMessage):
    """Returned in a messages update, deletes the message with this ``id``."""

    type = "remove"

    def __init__(self, id: str, **kwargs: Any) -> None:
        if kwargs.pop("content", None):
            raise ValueError("RemoveMessage does not support 'content' field.")
        super().__init__("", id=id, **kwargs)


AnyMessage = AIMessage | HumanMessage | SystemMessage | ToolMessage | AIMessageChunk
"""Any message a conversation holds (langchain-core's ``AnyMessage`` when it is installed)."""

CLASSES: dict[str, type[BaseMessage]] = {
    cls.__name__: cls
    for cls in (HumanMessage, AIMessage, SystemMessage, ToolMessage, RemoveMessage, AIMessageChunk)
}


def _dict(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"expected a dict, got {type(value).__name__}")
    return value


def _id(value: Any) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise TypeError(f"a message id must be a str, got {type(value).__name__}")


def _tool_call(call: Any) -> dict[str, Any]:
    """A tool call as langchain-core makes it: name, args, id, type (and nothing else)."""
    _keys_of(call, "tool call", required=("name", "args", "id"))
    return {"name": call["name"], "args": call["args"], "id": call["id"], "type": "tool_call"}


def _invalid_tool_call(call: Any) -> dict[str, Any]:
    _keys_of(call, "invalid tool call", optional=("name", "args", "id", "error"))
    fields = {k: call.get(k) for k in ("id", "name", "args", "error")}
    return {"type": "invalid_tool_call", **fields}


def _tool_call_chunk(chunk: Any) -> dict[str, Any]:
    _keys_of(chunk, "tool call chunk", optional=("name", "args", "id", "index"))
    fields = {k: chunk.get(k) for k in ("name", "args", "id", "index")}
    return {**fields, "type": "tool_call_chunk"}


def _keys_of(
    value: Any, what: str, required: tuple[str, ...] = (), optional: tuple[str, ...] = ()
) -> None:
    """Check that ``value`` is a dict with the keys langchain-core accepts for ``what``."""
    allowed = {*required, *optional, "type", "extras"}
    if not isinstance(value, dict) or not value.keys() >= set(required) or value.keys() - allowed:
        keys = ", ".join(map(repr, required or optional))
        raise ValueError(
            f"a {what} is a dict with {'the' if required else 'some of the'} keys {keys}, "
            f"got {value!r}"
        )


def _title(title: str) -> str:
    padded = f" {title} "
    side = "=" * ((80 - len(padded)) // 2)
    return f"{side}{padded}{side}{'=' if len(padded) % 2 else ''}"


def _tool_call_lines(call: dict[str, Any]) -> list[str]:
    lines = [f"  {call.get('name', 'Tool')} ({call.get('id')})", f" Call ID: {call.get('id')}"]
    if call.get("error"):
        lines.append(f"  Error: {call.get('error')}")
    lines.append("  Args:")
    args = call.get("args")
    if isinstance(args, str):
        lines.append(f"    {args}")
    elif isinstance(args, dict):
        lines.extend(f"    {key}: {value}" for key, value in args.items())
    return lines
