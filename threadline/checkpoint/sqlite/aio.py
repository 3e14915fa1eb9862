"""``AsyncSqliteSaver``: the SQLite saver under LangGraph's async name and import path.

LangGraph's runs on an ``aiosqlite`` connection; this one needs no extra package: its ``a*``
methods run the SQLite calls on a worker thread, so the event loop never waits on the disk, and
its sync methods work too. ``setup()`` is awaited, as LangGraph's docs write it::

    async with AsyncSqliteSaver.from_conn_string("checkpoints.db") as saver:
        await saver.setup()  # a no-op: the file is prepared when it opens
        graph = builder.compile(checkpointer=saver)

An ``aiosqlite`` connection is refused with a clear error (its ``sqlite3`` connection belongs to
aiosqlite's own thread); pass a path, or ``sqlite3.connect(path, check_same_thread=False)``.
"""

from __future__ import annotations

from threadline.checkpoint.sqlite.saver import SqliteSaver


class AsyncSqliteSaver(SqliteSaver):
    """``SqliteSaver`` with an awaitable ``setup()``; use it with ``async with``."""

    async def setup(self) -> None:  # type: ignore[override]
        """Nothing to do (the schema is made or checked when the file opens); idempotent."""
        self._connection()  # a closed saver says so

    async def asetup(self) -> None:
        await self.setup()


__all__ = ["AsyncSqliteSaver"]
