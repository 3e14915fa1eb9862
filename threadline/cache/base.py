"""The cache protocol nodes with a ``CachePolicy`` use, as LangGraph's ``BaseCache`` has it.

Entries are addressed by ``(namespace, key)``; values are stored encoded with threadline's serde
(never pickle), so a cached value is a copy: a node that mutates what it got back cannot change
the entry.
"""

from __future__ import annotations

import asyncio
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Generic, TypeVar

from threadline.cache.keys import FullKey, Namespace
from threadline.serde import DEFAULT, Serializer

V = TypeVar("V")


class BaseCache(ABC, Generic[V]):
    """Get, set and clear cached values; the async methods run the sync ones in a thread."""

    def __init__(self, *, serde: Serializer | None = None) -> None:
        self.serde = serde if serde is not None else DEFAULT

    @abstractmethod
    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, V]:
        """The values found for ``keys`` that have not expired."""

    @abstractmethod
    def set(self, pairs: Mapping[FullKey, tuple[V, float | None]]) -> None:
        """Store each value with its time to live in seconds (``None``: no expiry)."""

    @abstractmethod
    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        """Delete the entries of ``namespaces``, or every entry when none are given."""

    async def aget(self, keys: Sequence[FullKey]) -> dict[FullKey, V]:
        return await asyncio.to_thread(self.get, keys)

    async def aset(self, pairs: Mapping[FullKey, tuple[V, float | None]]) -> None:
        await asyncio.to_thread(self.set, pairs)

    async def aclear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        await asyncio.to_thread(self.clear, namespaces)


def expiry_of(ttl: float | None) -> float | None:
    """When an entry stored now with ``ttl`` expires (wall clock: entries outlive processes)."""
    return None if ttl is None else time.time() + ttl


def expired(expiry: float | None) -> bool:
    return expiry is not None and time.time() >= expiry
