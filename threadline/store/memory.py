"""``InMemoryStore``: a thread-safe, process-local store for tests, demos and single processes."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

from threadline.store.base import (
    BaseStore,
    Condition,
    Item,
    Namespace,
    expiry,
    is_live,
    matches,
    namespace_matches,
    sort_items,
)

_P = ParamSpec("_P")
_T = TypeVar("_T")


class InMemoryStore(BaseStore):
    """Items live in a dict guarded by one lock; nothing survives the process.

    Values are deep-copied on the way in and out, so neither the writer nor a reader can change
    what is stored by mutating their dict. Stored entries are replaced, never mutated, which lets
    the copying happen outside the lock.

    Expired items are purged lazily: ``get`` drops the one it finds expired, ``search`` and
    ``list_namespaces`` (which scan everything anyway) drop all of them.
    """

    def __init__(
        self, *, clock: Callable[[], datetime] | None = None, refresh_on_read: bool = True
    ) -> None:
        super().__init__(clock=clock, refresh_on_read=refresh_on_read)
        self._lock = threading.Lock()
        # namespace -> key -> (item, ttl seconds it was written with)
        self._data: dict[Namespace, dict[str, tuple[Item, float | None]]] = {}

    async def _call(self, fn: Callable[_P, _T], /, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        """Call directly: the work is a short in-memory operation, cheaper than a thread hop."""
        return fn(*args, **kwargs)

    def _put(
        self,
        namespace: Namespace,
        key: str,
        value: dict[str, Any],
        now: datetime,
        ttl: float | None,
    ) -> None:
        value = copy.deepcopy(value)
        with self._lock:
            items = self._data.setdefault(namespace, {})
            old = items.get(key)
            created = old[0].created_at if old and is_live(old[0], now) else now
            items[key] = (Item(value, key, namespace, created, now, expiry(now, ttl)), ttl)

    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        with self._lock:
            entry = self._data.get(namespace, {}).get(key)
            if entry is None:
                return None
            item, ttl = entry
            if not is_live(item, now):
                self._drop(namespace, key)
                return None
            if refresh and ttl is not None:
                item = replace(item, expires_at=expiry(now, ttl))
                self._data[namespace][key] = (item, ttl)
        return _copy(item)

    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Item]:
        with self._lock:
            self._purge(now)
            found = [
                item
                for namespace, items in self._data.items()
                if namespace_matches(namespace, prefix)
                for item, _ in items.values()
                if matches(item.value, conditions)
            ]
        return [_copy(item) for item in sort_items(found)[offset : offset + limit]]

    def _delete(self, namespace: Namespace, key: str) -> None:
        with self._lock:
            self._drop(namespace, key)

    def _list_namespaces(
        self,
        prefix: Namespace,
        suffix: Namespace,
        max_depth: int | None,
        limit: int,
        offset: int,
        now: datetime,
    ) -> list[Namespace]:
        with self._lock:
            self._purge(now)
            names = {
                namespace[:max_depth]
                for namespace in self._data
                if namespace_matches(namespace, prefix, suffix)
            }
        return sorted(names)[offset : offset + limit]

    def _drop(self, namespace: Namespace, key: str) -> None:
        """Remove one item, and its namespace once empty (so it stops being listed). Lock held."""
        items = self._data.get(namespace)
        if items is not None and items.pop(key, None) is not None and not items:
            del self._data[namespace]

    def _purge(self, now: datetime) -> None:
        """Drop every expired item. Lock held."""
        expired = [
            (namespace, key)
            for namespace, items in self._data.items()
            for key, (item, _) in items.items()
            if not is_live(item, now)
        ]
        for namespace, key in expired:
            self._drop(namespace, key)


def _copy(item: Item) -> Item:
    return replace(item, value=copy.deepcopy(item.value))
