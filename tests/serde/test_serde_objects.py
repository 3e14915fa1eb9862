"""Dataclasses, named tuples, pydantic models and threadline's own types load back equal and of
the same type.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pydantic
from serde_types import (
    NEW_YORK,
    Message,
    Model,
    Pair,
    Point,
    Role,
    check,
    roundtrip,
    same,
)

from threadline import Interrupt, Send, serde
from threadline.checkpoint.base import Checkpoint, PlannedTask, TaskWrite


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
