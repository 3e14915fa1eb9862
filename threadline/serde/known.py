"""Classes of other packages that serde stores without a ``register`` call: chat messages.

An allow-list, not a lookup by stored name: a stored name is only ever compared with the names
below, and the classes are taken from modules named here (``langchain_core.messages``, or
threadline's own light messages), never from the data. Messages of either family are stored
under one name per class (``threadline.messages.AIMessage``) and load as the family this process
uses (see ``threadline.messages``), so a conversation saved with langchain-core installed loads
without it and the other way round. Nothing here imports langchain-core until a message is
stored or loaded.
"""

from __future__ import annotations

import sys
from typing import Any

from threadline.errors import SerializationError
from threadline.serde._records import Record, set_kind

PREFIX = "threadline.messages."
_LANGCHAIN = "langchain_core.messages"
_LIGHT = "threadline.messages.light"
# langchain-core's message classes, all plain data (pydantic models of str, list and dict).
MESSAGE_CLASSES = frozenset(
    {
        "AIMessage",
        "AIMessageChunk",
        "ChatMessage",
        "ChatMessageChunk",
        "FunctionMessage",
        "FunctionMessageChunk",
        "HumanMessage",
        "HumanMessageChunk",
        "RemoveMessage",
        "SystemMessage",
        "SystemMessageChunk",
        "ToolMessage",
        "ToolMessageChunk",
    }
)


class LangchainMessage(Record):
    """A langchain-core message: its pydantic fields and extras; rebuilt by validation."""

    __slots__ = ()

    def __init__(self, cls: type):
        super().__init__(cls, tuple(cls.model_fields))  # type: ignore[attr-defined]

    def values(self, obj: Any) -> dict[str, Any]:
        values = {name: getattr(obj, name) for name in self.fields}
        if obj.__pydantic_extra__:
            values.update(obj.__pydantic_extra__)
        return values

    def build(self, values: dict[str, Any], extras: list[Any]) -> Any:
        return self.cls.model_validate(values)  # type: ignore[attr-defined]


class LightMessage(Record):
    """One of threadline's light messages: its attributes; rebuilt by its constructor."""

    __slots__ = ()

    def __init__(self, cls: type):
        super().__init__(cls, ())

    def values(self, obj: Any) -> dict[str, Any]:
        return dict(vars(obj))

    def build(self, values: dict[str, Any], extras: list[Any]) -> Any:
        return self.cls(**values)


# langchain-core's str subclasses (a message's ``.text``): stored as the plain str they are,
# and so loaded as str, as LangGraph's serializer does. By exact class, never by subclassing.
_STR_LIKE = frozenset({("langchain_core.messages.base", "TextAccessor")})


def plain_str(obj: Any) -> str | None:
    """``obj`` as a plain str, if its class is one of langchain-core's str subclasses."""
    cls = type(obj)
    if (cls.__module__, cls.__name__) not in _STR_LIKE:
        return None
    if getattr(sys.modules.get(cls.__module__), cls.__name__, None) is not cls:
        return None
    return str.__str__(obj)


def name_for(cls: type) -> str | None:
    """The stored name of a known message class (and now registered), or None."""
    name = cls.__name__
    if name not in MESSAGE_CLASSES:
        return None
    if cls.__module__.startswith(_LANGCHAIN):
        if getattr(sys.modules.get(_LANGCHAIN), name, None) is not cls:
            return None
        set_kind(cls, LangchainMessage(cls))
    elif cls.__module__ == _LIGHT:
        from threadline.messages.light import CLASSES

        if CLASSES.get(name) is not cls:
            return None
        set_kind(cls, LightMessage(cls))
    else:
        return None
    return PREFIX + name


def class_for(name: str) -> type | None:
    """The class a stored known name loads as in this process (now registered), or None."""
    short = name[len(PREFIX) :] if name.startswith(PREFIX) else ""
    if short not in MESSAGE_CLASSES:
        return None
    from threadline.messages import USES_LANGCHAIN

    if USES_LANGCHAIN:
        cls: type = getattr(sys.modules[_LANGCHAIN], short)
        set_kind(cls, LangchainMessage(cls))
        return cls
    from threadline.messages.light import CLASSES

    light = CLASSES.get(short)
    if light is None:
        raise SerializationError(
            f"cannot load a {short}: it is one of langchain-core's message classes, and "
            "langchain-core is not installed: pip install 'threadline[langchain]'",
            type_name=name,
        )
    set_kind(light, LightMessage(light))
    return light
