"""``SqliteCache``: node results in a SQLite file, shared by processes and kept across runs."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from threadline.cache.base import BaseCache, V, expired, expiry_of
from threadline.cache.keys import FullKey, Namespace
from threadline.checkpoint.seals import seal, unseal
from threadline.serde import Serializer

_SCHEMA = """CREATE TABLE IF NOT EXISTS threadline_cache (
    ns TEXT NOT NULL,
    key TEXT NOT NULL,
    expiry REAL,
    value BLOB NOT NULL,
    PRIMARY KEY (ns, key)
)"""
_NS_SEP = "\x1f"  # joins a namespace's parts; never part of a node name or identifier


class SqliteCache(BaseCache[V]):
    """One table in the SQLite file at ``path``; values are encoded with threadline's serde and
    sealed to their namespace and key (``checkpoint.seals``): a damaged entry raises
    ``CorruptedDataError`` naming it.

    One connection, shared by threads behind a lock; ``close()`` it (or use ``with``) when done.
    """

    def __init__(
        self,
        *,
        path: str | os.PathLike[str],
        serde: Serializer | None = None,
        timeout: float = 30.0,
    ) -> None:
        super().__init__(serde=serde)
        self.path = os.fspath(path)
        self._lock = threading.Lock()
        self._conn = sqlite3.connect(
            self.path, timeout=timeout, check_same_thread=False, isolation_level=None
        )
        try:
            if self.path not in ("", ":memory:"):
                self._conn.execute("PRAGMA journal_mode=WAL").fetchone()
            self._conn.execute(_SCHEMA)
        except BaseException:
            self._conn.close()
            raise

    def get(self, keys: Sequence[FullKey]) -> dict[FullKey, V]:
        if not keys:
            return {}
        wanted = {(_ns_text(ns), key): (tuple(ns), key) for ns, key in keys}
        rows: list[tuple[str, str, float | None, bytes]] = []
        with self._lock:
            for ns_text, key in wanted:
                rows.extend(
                    self._conn.execute(
                        "SELECT ns, key, expiry, value FROM threadline_cache "
                        "WHERE ns = ? AND key = ?",
                        (ns_text, key),
                    )
                )
            stale = [(ns, key) for ns, key, expiry, _ in rows if expired(expiry)]
            if stale:
                self._conn.executemany(
                    "DELETE FROM threadline_cache WHERE ns = ? AND key = ?", stale
                )
        found: dict[FullKey, Any] = {}
        for ns, key, expiry, value in rows:
            if not expired(expiry):
                what = f"SqliteCache {self.path!r}: the entry {key!r} of namespace {ns!r}"
                found[wanted[(ns, key)]] = self.serde.loads(unseal(value, what, ns, key))
        return found

    def set(self, pairs: Mapping[FullKey, tuple[V, float | None]]) -> None:
        rows = [
            (text, key, expiry_of(ttl), seal(self.serde.dumps(value), text, key))
            for (ns, key), (value, ttl) in pairs.items()
            for text in [_ns_text(ns)]
        ]
        with self._lock:
            self._conn.executemany(
                "INSERT OR REPLACE INTO threadline_cache (ns, key, expiry, value) "
                "VALUES (?, ?, ?, ?)",
                rows,
            )

    def clear(self, namespaces: Sequence[Namespace] | None = None) -> None:
        with self._lock:
            if namespaces is None:
                self._conn.execute("DELETE FROM threadline_cache")
                return
            self._conn.executemany(
                "DELETE FROM threadline_cache WHERE ns = ?", [(_ns_text(ns),) for ns in namespaces]
            )

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteCache[V]:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _ns_text(ns: Sequence[str]) -> str:
    return _NS_SEP.join(ns)
