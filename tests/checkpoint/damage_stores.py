"""Every stored record of a persistent saver, read and overwritten from outside it.

For the damage tests (``test_damage_every_saver.py``): ``records()`` lists each record a saver
decodes (checkpoint bodies and metadata, pending writes, blobs) with the thread it belongs to,
and ``read``/``write`` get and replace its bytes, as a person or a failing disk would.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote

import psycopg
import redis
from psycopg import sql


@dataclass(frozen=True)
class Record:
    """One stored record: its ``kind`` (``checkpoint``, ``metadata``, ``write``, ``blob``),
    its thread, and where it is (``address``, the store's own)."""

    kind: str
    thread_id: str
    address: tuple[Any, ...]


class Store(Protocol):
    def records(self) -> list[Record]: ...
    def read(self, record: Record) -> bytes: ...
    def write(self, record: Record, data: bytes) -> None: ...


# (kind, table, column, primary key columns); the thread id comes first in every key.
_TABLES = (
    ("checkpoint", "checkpoints", "body", ("thread_id", "checkpoint_ns", "checkpoint_id")),
    ("metadata", "checkpoints", "metadata", ("thread_id", "checkpoint_ns", "checkpoint_id")),
    ("blob", "blobs", "data", ("thread_id", "checkpoint_ns", "key", "version")),
)


class SqlStore:
    """SQLite or PostgreSQL tables: one record per non-empty bytes column of a row."""

    def __init__(
        self, run: Callable[..., list[tuple[Any, ...]]], prefix: str, mark: str, writes: str
    ):
        self.run, self.prefix, self.mark = run, prefix, mark
        key = ("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "kind")
        self.tables = (*_TABLES, ("write", "writes", writes, key))

    def records(self) -> list[Record]:
        found = []
        for kind, table, column, key in self.tables:
            cols = ", ".join(key)
            where = f"length({column}) > 0"
            rows = self.run(
                f"SELECT {cols} FROM {self.prefix}{table} WHERE {where} ORDER BY {cols}"
            )
            found += [Record(kind, row[0], (table, column, key, tuple(row))) for row in rows]
        return found

    def read(self, record: Record) -> bytes:
        table, column, key, values = record.address
        where = " AND ".join(f"{k} = {self.mark}" for k in key)
        ((data,),) = self.run(f"SELECT {column} FROM {self.prefix}{table} WHERE {where}", *values)
        return bytes(data)

    def write(self, record: Record, data: bytes) -> None:
        table, column, key, values = record.address
        where = " AND ".join(f"{k} = {self.mark}" for k in key)
        statement = f"UPDATE {self.prefix}{table} SET {column} = {self.mark} WHERE {where}"
        self.run(statement, data, *values)


def sqlite_store(path: Path) -> SqlStore:
    def run(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with closing(sqlite3.connect(path)) as conn, conn:
            return conn.execute(statement, params).fetchall()

    return SqlStore(run, "", "?", "value")


def postgres_store(url: str, schema: str) -> SqlStore:
    def run(statement: str, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(url, autocommit=True) as conn:
            cur = conn.execute(sql.SQL(statement), params)  # type: ignore[call-overload]
            return cur.fetchall() if cur.description else []

    prefix = f"{sql.Identifier(schema).as_string(None)}.threadline_"
    return SqlStore(run, prefix, "%s", "data")


class RedisStore:
    """Redis strings under a saver's prefix: a checkpoint, a checkpoint's writes, a blob."""

    _KINDS = {"c": "checkpoint", "w": "write", "b": "blob"}

    def __init__(self, url: str, prefix: str) -> None:
        self.client = redis.Redis.from_url(url)
        self.prefix = prefix

    def records(self) -> list[Record]:
        found = []
        pattern = self.prefix.replace("*", "\\*") + ":{t:*}:*"
        for raw in sorted(self.client.scan_iter(match=pattern, count=1000)):
            key = raw.decode()
            tag, _, rest = key[len(self.prefix) + 4 :].partition("}:")
            kind = self._KINDS.get(rest.partition(":")[0])
            if kind is not None and self.client.type(raw) == b"string":
                found.append(Record(kind, unquote(tag), (key,)))
        return found

    def read(self, record: Record) -> bytes:
        data = self.client.get(record.address[0])
        assert isinstance(data, bytes)
        return data

    def write(self, record: Record, data: bytes) -> None:
        self.client.set(record.address[0], data)


class FileStore:
    """A ``FileSaver``'s row, blob and write files (not its hints: ``HEAD``, ``thread.json``,
    previews, which are made again when damaged)."""

    _KINDS = {"checkpoints": "checkpoint", "blobs": "blob"}

    def __init__(self, root: Path) -> None:
        self.root = root / "threads"

    def records(self) -> list[Record]:
        found = []
        for thread_dir in sorted(self.root.iterdir()):
            thread_id = unquote(thread_dir.name[2:])
            for path in sorted(thread_dir.rglob("*")):
                if not path.is_file() or path.name.startswith("."):
                    continue
                kind = "write" if path.suffix == ".write" else self._KINDS.get(path.parent.name)
                if kind is not None:
                    found.append(Record(kind, thread_id, (str(path),)))
        return found

    def read(self, record: Record) -> bytes:
        return Path(record.address[0]).read_bytes()

    def write(self, record: Record, data: bytes) -> None:
        path = record.address[0]
        with open(path + ".new", "wb") as f:
            f.write(data)
        os.replace(path + ".new", path)
