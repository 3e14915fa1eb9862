"""``InMemoryStore``: a thread-safe, process-local store for tests, demos and single processes."""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime
from typing import Any, NamedTuple, ParamSpec, TypeVar

from threadline.store.base import BaseStore, expiry, is_live, namespace_matches
from threadline.store.filters import Condition, matches
from threadline.store.item import Item, Namespace, SearchItem, as_search_item
from threadline.store.semantic import FieldVectors, Vector, cosine, norm

_P = ParamSpec("_P")
_T = TypeVar("_T")


class InMemoryStore(BaseStore):
    """Items live in a dict guarded by one lock; nothing survives the process.

    Values are deep-copied on the way in and out, so neither the writer nor a reader can change
    what is stored by mutating their dict. Stored entries are replaced, never mutated, which lets
    the copying happen outside the lock.

    Expired items are purged lazily: ``get`` drops the one it finds expired, ``search`` and
    ``list_namespaces`` (which scan everything anyway) drop all of them.

    ``search`` keeps LangGraph's in-memory order: namespaces in the order they first got an
    item, each namespace's items in insertion order (an overwritten item keeps its place). With
    an ``index`` and a ``query``, scored items come best first (ties in that order), then the
    items without vectors (put with ``index=False``, or with no text at the indexed fields),
    unscored, as LangGraph's ``InMemoryStore`` returns them.
    """

    def __init__(
        self,
        *,
        index: Mapping[str, Any] | None = None,
        clock: Callable[[], datetime] | None = None,
        refresh_on_read: bool = True,
    ) -> None:
        super().__init__(clock=clock, refresh_on_read=refresh_on_read, index=index)
        self._lock = threading.Lock()
        # namespace -> key -> entry; dicts keep insertion order, which is search order
        self._data: dict[Namespace, dict[str, _Entry]] = {}

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
        vectors: FieldVectors | None,
    ) -> None:
        value = copy.deepcopy(value)
        unit = [(v, norm(v)) for _, v in vectors or ()]
        with self._lock:
            items = self._data.setdefault(namespace, {})
            old = items.get(key)
            live = old is not None and is_live(old.item, now)
            if not live:
                items.pop(key, None)  # an expired item's slot is not kept: this is a new item
            created = old.item.created_at if old and live else now
            item = Item(value, key, namespace, created, now, expiry(now, ttl))
            items[key] = _Entry(item, ttl, unit)

    def _get(self, namespace: Namespace, key: str, now: datetime, refresh: bool) -> Item | None:
        with self._lock:
            entry = self._data.get(namespace, {}).get(key)
            if entry is None:
                return None
            item = entry.item
            if not is_live(item, now):
                self._drop(namespace, key)
                return None
            if refresh and entry.ttl is not None:
                item = replace(item, expires_at=expiry(now, entry.ttl))
                self._data[namespace][key] = entry._replace(item=item)
        return replace(item, value=copy.deepcopy(item.value))

    def _search(
        self,
        prefix: Namespace,
        conditions: list[Condition],
        limit: int,
        offset: int,
        now: datetime,
        query: Vector | None,
    ) -> list[SearchItem]:
        with self._lock:
            self._purge(now)
            found = [
                entry
                for namespace, items in self._data.items()
                if namespace_matches(namespace, prefix)
                for entry in items.values()
                if matches(entry.item.value, conditions)
            ]
        if query is None:
            return [_result(entry.item, None) for entry in found[offset : offset + limit]]
        ranked = _rank(found, query)
        return [_result(entry.item, score) for score, entry in ranked[offset : offset + limit]]

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
            for key, entry in items.items()
            if not is_live(entry.item, now)
        ]
        for namespace, key in expired:
            self._drop(namespace, key)


class _Entry(NamedTuple):
    item: Item
    ttl: float | None  # seconds it was written with, for refresh on read
    vectors: list[tuple[Vector, float]]  # each with its norm


def _rank(entries: list[_Entry], query: Vector) -> list[tuple[float | None, _Entry]]:
    """Best score first (a stable sort keeps ties in search order), then the unscored."""
    query_norm = norm(query)
    scored: list[tuple[float | None, _Entry]] = []
    unscored: list[tuple[float | None, _Entry]] = []
    for entry in entries:
        if entry.vectors:
            best = max(cosine(query, query_norm, v, n) for v, n in entry.vectors)
            scored.append((best, entry))
        else:
            unscored.append((None, entry))
    scored.sort(key=lambda pair: pair[0], reverse=True)  # type: ignore[arg-type, return-value]
    return scored + unscored


def _result(item: Item, score: float | None) -> SearchItem:
    return as_search_item(replace(item, value=copy.deepcopy(item.value)), score)
