"""Helpers for backends that keep values and timestamps outside the process (SQL, Redis):
compact JSON text for values, UTF-8 checks for addresses, integer microsecond timestamps."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from typing import Any

from threadline.errors import InvalidStoreInputError
from threadline.store.item import Namespace

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND = timedelta(microseconds=1)


def encode_value(value: dict[str, Any]) -> str:
    """Compact JSON text for a value that leaves the process (SQL, Redis).

    Such backends keep JSON, so a value must be JSON-like: dicts with ``str`` keys, lists (tuples
    come back as lists), ``str``, ``int``, finite ``float``, ``bool`` and ``None``. Anything else
    raises ``ValueError`` naming where it sits (``value['when']``), instead of being silently
    converted (``json`` would turn an ``int`` key into a ``str``) or failing in the driver.
    """
    _check_json(value, "value")
    text = json.dumps(value, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: keep it as a \u escape instead
        text = json.dumps(value, allow_nan=False, separators=(",", ":"))
    return text


def decode_value(text: str | bytes) -> dict[str, Any]:
    """The value ``encode_value`` wrote (a fresh object: readers may mutate it)."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise InvalidStoreInputError(f"stored value is not a JSON object: {text[:80]!r}")
    return value


def _check_json(value: object, path: str) -> None:
    if value is None or isinstance(value, str | bool | int):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InvalidStoreInputError(f"store value is not JSON: {path} is {value!r}")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidStoreInputError(
                    f"store value is not JSON: {path} has a key {k!r} of type "
                    f"{type(k).__name__}; JSON object keys are strings"
                )
            _check_json(v, f"{path}[{k!r}]")
        return
    if isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _check_json(v, f"{path}[{i}]")
        return
    raise InvalidStoreInputError(
        f"store value is not JSON: {path} is a {type(value).__name__}; store dicts, lists, str, "
        f"int, float, bool and None (convert it first, e.g. a datetime to an ISO string)"
    )


def utf8_encodable(namespace: Namespace, key: str) -> bool:
    """False when a label or the key holds a lone surrogate, which UTF-8 cannot carry; such an
    address cannot be stored outside the process (``put`` raises, ``get`` finds nothing)."""
    try:
        for text in (*namespace, key):
            text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def check_utf8(namespace: Namespace, key: str) -> None:
    """Raise ``ValueError`` for an address ``utf8_encodable`` rejects."""
    if not utf8_encodable(namespace, key):
        raise InvalidStoreInputError(
            f"namespace {namespace!r} or key {key!r} holds a lone surrogate, which this store "
            "cannot encode as UTF-8"
        )


def to_micros(moment: datetime) -> int:
    """Exact microseconds since the Unix epoch, for backends that store integer timestamps."""
    return (moment - _EPOCH) // _MICROSECOND


def from_micros(micros: int) -> datetime:
    """The tz-aware UTC datetime ``to_micros`` encoded."""
    return _EPOCH + timedelta(microseconds=micros)


def ttl_micros(ttl: float | None) -> int | None:
    """``ttl`` seconds as whole microseconds, rounded exactly as ``expiry`` rounds it."""
    return None if ttl is None else timedelta(seconds=ttl) // _MICROSECOND
