"""``SqliteSaver``: ``core.CoreSaver`` over a ``SqliteBackend`` on a path or a given connection."""

from __future__ import annotations

import os
import sqlite3
from typing import Any, Self

from threadline.checkpoint.base import Retention
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.sqlite.backend import SqliteBackend
from threadline.checkpoint.sqlite.connection import (
    adopt,
    not_a_connection,
    open_path,
    synchronous_level,
)
from threadline.errors import ConfigError
from threadline.serde import DEFAULT, Serializer


class SqliteSaver(CoreSaver):
    """Checkpoints in a SQLite file (default ``":memory:"``, private to this saver).

    Give it a path, or a connection as LangGraph's docs do (``close()``, idempotent, leaves one
    you gave open; see ``connection.py`` for what it must allow)::

        with SqliteSaver("checkpoints.db") as saver:  # or SqliteSaver.from_conn_string(...)
            graph = builder.compile(checkpointer=saver)

        saver = SqliteSaver(sqlite3.connect("checkpoints.db", check_same_thread=False))

    ``synchronous="full"`` syncs each commit, so a saved checkpoint survives a power loss
    (``"normal"``, the default, a process crash; docs/storage.md). ``timeout``: how long a
    write waits for another connection's (30 s; a given connection keeps its own unless
    passed). ``retention`` prunes a thread's older checkpoints each time one is saved (in the
    same transaction). ``copy_thread`` raises ``ValueError`` if the target has checkpoints.
    """

    backend: SqliteBackend

    def __init__(
        self,
        conn: sqlite3.Connection | str | os.PathLike[str] = ":memory:",
        *,
        timeout: float | None = None,
        synchronous: str = "normal",
        retention: Retention | None = None,
        serde: Serializer | None = None,
    ):
        level = synchronous_level(synchronous)
        self.synchronous = level.lower()
        owns = not isinstance(conn, sqlite3.Connection)
        if isinstance(conn, sqlite3.Connection):
            path = adopt(conn, timeout, level)
        elif isinstance(conn, str | os.PathLike):
            path = os.fspath(conn)
            conn = open_path(path, timeout, level)
        else:
            raise ConfigError(not_a_connection(type(self).__name__, conn))
        self.path = path
        codec = serde or DEFAULT
        backend = SqliteBackend(conn, path, owns, codec)
        super().__init__(backend, retention=retention, serde=codec)

    @classmethod
    def from_conn_string(cls, conn_string: str | os.PathLike[str], **options: Any) -> Self:
        """A saver on a path or ``":memory:"``, closed when the ``with`` block ends::

        with SqliteSaver.from_conn_string("checkpoints.db") as saver: ...
        """
        return cls(conn_string, **options)

    @property
    def _conn(self) -> sqlite3.Connection | None:
        return self.backend.conn

    def _connection(self) -> sqlite3.Connection:
        return self.backend.connection()

    def __repr__(self) -> str:
        state = "closed" if self.backend.conn is None else "open"
        return f"{type(self).__name__}({self.path!r}, {state})"
