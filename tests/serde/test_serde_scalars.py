"""Scalars, containers, dates and times, UUIDs, decimals and enums load back equal and of the
same type.
"""

from __future__ import annotations

import enum
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pytest
from serde_types import (
    NEW_YORK,
    Color,
    Level,
    Role,
    check,
    roundtrip,
    same,
)

from threadline import serde


@serde.register
class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


# -- scalars and containers ---------------------------------------------------------------------

SCALARS = [
    None,
    True,
    False,
    0,
    -1,
    2**63 - 1,
    -(2**63),
    2**64 - 1,
    2**64,
    -(2**63) - 1,
    10**100,
    -(10**100),
    0.0,
    -0.0,
    1.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    "",
    "héllo ✓ 漢字 zażółć",
    b"",
    b"\x00\xc4\xff",
    bytearray(b""),
    bytearray(b"\x00\xc4abc"),
]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
def test_scalars(value: Any) -> None:
    check(value)


@pytest.mark.parametrize(
    "value",
    [
        [],
        (),
        set(),
        frozenset(),
        {},
        [1, "a", None, [2, (3,)]],
        (1, (2, (3, [4, (5,)]))),
        {1, "a", (1, 2), frozenset({3})},
        frozenset({1, 2, (3, "x")}),
        {"a": 1, "b": [1, 2], "c": {"d": (1, 2)}},
        [(1, 2), {3, 4}, frozenset({5}), bytearray(b"z")],
        {"blob": bytearray(b"abc"), "nested": [[bytearray(b"")]], "t": (bytearray(b"1"),)},
    ],
    ids=repr,
)
def test_containers(value: Any) -> None:
    check(value)


@pytest.mark.parametrize(
    "value",
    [
        {1: "a", 2: "b"},
        {(1, 2): "tuple key", (3, (4,)): "nested tuple key"},
        {None: 1, True: 2, 1.5: 3, b"k": 4, "s": 5},
        {frozenset({1}): "fs", date(2024, 1, 2): "date", UUID(int=7): "uuid"},
        {Role.USER: "enum key", Level.LOW: "int enum key", Color.RED: "enum"},
        {"outer": {1: {2: {(3,): [bytearray(b"x")]}}}},
        {10**30: "big key", Decimal("1.5"): "dec", timedelta(1): "td"},
    ],
    ids=repr,
)
def test_dicts_with_non_str_keys(value: Any) -> None:
    check(value)


def test_dict_order_is_kept() -> None:
    value = {"z": 1, "a": 2, 3: "x", "m": 4}
    assert list(roundtrip(value)) == ["z", "a", 3, "m"]


@pytest.mark.parametrize(
    "value",
    [
        datetime(2024, 5, 6, 7, 8, 9, 123456),
        datetime.min,
        datetime.max,
        datetime(2024, 5, 6, 7, 8, 9, tzinfo=UTC),
        datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        datetime(2024, 5, 6, tzinfo=timezone(-timedelta(hours=3, seconds=7, microseconds=11))),
        datetime(2024, 5, 6, tzinfo=timezone(timedelta(hours=2), "CEST")),
        datetime(2024, 7, 1, 12, tzinfo=NEW_YORK),
        datetime(2024, 11, 3, 1, 30, tzinfo=NEW_YORK),
        datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK),
        datetime(2024, 1, 1, tzinfo=ZoneInfo("Asia/Kolkata")),
        date(2024, 2, 29),
        date.min,
        date.max,
        time(),
        time(23, 59, 59, 999999),
        time(1, 2, 3, 4, tzinfo=timezone(timedelta(hours=-8))),
        time(1, 2, 3, tzinfo=NEW_YORK),
        time(1, 2, fold=1),
        timedelta(),
        timedelta(days=-1, microseconds=5),
        timedelta(days=999999999, hours=23, microseconds=999999),
        timedelta.min,
    ],
    ids=repr,
)
def test_dates_and_times(value: Any) -> None:
    check(value)


def test_utc_loads_as_the_utc_singleton() -> None:
    assert roundtrip(datetime(2024, 1, 1, tzinfo=UTC)).tzinfo is UTC


def test_zoneinfo_keeps_its_zone() -> None:
    loaded = roundtrip(datetime(2024, 11, 3, 1, 30, fold=1, tzinfo=NEW_YORK))
    assert loaded.tzinfo is NEW_YORK  # ZoneInfo caches instances by key
    assert loaded.utcoffset() == timedelta(hours=-5)


def test_foreign_tzinfo_becomes_a_fixed_offset() -> None:
    class Plus3(timezone.__base__):  # type: ignore[name-defined,misc]
        def utcoffset(self, dt: datetime | None) -> timedelta:
            return timedelta(hours=3)

        def tzname(self, dt: datetime | None) -> str:
            return "P3"

        def dst(self, dt: datetime | None) -> timedelta:
            return timedelta(0)

    value = datetime(2024, 1, 1, 12, tzinfo=Plus3())
    loaded = roundtrip(value)
    assert loaded == value
    assert loaded.tzinfo == timezone(timedelta(hours=3))


# -- other stdlib values -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        uuid4(),
        UUID(int=0),
        Decimal("1.10"),
        Decimal("-0"),
        Decimal("1E+999999"),
        Decimal("Infinity"),
        Decimal("-Infinity"),
        Decimal("NaN"),
        Decimal("sNaN"),
        Decimal("3.14159265358979323846264338327950288419716939937510"),
    ],
    ids=repr,
)
def test_uuid_and_decimal(value: Any) -> None:
    check(value)


def test_decimal_keeps_its_exponent() -> None:
    assert str(roundtrip(Decimal("1.100"))) == "1.100"


# -- enums ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        Color.RED,
        Color.GREEN,
        Level.HIGH,
        Role.AI,
        Perm.R,
        Perm.R | Perm.W,
        Perm(0),
        [Role.USER, (Level.LOW, {Color.RED})],
    ],
    ids=repr,
)
def test_enums(value: Any) -> None:
    loaded = roundtrip(value)
    assert same(value, loaded)
    if isinstance(value, enum.Enum):
        assert loaded is value
