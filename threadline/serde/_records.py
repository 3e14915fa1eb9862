"""How registered classes are taken apart and rebuilt.

A registered dataclass, pydantic v2 model or NamedTuple is stored by field name (not position),
so adding a field with a default, reordering fields, or turning a dataclass into a pydantic model
does not invalidate stored checkpoints. An Enum member is stored as its value.

Rebuilding calls only the registered class: its constructor (dataclass, NamedTuple), its
``model_construct`` (pydantic: stored values were validated when the model was built, and
re-running validators could change them), or ``cls(value)`` (Enum).
"""

from __future__ import annotations

import dataclasses
import sys
from enum import Enum
from typing import Any


class Record:
    """A registered class stored as ``[name, {field: value}, *extras]``."""

    __slots__ = ("cls", "fields")

    def __init__(self, cls: type, fields: tuple[str, ...]):
        self.cls = cls
        self.fields = fields

    def values(self, obj: Any) -> dict[str, Any]:
        return {name: getattr(obj, name) for name in self.fields}

    def extras(self, obj: Any) -> list[Any]:
        """Trailing payload items beyond the field values (str lists only)."""
        return []

    def payload(self, name: str, obj: Any) -> list[Any]:
        return [name, self.values(obj), *self.extras(obj)]

    def build(self, values: dict[str, Any], extras: list[Any]) -> Any:
        return self.cls(**values)


class DataclassRecord(Record):
    """Fields with ``init=False`` are set after construction, overriding ``__post_init__``."""

    __slots__ = ("late",)

    def __init__(self, cls: type):
        fields = dataclasses.fields(cls)
        super().__init__(cls, tuple(f.name for f in fields))
        self.late = frozenset(f.name for f in fields if not f.init)

    def build(self, values: dict[str, Any], extras: list[Any]) -> Any:
        if not self.late:
            return self.cls(**values)
        obj = self.cls(**{k: v for k, v in values.items() if k not in self.late})
        for key in self.late.intersection(values):
            object.__setattr__(obj, key, values[key])  # works for frozen and slots dataclasses
        return obj


class PydanticRecord(Record):
    """Extra fields (``extra='allow'``) are stored with the others; which were set is kept."""

    __slots__ = ()

    def values(self, obj: Any) -> dict[str, Any]:
        values = {name: getattr(obj, name) for name in self.fields}
        extra = obj.__pydantic_extra__
        if extra:
            values.update(extra)
        return values

    def extras(self, obj: Any) -> list[Any]:
        return [sorted(obj.model_fields_set)]

    def build(self, values: dict[str, Any], extras: list[Any]) -> Any:
        fields_set = None
        if extras:
            (names,) = extras
            if type(names) is not list or not all(type(n) is str for n in names):
                raise TypeError("bad fields-set list")
            fields_set = set(names)
        return self.cls.model_construct(_fields_set=fields_set, **values)  # type: ignore[attr-defined]


class EnumKind:
    """Marker for registered Enum classes (stored as ``[name, member.value]``)."""

    __slots__ = ("cls",)

    def __init__(self, cls: type):
        self.cls = cls


_cache: dict[type, Record | EnumKind | None] = {}


def describe(cls: type) -> Record | EnumKind | None:
    """How to store ``cls``; ``None`` if it is of no kind the codec can store."""
    try:
        return _cache[cls]
    except KeyError:
        found = _cache[cls] = _describe(cls)
        return found


def _describe(cls: type) -> Record | EnumKind | None:
    if issubclass(cls, Enum):
        return EnumKind(cls)
    if dataclasses.is_dataclass(cls):
        return DataclassRecord(cls)
    if is_pydantic(cls):
        return PydanticRecord(cls, tuple(cls.model_fields))  # type: ignore[attr-defined]
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return Record(cls, cls._fields)  # type: ignore[attr-defined]
    return None


def is_pydantic(cls: type) -> bool:
    """Without importing pydantic: if it was never imported, no class can be a model."""
    pydantic = sys.modules.get("pydantic")
    base = getattr(pydantic, "BaseModel", None)
    return base is not None and issubclass(cls, base)


def set_kind(cls: type, kind: Record) -> None:
    """Store ``cls`` with ``kind`` rather than the kind ``describe`` would work out."""
    _cache[cls] = kind
