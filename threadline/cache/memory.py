"""``InMemoryCache``: node results kept in this process, for as long as the object lives."""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.cache.base import BaseCache, V, expired, expiry_of
from threadline.cache.keys import FullKey, Namespace
from threadline.serde import Serializer


class InMemoryCache(BaseCache[V]):
    """A dict of encoded values per namespace; safe to share between threads."""

    def __init__(self, *, serde: Serializer | None = None) -> None:
        super().__init__(serde=serde)
        self._entries: dict[Namespace, dict[str, tuple[bytes, float | None]]] = {}
        self._lock = threading.Lock()

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, V]:
        found: dict[FullKey, Any] = {}
        with self._lock:
            for ns, key in keys:
                entry = self._entries.get(ns, {}).get(key)
                if entry is None:
                    continue
                if expired(entry[1]):
                    del self._entries[ns][key]
                    continue
                found[(ns, key)] = entry[0]
        return {full: self.serde.loads(blob) for full, blob in found.items()}

    def set(self, pairs: Mapping[FullKey, tuple[V, float | None]]) -> None:
        encoded = [
            (ns, key, self.serde.dumps(v), expiry_of(ttl)) for (ns, key), (v, ttl) in pairs.items()
        ]
        with self._lock:
            for ns, key, blob, expiry in encoded:
                self._entries.setdefault(ns, {})[key] = (blob, expiry)

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        with self._lock:
            if namespaces is None:
                self._entries.clear()
                return
            for ns in namespaces:
                self._entries.pop(tuple(ns), None)
