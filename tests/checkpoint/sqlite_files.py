"""A SQLite saver's file looked at and changed from outside the saver, and the statements
its connection runs: for the SQLite saver's tests (``test_sqlite_*.py``).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from threadline.checkpoint import SqliteSaver

TABLES = ("checkpoints", "blobs", "writes", "threads")


def counts(path: Path) -> dict[str, int]:
    with closing(sqlite3.connect(path)) as conn:
        return {t: conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


def query(path: Path, sql: str, *params: Any) -> list[tuple[Any, ...]]:
    with closing(sqlite3.connect(path)) as conn:
        return conn.execute(sql, params).fetchall()


def execute(path: Path, sql: str, *params: Any) -> None:
    with closing(sqlite3.connect(path)) as conn, conn:
        conn.execute(sql, params)


class Statements:
    """The statements a saver's connection runs, through ``set_trace_callback``."""

    def __init__(self, saver: SqliteSaver) -> None:
        self.conn = saver._conn
        assert self.conn is not None
        self.log: list[str] = []

    def __enter__(self) -> Statements:
        assert self.conn is not None
        self.conn.set_trace_callback(lambda s: self.log.append(" ".join(s.split())))
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.conn is not None
        self.conn.set_trace_callback(None)

    def starting(self, *words: str) -> list[str]:
        return [s for s in self.log if s.upper().startswith(words)]
