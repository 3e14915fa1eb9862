"""Long-term memory shared across threads: the ``BaseStore`` contract.

A checkpoint belongs to one thread; a store holds what every thread may read (user profiles,
learned facts). Method shapes follow LangGraph's ``BaseStore`` so code ports over, with two
deliberate differences: ``ttl`` is in seconds (LangGraph: minutes), and namespace prefixes take
no ``"*"`` wildcards. Semantic search (``index=`` on the store, ``search(query=...)``) follows
LangGraph's configuration and scores; see ``threadline.store.semantic``.

``BaseStore`` does everything backend-independent once — validation, the clock, TTL arithmetic,
filter parsing, embedding — and calls small ``_``-prefixed hooks, so every backend rejects the
same bad input with the same message and the shared conformance tests pin one behaviour.

Bad input raises ``ValueError`` (as LangGraph's ``InvalidNamespaceError`` does), never a
backend-specific error.
"""

from __future__ import annotations

import asyncio
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ParamSpec, Self, TypeVar

from threadline.errors import InvalidStoreInputError
from threadline.store.filters import Condition, parse_filter
from threadline.store.item import Item, Namespace, SearchItem
from threadline.store.semantic import (
    FieldVectors,
    IndexConfig,
    PutIndex,
    Vector,
    check_put_index,
    parse_index,
)

__all__ = ["BaseStore", "IndexConfig", "Item", "Namespace", "SearchItem"]

_P = ParamSpec("_P")
_T = TypeVar("_T")


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
        self,
        *,
        clock: Callable[[], datetime] | None = None,
        refresh_on_read: bool = True,
        index: Mapping[str, Any] | None = None,
    ) -> None:
        self._clock = clock or _utc_now
        self.refresh_on_read = refresh_on_read
        self._index = parse_index(index)

    # -- public sync API ------------------------------------------------------------------------

    def put(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        index: PutIndex = None,
        *,
        ttl: float | None = None,
    ) -> None:
        """Create or replace an item. Replacing keeps ``created_at`` and resets the TTL.

        ``ttl`` (seconds) makes the item vanish that long after this write; ``None`` keeps it
        forever. On a store with an ``index``, ``index`` chooses what is embedded for semantic
        search: ``None`` the store's fields, ``False`` nothing (the item is then found by
        ``query`` searches only on ``InMemoryStore``, unscored), or a list of field paths.
        Without an ``index`` it is checked and has no effect, as in LangGraph.
        """
        ttl, index = _check_put(namespace, key, value, index, ttl)
        vectors = None
        if self._index is not None:
            fields, texts = _unzip(self._index.texts(value, index))
            vectors = list(zip(fields, self._index.embed_documents(texts), strict=True))
        self._put(namespace, key, value, self._now(), ttl, vectors)

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
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchItem]:
        """Live items whose namespace starts with ``namespace_prefix`` (whole labels; ``()``
        matches all) and whose value satisfies ``filter``, as ``SearchItem``s.

        Without a ``query`` every ``score`` is ``None`` and the order is LangGraph's for the
        backend: ``InMemoryStore`` keeps insertion order (a namespace's items after the
        namespace's first item, an overwritten item in its old place); the durable stores put the
        newest ``updated_at`` first, ties broken by namespace text then key (code-point order).

        With a ``query`` on a store with an ``index``, ``score`` is the cosine similarity between
        the query's vector and the item's best vector, and results come best first (ties in the
        order above). A query on a store without an ``index`` is ignored with a warning, as
        LangGraph ignores it.

        ``filter`` maps top-level value fields to a value (equality) or an operator dict such as
        ``{"$gte": 18}``; see ``parse_filter``.
        """
        conditions = self._check_search(namespace_prefix, query, filter, limit, offset)
        vector = self._index.embed_query(query) if query and self._index else None
        return self._search(namespace_prefix, conditions, limit, offset, self._now(), vector)

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
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        index: PutIndex = None,
        *,
        ttl: float | None = None,
    ) -> None:
        ttl, index = _check_put(namespace, key, value, index, ttl)
        vectors = None
        if self._index is not None:
            fields, texts = _unzip(self._index.texts(value, index))
            vectors = list(zip(fields, await self._index.aembed_documents(texts), strict=True))
        await self._call(self._put, namespace, key, value, self._now(), ttl, vectors)

    async def aget(
        self, namespace: Namespace, key: str, *, refresh_ttl: bool | None = None
    ) -> Item | None:
        return await self._call(self.get, namespace, key, refresh_ttl=refresh_ttl)

    async def asearch(
        self,
        namespace_prefix: Namespace,
        /,
        *,
        query: str | None = None,
        filter: Mapping[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> list[SearchItem]:
        conditions = self._check_search(namespace_prefix, query, filter, limit, offset)
        vector = await self._index.aembed_query(query) if query and self._index else None
        return await self._call(
            self._search, namespace_prefix, conditions, limit, offset, self._now(), vector
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
        vectors: FieldVectors | None,
    ) -> None:
        """Upsert. An existing *live* item keeps its ``created_at``; an expired one does not.

        ``vectors`` (only on a store with an ``index``) replace the item's vectors; ``[]``
        leaves it with none.
        """

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
        query: Vector | None,
    ) -> list[SearchItem]:
        """Live matches in the order ``search`` documents, sliced by ``offset``/``limit``;
        ``query`` (only on a store with an ``index``) ranks them by similarity."""

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

    def _check_search(
        self,
        prefix: object,
        query: object,
        filter: Mapping[str, Any] | None,
        limit: object,
        offset: object,
    ) -> list[Condition]:
        _check_labels(prefix, "namespace_prefix")
        if query is not None and not isinstance(query, str):
            raise InvalidStoreInputError(f"query must be a string or None, got {query!r}")
        conditions = parse_filter(filter)
        _check_count(limit, "limit")
        _check_count(offset, "offset")
        if query and self._index is None:
            warnings.warn(
                f"{type(self).__name__} was made without index=..., so search ignores "
                f"query={query!r} (pass index={{'embed': ..., 'dims': ...}} to rank by meaning)",
                stacklevel=3,
            )
        return conditions

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


def _check_put(
    namespace: object, key: object, value: object, index: object, ttl: object
) -> tuple[float | None, PutIndex]:
    _check_item_address(namespace, key)
    if not isinstance(value, dict):
        raise InvalidStoreInputError(f"store value must be a dict, got {type(value).__name__}")
    return _check_ttl(ttl), check_put_index(index)


def _unzip(pairs: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [a for a, _ in pairs], [b for _, b in pairs]


# -- helpers for backends -----------------------------------------------------------------------


def namespace_matches(namespace: Namespace, prefix: Namespace, suffix: Namespace = ()) -> bool:
    """Whole-label match: ``("a",)`` is a prefix of ``("a", "b")`` but not of ``("ab",)``."""
    if len(prefix) > len(namespace) or len(suffix) > len(namespace):
        return False
    return namespace[: len(prefix)] == prefix and (
        not suffix or namespace[-len(suffix) :] == suffix
    )


def expiry(now: datetime, ttl: float | None) -> datetime | None:
    """When an item written (or refreshed) at ``now`` with ``ttl`` seconds stops being live."""
    return None if ttl is None else now + timedelta(seconds=ttl)


def is_live(item: Item, now: datetime) -> bool:
    """An item is live until the instant it expires."""
    return item.expires_at is None or now < item.expires_at
