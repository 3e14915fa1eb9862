"""Every supported type loads back equal and of the same type."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any, NamedTuple
from uuid import UUID, uuid4
from zoneinfo import ZoneInfo

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from threadline import Interrupt, Send, serde
from threadline.checkpoint.base import Checkpoint, PlannedTask, TaskWrite

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
class Perm(enum.Flag):
    R = 1
    W = 2
    X = 4


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
@dataclass
class Derived:
    """``total`` is computed by ``__post_init__``; ``note`` is set by hand after construction."""

    items: list[int]
    total: int = field(init=False)
    note: str = field(init=False, default="")

    def __post_init__(self) -> None:
        self.total = sum(self.items)


@serde.register
@dataclass(frozen=True, slots=True, kw_only=True)
class FrozenDerived:
    base: int
    doubled: int = field(init=False)
    extra: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "doubled", self.base * 2)


@serde.register(name="tests.Outer")
@dataclass
class Outer:
    point: Point
    message: Message
    history: list[Message] = field(default_factory=list)


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


@serde.register
class Loose(pydantic.BaseModel):
    model_config = pydantic.ConfigDict(extra="allow")
    key: str = pydantic.Field(alias="Key", default="k")


@serde.register
class Doubling(pydantic.BaseModel):
    """A validator that is not idempotent: loading must not run it again."""

    value: int

    @pydantic.field_validator("value")
    @classmethod
    def _double(cls, v: int) -> int:
        return v * 2


@serde.register
class Wrapper(pydantic.BaseModel):
    inner: Model
    items: list[Model] = []
    point: Point | None = None


@serde.register
class Numbers(pydantic.RootModel[list[int]]):
    pass


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


# -- dates and times ------------------------------------------------------------------------------

NEW_YORK = ZoneInfo("America/New_York")


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


# -- registered classes --------------------------------------------------------------------------


def test_dataclass_with_defaults() -> None:
    check(Point(1))
    check(Point(1, 2))


def test_frozen_slots_dataclass() -> None:
    msg = Message(Role.USER, "hi", payload={"k": (1, 2)}, tags=("a",))
    loaded = roundtrip(msg)
    assert loaded == msg
    assert type(loaded.role) is Role and type(loaded.tags) is tuple
    assert type(loaded.payload["k"]) is tuple


def test_nested_dataclasses() -> None:
    outer = Outer(
        point=Point(1, 2),
        message=Message(Role.AI, "x", payload=Point(3)),
        history=[Message(Role.USER, str(i), payload={i: bytearray(b"b")}) for i in range(3)],
    )
    check(outer)


def test_init_false_fields_are_restored() -> None:
    value = Derived([1, 2, 3])
    value.note = "set by hand"
    value.total = 100  # diverges from what __post_init__ would compute
    loaded = roundtrip(value)
    assert (loaded.items, loaded.total, loaded.note) == ([1, 2, 3], 100, "set by hand")


def test_frozen_kw_only_dataclass_with_init_false() -> None:
    value = FrozenDerived(base=21, extra={"a": (1,)})
    loaded = roundtrip(value)
    assert loaded == value
    assert loaded.doubled == 42


def test_namedtuple() -> None:
    check(Pair(1, (2, 3)))
    check([Pair("a"), Pair(Pair(1, 2), {3})])


def test_pydantic_model() -> None:
    when = datetime(2024, 1, 1, tzinfo=NEW_YORK)
    check(Model(name="a", count=3, when=when, data={"t": (1, 2), "s": {3}}))
    check(Model(name="only name"))


def test_pydantic_keeps_fields_set() -> None:
    loaded = roundtrip(Model(name="a"))
    assert loaded.model_fields_set == {"name"}
    assert loaded.model_dump(exclude_unset=True) == {"name": "a"}


def test_pydantic_extra_and_alias() -> None:
    value = Loose(Key="v", other=(1, 2), more=Point(1))
    loaded = roundtrip(value)
    assert same(value, loaded)
    assert loaded.model_extra == {"other": (1, 2), "more": Point(1)}


def test_pydantic_validators_do_not_run_again() -> None:
    value = Doubling(value=2)
    assert value.value == 4
    assert roundtrip(value).value == 4


def test_nested_pydantic_and_dataclass() -> None:
    value = Wrapper(inner=Model(name="i"), items=[Model(name="j", data=b"x")], point=Point(5))
    check(value)
    assert type(roundtrip(value).items[0]) is Model


def test_pydantic_root_model() -> None:
    check(Numbers([1, 2, 3]))


def test_threadline_types() -> None:
    cp = Checkpoint(
        id="c1",
        parent_id=None,
        step=3,
        values={"messages": [Message(Role.USER, "hi")], "count": 1},
        versions={"messages": 2},
        next=(PlannedTask("node", arg=Send("x", {"a": 1}), send=True),),
        created_at="2024-01-01T00:00:00+00:00",
        barriers={"join": ("a", "b")},
        updated_by=("a",),
    )
    check(cp)
    check(Interrupt(value={"question": "ok?"}, id="i1"))
    check(TaskWrite(task_id="t", task_name="n", kind="result", value=(("k", 1),)))


def test_module_level_functions_use_a_default_serializer() -> None:
    value = {"a": (1, 2), "b": Point(1)}
    assert serde.loads(serde.dumps(value)) == value
    assert serde.dumps(value) == serde.Serializer().dumps(value)


def test_loads_accepts_bytes_like() -> None:
    data = serde.dumps({"a": (1,)})
    assert serde.loads(bytearray(data)) == {"a": (1,)}
    assert serde.loads(memoryview(data)) == {"a": (1,)}


def test_large_values_round_trip() -> None:
    value = {"text": "x" * 200_000, "items": [Message(Role.USER, str(i)) for i in range(2000)]}
    assert roundtrip(value) == value


# -- property test -------------------------------------------------------------------------------

_offsets = st.timedeltas(min_value=-timedelta(hours=23, minutes=59), max_value=timedelta(hours=23))
_tzs = st.none() | st.just(UTC) | st.builds(timezone, _offsets) | st.timezones()

hashables = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.dates()
    | st.uuids()
    | st.sampled_from(list(Color) + list(Level) + list(Role)),
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3),
    max_leaves=6,
)

leaves = (
    hashables
    | st.floats()
    | st.binary(max_size=16).map(bytearray)
    | st.datetimes(timezones=_tzs)
    | st.times(timezones=st.none() | st.builds(timezone, _offsets))
    | st.timedeltas()
    | st.decimals(allow_nan=False)
)


def _containers(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(max_size=6), inner, max_size=4)
        | st.dictionaries(hashables, inner, max_size=3)
        | st.sets(hashables, max_size=3)
        | st.frozensets(hashables, max_size=3)
        | st.builds(Message, st.sampled_from(Role), st.text(max_size=5), inner)
        | st.builds(Point, st.integers(), st.integers())
        | st.builds(Pair, inner, inner)
        | st.builds(Model, name=st.text(max_size=5), data=inner)
    )


values = st.recursive(leaves, _containers, max_leaves=25)


@settings(
    max_examples=300, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values)
def test_property_round_trip(value: Any) -> None:
    check(value)


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values)
def test_property_fast_and_slow_paths_agree(value: Any) -> None:
    """The Python re-encoder must write exactly what the single ormsgpack call writes."""
    ser = serde.Serializer()
    assert ser.dumps(value)[2:] == ser._dumps_slow(value, "")


_KEY = bytes(range(32))


@settings(
    max_examples=200, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(values, st.sampled_from([0, 64]))
def test_property_round_trip_compressed_and_encrypted(value: Any, threshold: int) -> None:
    ser = serde.Serializer(compress_threshold=threshold, encryption_key=_KEY, key_id="k")
    loaded = roundtrip(value, ser)
    assert same(value, loaded), (value, loaded)
    assert same(value, ser.loads(serde.dumps(value)))  # plain blobs stay readable
