"""The raw floor of the machine, measured in the same run as the workloads.

No library can save a checkpoint faster than its storage commits one row, nor run a step faster
than a few Python calls; these figures say where that floor is on this machine today.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import timeit
from collections.abc import Callable

from bench.backends import Env, pg_schema
from bench.measures import check, now

ROW = b"x" * 100


def sqlite_commit_us(env: Env, ops: int, synchronous: str = "NORMAL") -> float:
    """One INSERT + COMMIT per op; WAL, synchronous=NORMAL, as threadline's SqliteSaver uses."""
    path = env.sqlite_path()
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode=WAL").fetchone()
        conn.execute(f"PRAGMA synchronous={synchronous}")
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BLOB)")
        t0 = now()
        for i in range(ops):
            conn.execute("BEGIN")
            conn.execute("INSERT INTO t (id, v) VALUES (?, ?)", (i, ROW))
            conn.execute("COMMIT")
        elapsed = now() - t0
        (count,) = conn.execute("SELECT COUNT(*) FROM t").fetchone()
        check(count == ops, f"{count} rows, expected {ops}")
    finally:
        conn.close()
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.remove(path + suffix)
    return elapsed / ops * 1e6


def sqlite_commit_full_us(env: Env, ops: int) -> float:
    """The same with synchronous=FULL, SQLite's default, which LangGraph's SqliteSaver keeps."""
    return sqlite_commit_us(env, ops, "FULL")


def postgres_commit_us(env: Env, ops: int) -> float:
    """One INSERT + COMMIT per op over loopback (psycopg 3, default synchronous_commit)."""
    import psycopg

    with pg_schema(env) as (url, _size, _schema), psycopg.connect(url) as conn:
        conn.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, v BYTEA)")
        conn.commit()
        t0 = now()
        for i in range(ops):
            conn.execute("INSERT INTO t (id, v) VALUES (%s, %s)", (i, ROW))
            conn.commit()
        elapsed = now() - t0
        (count,) = conn.execute("SELECT COUNT(*) FROM t").fetchone()
        check(count == ops, f"{count} rows, expected {ops}")
        conn.commit()
    return elapsed / ops * 1e6


def redis_set_us(env: Env, ops: int) -> float:
    """One SET per op (a round trip each), redis-py, loopback."""
    import redis

    client = redis.Redis.from_url(env.redis_url, socket_connect_timeout=5)
    key = env.unique("tlbench:floor")
    try:
        t0 = now()
        for _ in range(ops):
            client.set(key, ROW)
        elapsed = now() - t0
        check(client.get(key) == ROW, "Redis GET did not return the value set")
    finally:
        client.delete(key)
        client.close()
    return elapsed / ops * 1e6


def _noop(x: int) -> int:
    return x


def python_call_ns(env: Env, ops: int) -> float:
    """A plain Python function call with one argument."""
    number = 1_000_000
    best = min(timeit.repeat("f(1)", globals={"f": _noop}, number=number, repeat=3))
    return best / number * 1e9


FLOOR: dict[str, tuple[str, str, Callable[[Env, int], float]]] = {
    "sqlite_commit": ("SQLite INSERT + COMMIT (WAL, synchronous=NORMAL)", "us", sqlite_commit_us),
    "sqlite_commit_full": (
        "SQLite INSERT + COMMIT (WAL, synchronous=FULL, the SQLite default)",
        "us",
        sqlite_commit_full_us,
    ),
    "postgres_commit": ("PostgreSQL INSERT + COMMIT, loopback (psycopg)", "us", postgres_commit_us),
    "redis_set": ("Redis SET, loopback (redis-py)", "us", redis_set_us),
    "python_call": ("plain Python function call", "ns", python_call_ns),
}
