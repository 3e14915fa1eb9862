"""The types the round-trip tests save, and ``same``: equal and of the same type all the way
down.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, fields, is_dataclass
from datetime import datetime, time
from decimal import Decimal
from typing import Any, NamedTuple
from zoneinfo import ZoneInfo

import pydantic

from threadline import serde

# -- registered test types -----------------------------------------------------------------------


@serde.register
class Color(enum.Enum):
    RED = "red"
    GREEN = (0, 255, 0)


@serde.register
class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


@serde.register
class Role(enum.StrEnum):
    USER = "user"
    AI = "ai"


@serde.register
@dataclass
class Point:
    x: int
    y: int = 0


@serde.register
@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    payload: Any = None
    tags: tuple[str, ...] = ()


@serde.register
class Pair(NamedTuple):
    left: Any
    right: Any = None


@serde.register
class Model(pydantic.BaseModel):
    name: str
    count: int = 0
    when: datetime | None = None
    data: Any = None


# -- helpers -------------------------------------------------------------------------------------


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same type all the way down (NaN equals NaN, -0.0 differs from 0.0)."""
    if type(a) is not type(b):
        return False
    if type(a) is float:
        if math.isnan(a):
            return math.isnan(b)
        return a == b and math.copysign(1, a) == math.copysign(1, b)
    if isinstance(a, list | tuple):  # NamedTuples too
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if type(a) is dict:
        return len(a) == len(b) and all(
            same(ka, kb) and same(va, vb)
            for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True)
        )
    if type(a) in (set, frozenset):
        return a == b and sorted(map(repr, map(type, a))) == sorted(map(repr, map(type, b)))
    if type(a) in (datetime, time):
        return _same_clock(a, b)
    if is_dataclass(a):
        return all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a))
    if isinstance(a, pydantic.BaseModel):
        return (
            same(dict(a), dict(b))
            and a.model_fields_set == b.model_fields_set
            and a.model_extra == b.model_extra
        )
    if isinstance(a, Decimal) and a.is_nan():
        return str(a) == str(b)
    return bool(a == b)


def _same_clock(a: datetime | time, b: datetime | time) -> bool:
    if a.replace(tzinfo=None) != b.replace(tzinfo=None) or a.fold != b.fold:
        return False
    ta, tb = a.tzinfo, b.tzinfo
    if type(ta) is not type(tb):
        return False
    if isinstance(ta, ZoneInfo):
        return ta.key == tb.key  # type: ignore[union-attr]
    return ta is None or (ta == tb and ta.tzname(None) == tb.tzname(None))  # type: ignore[union-attr]


def roundtrip(value: Any, ser: serde.Serializer | None = None) -> Any:
    ser = ser or serde.Serializer()
    data = ser.dumps(value)
    assert isinstance(data, bytes)
    return ser.loads(data)


def check(value: Any) -> None:
    loaded = roundtrip(value)
    assert same(value, loaded), (value, loaded)


# -- a zone with daylight saving time ------------------------------------------------------------

NEW_YORK = ZoneInfo("America/New_York")
