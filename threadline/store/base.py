"""Long-term memory shared across threads: the ``Item`` record and the ``BaseStore`` contract.

A checkpoint belongs to one thread; a store holds what every thread may read (user profiles,
learned facts). Method shapes follow LangGraph's ``BaseStore`` so code ports over, with three
deliberate differences: ``ttl`` is in seconds (LangGraph: minutes), namespace prefixes take no
``"*"`` wildcards, and ``search`` has no semantic ``query``.

``BaseStore`` does everything backend-independent once — validation, the clock, TTL arithmetic,
filter parsing — and calls small ``_``-prefixed hooks, so every backend rejects the same bad
input with the same message and the shared conformance tests pin one behaviour.

Bad input raises ``ValueError`` (as LangGraph's ``InvalidNamespaceError`` does), never a
backend-specific error.
"""

from __future__ import annotations

import asyncio
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, Self, TypeVar

from threadline.errors import InvalidStoreInputError

Namespace = tuple[str, ...]
Condition = tuple[str, str, Any]
"""One parsed filter term: ``(field, operator, operand)``, e.g. ``("age", "$gte", 18)``."""

OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_RANGE_OPERATORS = frozenset({"$gt", "$gte", "$lt", "$lte"})

_P = ParamSpec("_P")
_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class Item:
    """A stored value with its address and timestamps (tz-aware UTC).

    ``expires_at`` is ``None`` for items put without a ``ttl``.
    """

    value: dict[str, Any]
    key: str
    namespace: Namespace
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None

    def dict(self) -> dict[str, Any]:
        """A JSON-ready dict (LangGraph's ``Item.dict()`` shape plus ``expires_at``)."""
        return {
            "namespace": list(self.namespace),
            "key": self.key,
            "value": self.value,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
            "expires_at": self.expires_at.isoformat() if self.expires_at else None,
        }


def _utc_now() -> datetime:
    return datetime.now(UTC)


class BaseStore(ABC):
    """Key-value memory addressed by ``(namespace, key)``; values are JSON-like dicts.

    ``clock`` returns the current tz-aware time; inject one to test TTLs without sleeping.
    ``refresh_on_read`` is the default for ``get(..., refresh_ttl=None)``: like LangGraph, reading
    an item that has a TTL restarts its countdown unless told otherwise.

    Async twins run the sync method through ``_call``, which uses a worker thread by default
    because most backends block on I/O. Backends that never block (``InMemoryStore``) override
    ``_call`` to skip the thread hop; backends with a native async driver override ``a*``.
    """

    def close(self) -> None:  # noqa: B027 - optional hook, deliberately not abstract
        """Release connections; a no-op for stores that hold none."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __init__(
        self, *, clock: Callable[[], datetime] | None = None, refresh_on_read: bool = True
    ) -> None:
        self._clock = clock or _utc_now
        self.refresh_on_read = refresh_on_read

    # -- public sync API ------------------------------------------------------------------------

    def put(
        self, namespace: Namespace, key: str, value: dict[str, Any], *, ttl: float | None = None
    ) -> None:
        """Create or replace an item. Replacing keeps ``created_at`` and resets the TTL.

        ``ttl`` (seconds) makes the item vanish that long after this write; ``None`` keeps it
        forever.
        """
        _check_item_address(namespace, key)
        if not isinstance(value, dict):
            raise InvalidStoreInputError(f"store value must be a dict, got {type(value).__name__}")
        self._put(namespace, key, value, self._now(), _check_ttl(ttl))

    def get(
        self, namespace: Namespace, key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        """The item, or ``None`` if it is absent or expired.

        ``refresh_ttl`` restarts the item's TTL from now (default: the store's
        ``refresh_on_read``); it never changes ``updated_at``.
        """
        _check_item_address(namespace, key)
        refresh = self.refresh_on_read if refresh_ttl is None else refresh_ttl
        return self._get(namespace, key, self._now(), bool(refresh))

    def search(
        self,
        namespace_prefix: Namespace,
        /,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Item]:
        """Live items whose namespace starts with ``namespace_prefix`` (whole labels; ``()``
        matches all) and whose value satisfies ``filter``.

        Ordered by ``updated_at`` newest first — recent memories are usually the relevant ones,
        and it is what LangGraph's SQL stores do (its in-memory store uses insertion order).
        Ties break by namespace (labels joined with ``"."``) then key, ascending in code-point
        order, so every backend pages identically.

        ``filter`` maps top-level value fields to a value (equality) or an operator dict such as
        ``{"$gte": 18}``; see ``parse_filter``.
        """
        _check_labels(namespace_prefix, "namespace_prefix")
        conditions = parse_filter(filter)
        _check_count(limit, "limit")
        _check_count(offset, "offset")
        return self._search(namespace_prefix, conditions, limit, offset, self._now())

    def delete(self, namespace: Namespace, key: str) -> None:
        """Remove an item; deleting a missing item is a no-op."""
        _check_item_address(namespace, key)
        self._delete(namespace, key)

    def list_namespaces(
        self,
        *,
        prefix: Namespace | None = None,
        suffix: Namespace | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        """Distinct namespaces holding live items, sorted as tuples.

        ``prefix``/``suffix`` match whole labels at either end of the full namespace;
        ``max_depth`` then truncates each to that many labels (and de-duplicates).
        """
        if prefix is not None:
            _check_labels(prefix, "prefix")
        if suffix is not None:
            _check_labels(suffix, "suffix")
        if max_depth is not None and (
            not isinstance(max_depth, int) or isinstance(max_depth, bool) or max_depth < 1
        ):
            raise InvalidStoreInputError(
                f"max_depth must be a positive int or None, got {max_depth!r}"
            )
        _check_count(limit, "limit")
        _check_count(offset, "offset")
        return self._list_namespaces(
            prefix or (), suffix or (), max_depth, limit, offset, self._now()
        )

    # -- public async API -----------------------------------------------------------------------

    async def aput(
        self, namespace: Namespace, key: str, value: dict[str, Any], *, ttl: float | None = None
    ) -> None:
        await self._call(self.put, namespace, key, value, ttl=ttl)

    async def aget(
        self, namespace: Namespace, key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        return await self._call(self.get, namespace, key, refresh_ttl=refresh_ttl)

    async def asearch(
        self,
        namespace_prefix: Namespace,
        /,
        *,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[Item]:
        return await self._call(
            self.search, namespace_prefix, filter=filter, limit=limit, offset=offset
        )

    async def adelete(self, namespace: Namespace, key: str) -> None:
        await self._call(self.delete, namespace, key)

    async def alist_namespaces(
        self,
        *,
        prefix: Namespace | None = None,
        suffix: Namespace | None = None,
        max_depth: int | None = None,
        limit: int = 100,
        offset: int = 0,
    ) -> list[Namespace]:
        return await self._call(
            self.list_namespaces,
            prefix=prefix,
            suffix=suffix,
            max_depth=max_depth,
            limit=limit,
            offset=offset,
        )

    # -- backend hooks (inputs already validated) -----------------------------------------------

    @abstractmethod
    def _put(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        now: datetime,
        ttl: float | None,
    ) -> None:
        """Upsert. An existing *live* item keeps its ``created_at``; an expired one does not."""

    @abstractmethod
    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        """The live item or ``None``; with ``refresh``, set ``expires_at = now + its ttl``."""

    @abstractmethod
    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Item]:
        """Live matches in the order ``search`` documents, sliced by ``offset``/``limit``."""

    @abstractmethod
    def _delete(self, namespace: Namespace, key: str) -> None:
        """Remove the item if present."""

    @abstractmethod
    def _list_namespaces(
        self,
        prefix: Namespace,
        suffix: Namespace,
        max_depth: int | None,
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Namespace]:
        """Namespaces of live items as ``list_namespaces`` documents; ``()`` means no bound."""

    async def _call(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Run a sync method for an async twin; a worker thread keeps blocking I/O off the loop."""
        return await asyncio.to_thread(fn, *args, **kwargs)

    def _now(self) -> datetime:
        now = self._clock()
        if now.tzinfo is None:
            raise InvalidStoreInputError("store clock must return a timezone-aware datetime")
        return now.astimezone(UTC)


# -- validation ---------------------------------------------------------------------------------


def _check_labels(namespace: object, what: str) -> None:
    if not isinstance(namespace, tuple):
        raise InvalidStoreInputError(
            f"{what} must be a tuple of strings, got {type(namespace).__name__}"
        )
    for label in namespace:
        if not isinstance(label, str) or not label:
            raise InvalidStoreInputError(
                f"{what} labels must be non-empty strings, got {label!r} in {namespace}"
            )
        if "." in label:
            raise InvalidStoreInputError(
                f"{what} labels must not contain '.', got {label!r} in {namespace}"
            )


def _check_item_address(namespace: object, key: object) -> None:
    _check_labels(namespace, "namespace")
    if not namespace:
        raise InvalidStoreInputError("namespace must not be empty")
    if not isinstance(key, str):
        raise InvalidStoreInputError(f"store key must be a str, got {type(key).__name__}")


def _check_ttl(ttl: object) -> float | None:
    if ttl is None:
        return None
    if (
        not isinstance(ttl, int | float)
        or isinstance(ttl, bool)
        or not math.isfinite(ttl)
        or ttl <= 0
    ):
        raise InvalidStoreInputError(
            f"ttl must be a positive number of seconds or None, got {ttl!r}"
        )
    return float(ttl)


def _check_count(n: object, what: str) -> None:
    if not isinstance(n, int) or isinstance(n, bool) or n < 0:
        raise InvalidStoreInputError(f"{what} must be a non-negative int, got {n!r}")


# -- filters ------------------------------------------------------------------------------------


def parse_filter(filter: Mapping[str, Any] | None) -> list[Condition]:
    """Validate a ``search`` filter and flatten it into ``(field, operator, operand)`` terms.

    ``{"kind": "fact"}`` is equality. A dict whose keys start with ``"$"`` is a set of operators
    that must all hold: ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``, ``$lte``; any other key in
    it is an error. A dict without ``"$"`` keys is compared for equality as a whole. Backends
    translate the flat terms (to SQL, say) instead of re-parsing the dict.
    """
    if filter is None:
        return []
    if not isinstance(filter, Mapping):
        raise InvalidStoreInputError(f"filter must be a dict, got {type(filter).__name__}")
    conditions: list[Condition] = []
    for field, spec in filter.items():
        if not isinstance(field, str):
            raise InvalidStoreInputError(f"filter fields must be strings, got {field!r}")
        if field.startswith("$"):
            raise InvalidStoreInputError(
                f"unsupported filter operator {field!r} at top level; filters are field -> "
                f"value or field -> {{operator: value}}"
            )
        if isinstance(spec, Mapping) and any(str(k).startswith("$") for k in spec):
            for op, operand in spec.items():
                if op not in OPERATORS:
                    raise InvalidStoreInputError(
                        f"unsupported filter operator {op!r} on field {field!r}; "
                        f"use one of {', '.join(sorted(OPERATORS))}"
                    )
                if op in _RANGE_OPERATORS and not _orderable(operand):
                    raise InvalidStoreInputError(
                        f"filter operator {op!r} on field {field!r} needs a number or string, "
                        f"got {operand!r}"
                    )
                conditions.append((field, op, operand))
        else:
            conditions.append((field, "$eq", spec))
    return conditions


def matches(value: Mapping[str, Any], conditions: list[Condition]) -> bool:
    """True when ``value`` satisfies every parsed condition (JSON semantics, for all backends).

    A missing field satisfies only ``$ne`` (as in MongoDB). ``True`` never equals ``1``, because
    JSON keeps booleans and numbers apart. Range operators compare number with number or string
    with string (code-point order); any other pairing is simply no match.
    """
    for field, op, operand in conditions:
        present = field in value
        actual = value.get(field)
        if op == "$eq":
            ok = present and _json_equal(actual, operand)
        elif op == "$ne":
            ok = not (present and _json_equal(actual, operand))
        elif not present or not _comparable(actual, operand):
            ok = False
        elif op == "$gt":
            ok = actual > operand
        elif op == "$gte":
            ok = actual >= operand
        elif op == "$lt":
            ok = actual < operand
        else:  # "$lte"; parse_filter admits nothing else
            ok = actual <= operand
        if not ok:
            return False
    return True


def _orderable(x: object) -> bool:
    return isinstance(x, int | float | str) and not isinstance(x, bool)


def _comparable(a: object, b: object) -> bool:
    if not (_orderable(a) and _orderable(b)):
        return False
    return isinstance(a, str) == isinstance(b, str)


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


# -- helpers for backends -----------------------------------------------------------------------


def namespace_matches(namespace: Namespace, prefix: Namespace, suffix: Namespace = ()) -> bool:
    """Whole-label match: ``("a",)`` is a prefix of ``("a", "b")`` but not of ``("ab",)``."""
    if len(prefix) > len(namespace) or len(suffix) > len(namespace):
        return False
    return namespace[: len(prefix)] == prefix and (
        not suffix or namespace[-len(suffix) :] == suffix
    )


def sort_items(items: list[Item]) -> list[Item]:
    """Sort in ``search`` order: ``updated_at`` newest first, then namespace text, then key."""
    items = sorted(items, key=lambda it: (".".join(it.namespace), it.key))
    items.sort(key=lambda it: it.updated_at, reverse=True)  # stable: keeps the tie order
    return items


def expiry(now: datetime, ttl: float | None) -> datetime | None:
    """When an item written (or refreshed) at ``now`` with ``ttl`` seconds stops being live."""
    return None if ttl is None else now + timedelta(seconds=ttl)


def is_live(item: Item, now: datetime) -> bool:
    """An item is live until the instant it expires."""
    return item.expires_at is None or now < item.expires_at


# -- helpers for backends that persist values ---------------------------------------------------

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
