"""The on-disk layout is stable: header, ext codes and payloads, whichever encoder path ran."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import ormsgpack
import pydantic
import pytest

from threadline import serde
from threadline.serde import wire as fmt

HEADER = bytes([1, 0])


@serde.register(name="tests.format.Row")
@dataclass(frozen=True, slots=True)
class Row:
    id: int
    data: Any = None


@serde.register(name="tests.format.Doc")
class Doc(pydantic.BaseModel):
    body: Any = None


def body(value: Any) -> bytes:
    return serde.dumps(value)[2:]


def test_header_is_version_then_flags() -> None:
    data = serde.dumps({"a": 1})
    assert data[:2] == HEADER
    assert data[2:] == ormsgpack.packb({"a": 1})


def test_plain_values_are_plain_msgpack() -> None:
    value = {"s": "x", "i": -5, "f": 1.5, "b": b"raw", "n": None, "l": [True, False]}
    assert body(value) == ormsgpack.packb(value)


@pytest.mark.parametrize(
    ("value", "code", "payload"),
    [
        ((1, "a"), fmt.EXT_TUPLE, ormsgpack.packb([1, "a"])),
        ({1}, fmt.EXT_SET, ormsgpack.packb([1])),
        (frozenset({1}), fmt.EXT_FROZENSET, ormsgpack.packb([1])),
        (bytearray(b"ab"), fmt.EXT_BYTEARRAY, b"ab"),
        (2**64, fmt.EXT_BIGINT, (2**64).to_bytes(9, "big", signed=True)),
        (-(2**64), fmt.EXT_BIGINT, (-(2**64)).to_bytes(9, "big", signed=True)),
        ({1: "a"}, fmt.EXT_DICT, ormsgpack.packb([1, "a"])),
        (Row(1), fmt.EXT_RECORD, ormsgpack.packb(["tests.format.Row", {"id": 1, "data": None}])),
        (
            Doc(body="x"),
            fmt.EXT_RECORD,
            ormsgpack.packb(["tests.format.Doc", {"body": "x"}, ["body"]]),
        ),
        (
            datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=UTC),
            fmt.EXT_DATETIME,
            ormsgpack.packb([2024, 1, 2, 3, 4, 5, 6, 0, 0]),
        ),
    ],
    ids=repr,
)
def test_ext_layout(value: Any, code: int, payload: bytes) -> None:
    assert body(value) == ormsgpack.packb(ormsgpack.Ext(code, payload))


def test_big_int_boundaries_stay_native() -> None:
    for n in (2**64 - 1, -(2**63)):
        assert body(n) == ormsgpack.packb(n)
    for n in (2**64, -(2**63) - 1):
        assert body(n)[0] in (0xC7, 0xD4, 0xD5, 0xD6, 0xD7, 0xD8)  # an ext


@pytest.mark.parametrize(
    "value",
    [
        {"a": bytearray(b"x")},
        [b"bytes", bytearray(b"array")],
        {"row": Row(1, data=bytearray(b"x"))},
        {"row": Row(1, data={"deep": [(bytearray(b"x"),)]})},
        {"doc": Doc(body=bytearray(b"x"))},
        {"float": 1.1, "ba": bytearray(b"\xc4")},
    ],
    ids=repr,
)
def test_bytearray_is_never_flattened_to_bytes(value: Any) -> None:
    loaded = serde.loads(serde.dumps(value))
    assert loaded == value
    assert repr(loaded) == repr(value)  # bytes == bytearray, but their reprs differ


def test_bytes_are_not_mistaken_for_bytearray() -> None:
    value = {"b": b"\xc4\xc5\xc6", "row": Row(1, b"x"), "t": (b"y",)}
    loaded = serde.loads(serde.dumps(value))
    assert loaded == value
    assert type(loaded["b"]) is bytes
    assert type(loaded["row"].data) is bytes


@pytest.mark.parametrize(
    "value",
    [
        {"t": (1, 2), "r": Row(1, {"s": {1, 2}}), "d": Doc(body=[datetime(2024, 1, 1)])},
        [Row(i, (i,)) for i in range(5)],
        {"x": 10**40, "y": frozenset({(1, 2)})},
    ],
    ids=repr,
)
def test_python_encoder_writes_what_the_fast_path_writes(value: Any) -> None:
    """Values with non-str keys or bytearrays are re-encoded in Python: same bytes, same format."""
    ser = serde.Serializer()
    assert ser._dumps_slow(value, "") == body(value)
