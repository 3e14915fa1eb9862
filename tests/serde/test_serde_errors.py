"""Errors: values that cannot be stored, and blobs that cannot (or must not) be loaded."""

from __future__ import annotations

import contextlib
import enum
import os
import pickle
import subprocess
import sys
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import ormsgpack
import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from threadline import serde
from threadline.errors import SerializationError
from threadline.serde import wire as fmt

HEADER = bytes([fmt.FORMAT_VERSION, 0])


class Opaque:
    """A plain class nobody registered."""

    def __repr__(self) -> str:
        return "Opaque()"


@dataclass(frozen=True)
class Unregistered:
    x: int = 0


class UnregisteredEnum(enum.Enum):
    A = 1


class UnregisteredModel(pydantic.BaseModel):
    x: int = 0


@serde.register
@dataclass
class Msg:
    role: str
    payload: Any = None


@serde.register
class Envelope(pydantic.BaseModel):
    data: Any = None


@serde.register
class Shade(enum.Enum):
    DARK = "dark"


class NotStorable:
    """Neither a dataclass, a pydantic model, a NamedTuple nor an Enum."""


OPAQUE = f"{__name__}.Opaque"


def fail(value: Any, **kwargs: Any) -> SerializationError:
    with pytest.raises(SerializationError) as info:
        serde.dumps(value, **kwargs)
    return info.value


# -- dumps: path, type and fix -----------------------------------------------------------------


def test_unregistered_object_deep_in_state_names_path_type_and_fix() -> None:
    state = {"messages": [Msg("user"), Msg("ai"), Msg("user"), Msg("tool", payload=Opaque())]}
    err = fail(state)
    assert err.path == "messages[3].payload"
    assert err.type_name == OPAQUE
    message = str(err)
    assert "messages[3].payload" in message
    assert OPAQUE in message
    assert "threadline.serde.register(Opaque)" in message


def test_path_prefix_names_the_state_key() -> None:
    err = fail([Msg("a"), Msg("b"), Msg("c"), Msg("d", Opaque())], path_prefix="messages")
    assert err.path == "messages[3].payload"
    err = fail(Opaque(), path_prefix="messages")
    assert err.path == "messages"


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"a": {"payload": Opaque()}}, "a.payload"),
        ({"a": [1, (2, Opaque())]}, "a[1][1]"),
        ({"scores": {1: Opaque()}}, "scores[1]"),
        ({"scores": {(1, "x"): [Opaque()]}}, "scores[(1, 'x')][0]"),
        ({"odd key": Opaque()}, "['odd key']"),
        ({"a": {"odd key": Opaque()}}, "a['odd key']"),
        ({"env": Envelope(data={"k": Opaque()})}, "env.data.k"),
        ([Msg("x", Msg("y", Opaque()))], "[0].payload.payload"),
        ((1, Opaque()), "[1]"),
        ({"s": {Opaque()}}, "s{Opaque()}"),
        ({"d": {Opaque(): 1}}, "d[Opaque()]"),
        ({"m": {2: {"deep": [{3: Opaque()}]}}}, "m[2].deep[0][3]"),
    ],
)
def test_error_paths(value: Any, path: str) -> None:
    err = fail(value)
    assert err.path == path
    assert err.type_name == OPAQUE
    assert path in str(err)


def test_top_level_value() -> None:
    err = fail(Opaque())
    assert err.path == ""
    assert "top-level" in str(err)


def test_unsupported_dict_key_says_it_is_a_key() -> None:
    assert "dict key at d[Opaque()]" in str(fail({"d": {Opaque(): 1}}))


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (Unregistered(), f"{__name__}.Unregistered"),
        (UnregisteredEnum.A, f"{__name__}.UnregisteredEnum"),
        (UnregisteredModel(), f"{__name__}.UnregisteredModel"),
    ],
)
def test_unregistered_registrable_types_say_register(value: Any, type_name: str) -> None:
    err = fail({"k": [value]})
    assert err.path == "k[0]"
    assert err.type_name == type_name
    assert f"threadline.serde.register({type(value).__qualname__})" in str(err)


def test_registering_an_unstorable_class_fails_at_once() -> None:
    with pytest.raises(TypeError, match="dataclass, pydantic model, NamedTuple or Enum"):
        serde.register(NotStorable)
    assert serde.name_of(NotStorable) is None
    assert "register" in str(fail({"k": NotStorable()}))


@pytest.mark.parametrize(
    ("value", "hint"),
    [
        (OrderedDict(a=1), "plain dict"),
        (type("MyStr", (str,), {})("x"), "plain str"),
        (memoryview(b"x"), "bytes(view)"),
        (object(), "register"),
        (len, "register"),
    ],
)
def test_other_unsupported_values(value: Any, hint: str) -> None:
    err = fail({"v": value})
    assert err.path == "v"
    assert hint in str(err)


def test_str_subclass_key_is_not_flattened() -> None:
    err = fail({type("MyStr", (str,), {})("x"): 1})
    assert "dict key" in str(err)


def test_reference_cycle_is_an_error() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    with pytest.raises(SerializationError, match="reference cycle"):
        serde.dumps({"c": cycle})


def test_nesting_limit_is_an_error() -> None:
    value: Any = 1
    for _ in range(300):
        value = [value]
    with pytest.raises(SerializationError, match="255 levels"):
        serde.dumps(value, path_prefix="deep")


def test_unencodable_str_is_a_serialization_error() -> None:
    with pytest.raises(SerializationError):
        serde.dumps({"s": "\ud800"})


# -- loads: damaged data -------------------------------------------------------------------------

GOOD = serde.dumps(
    {"a": [1, (2, 3)], "b": Msg("x", {1: bytearray(b"z")}), "c": {"k": Shade.DARK}, "d": 10**30}
)


@pytest.mark.parametrize("data", [b"", b"\x01", HEADER, HEADER + b"\xc1"])
def test_empty_or_tiny_data(data: bytes) -> None:
    with pytest.raises(SerializationError):
        serde.loads(data)


def test_every_truncation_is_a_serialization_error() -> None:
    for end in range(len(GOOD)):
        with pytest.raises(SerializationError):
            serde.loads(GOOD[:end])


def test_not_bytes() -> None:
    for data in (None, "abc", 12, {"a": 1}):
        with pytest.raises(SerializationError):
            serde.loads(data)  # type: ignore[arg-type]


def test_newer_format_version() -> None:
    with pytest.raises(SerializationError, match="newer threadline"):
        serde.loads(bytes([fmt.FORMAT_VERSION + 1, 0]) + GOOD[2:])


def test_unknown_flags() -> None:
    for flag in (0x04, 0x80, fmt.FLAG_ZSTD | 0x40, 0xFF):
        with pytest.raises(SerializationError, match="cannot read"):
            serde.loads(bytes([fmt.FORMAT_VERSION, flag]) + GOOD[2:])


def test_known_flags_on_a_plain_body_are_refused() -> None:
    """A plain body under a compression/encryption flag is damage, not something to guess at."""
    for flag in (fmt.FLAG_ZSTD, fmt.FLAG_AES_GCM, fmt.FLAG_ZSTD | fmt.FLAG_AES_GCM):
        with pytest.raises(SerializationError, match="header is corrupted"):
            serde.loads(bytes([fmt.FORMAT_VERSION, flag]) + GOOD[2:])


def test_version_zero_is_not_ours() -> None:
    with pytest.raises(SerializationError, match="not threadline serde data"):
        serde.loads(b"\x00\x00" + GOOD[2:])


def test_unknown_ext_code() -> None:
    with pytest.raises(SerializationError, match="unknown ext code 77"):
        serde.loads(HEADER + ormsgpack.packb([ormsgpack.Ext(77, b"")]))


def _record(name: str, fields: dict[str, Any]) -> bytes:
    payload = ormsgpack.packb([name, fields])
    return HEADER + ormsgpack.packb({"v": [ormsgpack.Ext(fmt.EXT_RECORD, payload)]})


def test_unknown_type_name_at_load() -> None:
    with pytest.raises(SerializationError) as info:
        serde.loads(_record("billing.Invoice", {"total": 3}))
    assert info.value.type_name == "billing.Invoice"
    assert "billing.Invoice" in str(info.value)
    assert "register" in str(info.value)


def test_type_name_of_a_different_kind() -> None:
    with pytest.raises(SerializationError, match="different kind"):
        serde.loads(_record(serde.name_of(Shade) or "", {"value": "dark"}))


def test_stored_field_the_class_no_longer_has() -> None:
    with pytest.raises(SerializationError, match="cannot rebuild"):
        serde.loads(_record(serde.name_of(Msg) or "", {"role": "x", "gone": 1}))


def test_missing_field_takes_its_default() -> None:
    assert serde.loads(_record(serde.name_of(Msg) or "", {"role": "x"})) == {"v": [Msg("x")]}


def test_enum_value_that_no_longer_exists() -> None:
    payload = ormsgpack.packb([serde.name_of(Shade), "light"])
    with pytest.raises(SerializationError, match="cannot rebuild"):
        serde.loads(HEADER + ormsgpack.packb(ormsgpack.Ext(fmt.EXT_ENUM, payload)))


@pytest.mark.parametrize(
    ("code", "payload"),
    [
        (fmt.EXT_TUPLE, b"\xc1"),
        (fmt.EXT_TUPLE, ormsgpack.packb({"a": 1})),
        (fmt.EXT_DICT, ormsgpack.packb([1, 2, 3])),
        (fmt.EXT_DICT, ormsgpack.packb([[1], 2])),
        (fmt.EXT_SET, ormsgpack.packb([[1]])),
        (fmt.EXT_BIGINT, b""),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 13, 1, 0, 0, 0, 0, 0, None])),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 1, 1])),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 1, 1, 0, 0, 0, 0, 0, "../../etc/passwd"])),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 1, 1, 0, 0, 0, 0, 0, "/etc/localtime"])),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 1, 1, 0, 0, 0, 0, 0, "Nowhere/Atlantis"])),
        (fmt.EXT_DATETIME, ormsgpack.packb([2024, 1, 1, 0, 0, 0, 0, 0, 10**12])),
        (fmt.EXT_DATE, ormsgpack.packb(["2024", 1, 1])),
        (fmt.EXT_TIMEDELTA, ormsgpack.packb([1.5, 0, 0])),
        (fmt.EXT_UUID, b"short"),
        (fmt.EXT_DECIMAL, b"not a number"),
        (fmt.EXT_DECIMAL, b"\xff"),
        (fmt.EXT_RECORD, ormsgpack.packb("just a string")),
        (fmt.EXT_RECORD, ormsgpack.packb([1, {}])),
        (fmt.EXT_RECORD, ormsgpack.packb(["x"])),
        (fmt.EXT_ENUM, ormsgpack.packb(["only one"])),
    ],
)
def test_malformed_ext_payloads(code: int, payload: bytes) -> None:
    with pytest.raises(SerializationError):
        serde.loads(HEADER + ormsgpack.packb({"k": ormsgpack.Ext(code, payload)}))


def test_deeply_nested_exts_do_not_crash() -> None:
    body = ormsgpack.packb([])
    for _ in range(5000):
        body = ormsgpack.packb([ormsgpack.Ext(fmt.EXT_TUPLE, body)])
    with pytest.raises(SerializationError):
        serde.loads(HEADER + body)


def test_an_earlier_error_does_not_leak_into_the_next() -> None:
    with pytest.raises(SerializationError, match=r"billing\.Invoice"):
        serde.loads(_record("billing.Invoice", {}))
    with pytest.raises(SerializationError) as info:
        serde.loads(GOOD[:-3])
    assert "billing.Invoice" not in str(info.value)
    assert serde.loads(GOOD)["d"] == 10**30


@settings(max_examples=500, deadline=None, database=None)
@given(st.binary(max_size=64))
def test_random_bytes(data: bytes) -> None:
    for blob in (data, HEADER + data):
        with contextlib.suppress(SerializationError):
            serde.loads(blob)


@settings(max_examples=500, deadline=None, database=None)
@given(st.integers(min_value=-128, max_value=127), st.binary(max_size=48))
def test_random_ext_payloads(code: int, payload: bytes) -> None:
    ext = b"\xc7" + bytes([len(payload)]) + code.to_bytes(1, "big", signed=True) + payload
    with contextlib.suppress(SerializationError):  # [ext] by hand: ormsgpack.Ext is 0..127
        serde.loads(HEADER + b"\x91" + ext)


@settings(max_examples=300, deadline=None, database=None)
@given(st.integers(min_value=2, max_value=len(GOOD) - 1), st.integers(0, 255))
def test_corrupted_bytes(index: int, byte: int) -> None:
    data = bytearray(GOOD)
    data[index] = byte
    with contextlib.suppress(SerializationError):
        serde.loads(bytes(data))


# -- pickle is opt-in ----------------------------------------------------------------------------


def test_pickle_requires_opt_in_on_both_sides() -> None:
    trusting = serde.Serializer(allow_pickle=True)
    value = {"x": [Opaque(), Unregistered(3)], "y": (1, 2)}
    data = trusting.dumps(value)
    loaded = trusting.loads(data)
    assert type(loaded["x"][0]) is Opaque
    assert loaded["x"][1] == Unregistered(3)
    assert loaded["y"] == (1, 2)
    with pytest.raises(SerializationError, match="refusing to unpickle"):
        serde.loads(data)
    with pytest.raises(SerializationError, match="refusing to unpickle"):
        serde.Serializer().loads(data)


def test_pickle_opt_in_still_encodes_supported_types_natively() -> None:
    trusting = serde.Serializer(allow_pickle=True)
    value = {"a": (1, {2}), "m": Msg("x")}
    assert trusting.dumps(value) == serde.dumps(value)
    assert serde.loads(trusting.dumps(value)) == value


def test_pickle_opt_in_reports_unpicklable_values() -> None:
    trusting = serde.Serializer(allow_pickle=True)
    with pytest.raises(SerializationError) as info:
        trusting.dumps({"f": [lambda: None]})
    assert info.value.path == "f[0]"
    assert "pickle" in str(info.value)


def test_serializer_api() -> None:
    assert serde.Serializer().allow_pickle is False
    assert serde.Serializer(allow_pickle=True).allow_pickle is True
    assert repr(serde.Serializer()) == "Serializer(allow_pickle=False)"


# -- loading never runs or imports anything named by the data -----------------------------------


class _Boom:
    def __reduce__(self) -> tuple[Any, ...]:
        return (os.system, ("echo pwned > pwned.txt",))


def test_malicious_pickle_is_never_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    payload = pickle.dumps(_Boom())  # would run `echo pwned > pwned.txt` if ever unpickled
    monkeypatch.chdir(tmp_path)
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    data = HEADER + ormsgpack.packb({"state": ormsgpack.Ext(fmt.EXT_PICKLE, payload)})
    with pytest.raises(SerializationError, match="refusing to unpickle"):
        serde.loads(data)
    assert calls == []
    assert not (tmp_path / "pwned.txt").exists()


@pytest.mark.parametrize(
    "name",
    [
        "os.system",
        "builtins.eval",
        "subprocess.Popen",
        "antigravity.fly",
        "this.s",
        "pickle.loads",
        "importlib.import_module",
        "threadline_serde_evil_module.Evil",
    ],
)
def test_type_names_in_data_are_never_imported_or_called(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(("system", a)))
    monkeypatch.setattr(subprocess, "Popen", lambda *a, **k: calls.append(("popen", a)))
    modules = set(sys.modules)
    args = {"command": "echo pwned", "args": ["echo", "pwned"], "source": "1/0", "name": "os"}
    blobs = [
        _record(name, args),
        HEADER + ormsgpack.packb(ormsgpack.Ext(fmt.EXT_ENUM, ormsgpack.packb([name, "x"]))),
    ]
    for blob in blobs:
        with pytest.raises(SerializationError) as info:
            serde.loads(blob)
        assert info.value.type_name == name
    assert calls == []
    assert set(sys.modules) == modules
