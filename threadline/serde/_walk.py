"""The slow encoder: the same format as the fast path, written in Python, with paths.

It runs only when the single ormsgpack call cannot be used as is: a value was rejected (so we
must say *where*: ``messages[3].payload``), a dict has non-str keys, or the output may hold a
``bytearray`` that msgpack would have flattened to ``bytes``. Its output is byte-for-byte what the
fast path would have produced for the same value, so readers need not know which path ran.

Paths are linked ``(parent, segment)`` tuples, formatted only when an error is raised.
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Callable, Iterable
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from enum import Enum
from typing import Any
from uuid import UUID

import ormsgpack

from threadline.errors import SerializationError
from threadline.serde import wire as fmt
from threadline.serde._records import EnumKind, describe, is_pydantic
from threadline.serde.known import plain_str
from threadline.serde.registry import name_of

Ext = ormsgpack.Ext
Path = tuple[Any, Any] | None

# Leaves the final ormsgpack call encodes exactly like the fast path (big ints and stdlib leaves
# go through the same ``default``).
_PLAIN = frozenset(
    {str, bytes, int, float, bool, type(None), datetime, date, time, timedelta, UUID, Decimal}
)
_STR_ONLY = frozenset({str})
_COLLECTIONS = frozenset({list, tuple, set, frozenset})
_BUILTINS = (dict, list, tuple, set, frozenset, str, bytes, int, float, datetime, date, time)


class _Key:
    """A path segment for a non-str dict key, shown as ``[repr(key)]``."""

    __slots__ = ("key",)

    def __init__(self, key: Any):
        self.key = key

    def __str__(self) -> str:
        return f"[{_short_repr(self.key)}]"


class _Member:
    """A path segment for a set element, shown as ``{repr(element)}``."""

    __slots__ = ("item",)

    def __init__(self, item: Any):
        self.item = item

    def __str__(self) -> str:
        return "{" + _short_repr(self.item) + "}"


def format_path(path: Path, prefix: str = "") -> str:
    """``messages[3].payload`` from linked segments: ints are indexes, strs fields or keys."""
    segments = []
    while path is not None:
        path, segment = path
        segments.append(segment)
    out = prefix
    for segment in reversed(segments):
        if type(segment) is int:
            out += f"[{segment}]"
        elif type(segment) is str and not segment.isidentifier():
            out += f"[{segment!r}]"
        elif type(segment) is str:
            out += f".{segment}" if out else segment
        else:
            out += str(segment)
    return out


def _short_repr(value: Any, limit: int = 60) -> str:
    try:
        text = repr(value)
    except Exception:
        text = f"<{type(value).__qualname__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _all_plain(items: Iterable[Any]) -> bool:
    return set(map(type, items)) <= _PLAIN


def holds_buffer(obj: Any) -> bool:
    """Whether a value the fast path encoded holds a bytearray/memoryview it flattened to bytes.

    Only called after the fast path succeeded, so dict keys are all str and there is no cycle.
    """
    stack = [obj]
    while stack:
        item = stack.pop()
        cls = type(item)
        if cls in _PLAIN:
            continue
        if cls is bytearray or cls is memoryview:
            return True
        if cls is dict:
            item = item.values()
        elif cls not in _COLLECTIONS:
            item = _parts(item)
        types = set(map(type, item))
        if not types <= _PLAIN:
            if bytearray in types or memoryview in types:
                return True
            stack.extend(x for x in item if type(x) not in _PLAIN)
    return False


def _parts(obj: Any) -> Any:
    """The values inside a registered object (a pickled one keeps its own types: none)."""
    if name_of(type(obj)) is None:
        return ()
    kind = describe(type(obj))
    if isinstance(kind, EnumKind):
        return (obj.value,)
    return () if kind is None else kind.values(obj).values()


class Walker:
    """Encodes one value for ``Serializer.dumps`` when the fast path could not."""

    __slots__ = ("allow_pickle", "pack", "prefix")

    def __init__(self, pack: Callable[[Any], bytes], allow_pickle: bool, prefix: str):
        self.pack = pack
        self.allow_pickle = allow_pickle
        self.prefix = prefix

    def encode(self, obj: Any, path: Path, what: str = "value") -> Any:
        """``obj`` as something ``pack`` encodes exactly as the fast path would."""
        cls = type(obj)
        if cls in _PLAIN:
            return obj
        container = _CONTAINERS.get(cls)
        if container is not None:
            return container(self, obj, path)
        name = name_of(cls)
        if name is not None:
            return self._registered(obj, name, path, what)
        if isinstance(obj, str) and (text := plain_str(obj)) is not None:
            return text
        if self.allow_pickle:
            return self._pickled(obj, path)
        raise self.unsupported(obj, path, what)

    def _dict(self, obj: dict[Any, Any], path: Path) -> Any:
        if set(map(type, obj)) <= _STR_ONLY:
            if _all_plain(obj.values()):
                return obj
            return {k: self.encode(v, (path, k)) for k, v in obj.items()}
        flat = []
        for k, v in obj.items():
            at = (path, _Key(k))
            flat.append(self.encode(k, at, "dict key"))
            flat.append(self.encode(v, at))
        return Ext(fmt.EXT_DICT, self.pack(flat))

    def _list(self, obj: list[Any], path: Path) -> Any:
        if _all_plain(obj):
            return obj
        return [self.encode(v, (path, i)) for i, v in enumerate(obj)]

    def _tuple(self, obj: tuple[Any, ...], path: Path) -> Any:
        if _all_plain(obj):
            return obj
        return Ext(fmt.EXT_TUPLE, self.pack([self.encode(v, (path, i)) for i, v in enumerate(obj)]))

    def _set(self, obj: set[Any] | frozenset[Any], path: Path) -> Any:
        if _all_plain(obj):
            return obj
        code = fmt.EXT_SET if type(obj) is set else fmt.EXT_FROZENSET
        return Ext(code, self.pack([self.encode(v, (path, _Member(v))) for v in obj]))

    def _bytearray(self, obj: bytearray, path: Path) -> Any:
        return Ext(fmt.EXT_BYTEARRAY, bytes(obj))

    def _registered(self, obj: Any, name: str, path: Path, what: str) -> Any:
        kind = describe(type(obj))
        if kind is None:
            raise self.unsupported(obj, path, what, registered=True)
        if isinstance(kind, EnumKind):
            return Ext(fmt.EXT_ENUM, self.pack([name, self.encode(obj.value, (path, "value"))]))
        try:
            values = kind.values(obj)
            extras = kind.extras(obj)
        except Exception as exc:
            raise self._error(obj, path, f"cannot read its fields ({exc!r})") from exc
        fields = {k: self.encode(v, (path, k)) for k, v in values.items()}
        return Ext(fmt.EXT_RECORD, self.pack([name, fields, *extras]))

    def _pickled(self, obj: Any, path: Path) -> Any:
        try:
            return pickle_ext(obj)
        except Exception as exc:
            raise self._error(obj, path, f"pickle failed ({exc!r})") from exc

    def unsupported(
        self, obj: Any, path: Path, what: str = "value", registered: bool = False
    ) -> SerializationError:
        """The error for a value of a type the codec cannot store, saying how to fix it."""
        why = f"type {_qualified(type(obj))} is not supported; {_fix(obj, registered)}"
        return self._error(obj, path, why, what)

    def _error(self, obj: Any, path: Path, why: str, what: str = "value") -> SerializationError:
        where = format_path(path, self.prefix)
        place = f"{what} at {where}" if where else f"top-level {what}"
        return SerializationError(
            f"cannot serialize {place}: {why}", path=where, type_name=_qualified(type(obj))
        )


def _fix(obj: Any, registered: bool) -> str:
    """How to make a value of this type storable."""
    cls = type(obj)
    if registered:
        return (
            "it is registered, but threadline.serde can only store dataclasses, pydantic "
            "models, NamedTuples and Enums"
        )
    if cls is memoryview:
        return "store bytes(view) instead"
    if dataclasses.is_dataclass(cls) or issubclass(cls, Enum) or is_pydantic(cls):
        return f"register it: threadline.serde.register({cls.__qualname__})"
    base = next((b for b in _BUILTINS if isinstance(obj, b)), None)
    if base is not None:
        return f"only exact built-in types are stored; convert it to a plain {base.__name__}"
    return (
        f"make it a dataclass (or pydantic model, NamedTuple, Enum) and register it with "
        f"threadline.serde.register({cls.__qualname__}), convert it to a supported type, or, "
        "for trusted data only, use Serializer(allow_pickle=True)"
    )


def pickle_ext(obj: Any) -> ormsgpack.Ext:
    return Ext(fmt.EXT_PICKLE, pickle.dumps(obj, protocol=5))


_CONTAINERS: dict[type, Callable[[Walker, Any, Path], Any]] = {
    dict: Walker._dict,
    list: Walker._list,
    tuple: Walker._tuple,
    set: Walker._set,
    frozenset: Walker._set,
    bytearray: Walker._bytearray,
}
