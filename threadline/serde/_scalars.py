"""Ext encoders and decoders for the standard-library leaf types msgpack would flatten.

Decoders only call the constructors of these stdlib types. A malformed payload makes them raise
an ordinary exception, which the codec reports as a ``SerializationError``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone, tzinfo
from decimal import Decimal
from typing import Any
from uuid import UUID
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import ormsgpack

from threadline.errors import SerializationError
from threadline.serde import wire as fmt

Ext = ormsgpack.Ext
_packb = ormsgpack.packb
_unpackb = ormsgpack.unpackb
_US = timedelta(microseconds=1)

# An IANA key: no dots, no leading slash, so it cannot name a path outside the tz database.
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")


# -- timezones -------------------------------------------------------------------------------


def _tz_encode(value: datetime | time) -> Any:
    """The tz field of a datetime/time (see ``wire``); foreign tzinfos become fixed offsets."""
    tz = value.tzinfo
    if tz is None:
        return None
    if type(tz) is timezone:
        # (offset,) or (offset, name): keeps a name given explicitly; typeshed lacks the method
        args = tz.__getinitargs__()  # type: ignore[attr-defined]
        micros = _micros(args[0])
        return micros if len(args) == 1 else [micros, args[1]]
    if type(tz) is ZoneInfo and tz.key is not None:
        return tz.key
    offset = value.utcoffset()
    return None if offset is None else _micros(offset)


def _micros(delta: timedelta) -> int:
    return (delta.days * 86400 + delta.seconds) * 1_000_000 + delta.microseconds


def _tz_decode(raw: Any) -> tzinfo | None:
    if raw is None:
        return None
    if type(raw) is int:
        return timezone(raw * _US)
    if type(raw) is str:
        return _zone(raw)
    offset, name = raw
    if type(offset) is not int or type(name) is not str:
        raise ValueError(f"bad timezone {raw!r}")
    return timezone(offset * _US, name)


def _zone(key: str) -> ZoneInfo:
    """A ZoneInfo for a stored key, refusing anything that is not a plain IANA name."""
    if len(key) > 128 or _ZONE_KEY.fullmatch(key) is None:
        raise ValueError(f"bad time zone key {key!r}")
    try:
        return ZoneInfo(key)
    except ZoneInfoNotFoundError:
        raise SerializationError(
            f"time zone {key!r} is not available on this machine; install the tz database "
            "(e.g. `pip install tzdata`) to load this value",
            type_name="zoneinfo.ZoneInfo",
        ) from None


# -- encoders: value -> Ext ------------------------------------------------------------------


def encode_bigint(value: int) -> ormsgpack.Ext:
    size = (value + (value < 0)).bit_length() // 8 + 1
    return Ext(fmt.EXT_BIGINT, value.to_bytes(size, "big", signed=True))


def encode_datetime(v: datetime) -> ormsgpack.Ext:
    fields = [v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond, v.fold]
    fields.append(_tz_encode(v))
    return Ext(fmt.EXT_DATETIME, _packb(fields))


def encode_date(v: date) -> ormsgpack.Ext:
    return Ext(fmt.EXT_DATE, _packb([v.year, v.month, v.day]))


def encode_time(v: time) -> ormsgpack.Ext:
    fields = [v.hour, v.minute, v.second, v.microsecond, v.fold, _tz_encode(v)]
    return Ext(fmt.EXT_TIME, _packb(fields))


def encode_timedelta(v: timedelta) -> ormsgpack.Ext:
    return Ext(fmt.EXT_TIMEDELTA, _packb([v.days, v.seconds, v.microseconds]))


def encode_uuid(v: UUID) -> ormsgpack.Ext:
    return Ext(fmt.EXT_UUID, v.bytes)


def encode_decimal(v: Decimal) -> ormsgpack.Ext:
    return Ext(fmt.EXT_DECIMAL, str(v).encode("ascii"))


def encode_bytearray(v: bytearray) -> ormsgpack.Ext:
    return Ext(fmt.EXT_BYTEARRAY, bytes(v))


# Exact types only: a subclass (pendulum.DateTime, a str subclass...) is not silently flattened.
ENCODERS: dict[type, Callable[[Any], ormsgpack.Ext]] = {
    int: encode_bigint,  # ormsgpack hands over only ints outside the 64-bit range
    datetime: encode_datetime,
    date: encode_date,
    time: encode_time,
    timedelta: encode_timedelta,
    UUID: encode_uuid,
    Decimal: encode_decimal,
    bytearray: encode_bytearray,
}


# -- decoders: payload bytes -> value --------------------------------------------------------


def decode_bigint(payload: bytes) -> int:
    if not payload:
        raise ValueError("empty big int")
    return int.from_bytes(payload, "big", signed=True)


def decode_datetime(payload: bytes) -> datetime:
    y, mo, d, h, mi, s, us, fold, tz = _unpackb(payload)
    return datetime(y, mo, d, h, mi, s, us, tzinfo=_tz_decode(tz), fold=fold)


def decode_date(payload: bytes) -> date:
    y, m, d = _unpackb(payload)
    return date(y, m, d)


def decode_time(payload: bytes) -> time:
    h, mi, s, us, fold, tz = _unpackb(payload)
    return time(h, mi, s, us, tzinfo=_tz_decode(tz), fold=fold)


def decode_timedelta(payload: bytes) -> timedelta:
    days, seconds, microseconds = _unpackb(payload)
    return timedelta(days=_int(days), seconds=_int(seconds), microseconds=_int(microseconds))


def decode_uuid(payload: bytes) -> UUID:
    return UUID(bytes=payload)


def decode_decimal(payload: bytes) -> Decimal:
    return Decimal(payload.decode("ascii"))


def _int(value: Any) -> int:
    if type(value) is not int:
        raise TypeError(f"expected an int, got {type(value).__name__}")
    return value


DECODERS: dict[int, Callable[[bytes], Any]] = {
    fmt.EXT_BIGINT: decode_bigint,
    fmt.EXT_DATETIME: decode_datetime,
    fmt.EXT_DATE: decode_date,
    fmt.EXT_TIME: decode_time,
    fmt.EXT_TIMEDELTA: decode_timedelta,
    fmt.EXT_UUID: decode_uuid,
    fmt.EXT_DECIMAL: decode_decimal,
    fmt.EXT_BYTEARRAY: bytearray,
}
