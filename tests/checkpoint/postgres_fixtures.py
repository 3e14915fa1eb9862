"""Fixtures and builders of the PostgreSQL saver's tests: ``postgres_saver``, schemas, queries.

Needs PostgreSQL at ``THREADLINE_TEST_POSTGRES_URL`` (default
``postgresql://root@127.0.0.1:5432/test``; see ``tests/services.py``): skipped when unreachable,
failed under ``CI=true``. Every saver made by ``postgres_saver`` (for the PostgreSQL tests and
the conformance suite) gets its own schema, named after this test session
(``threadline_test_<pid>_<random>_<n>``), dropped when the saver is closed; parallel runs never
share one. A test module that imports ``session_schemas_dropped`` also drops, when it ends,
any schema of the session left behind.
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from builders import item, step
from psycopg import sql
from services import postgres_url, require_postgres

from threadline.checkpoint.base import Checkpoint, CheckpointRecord
from threadline.checkpoint.postgres import PostgresSaver

SESSION = f"threadline_test_{os.getpid()}_{uuid.uuid4().hex[:8]}"
_schemas = itertools.count()
_used = False  # whether this process created any schema under SESSION


def drop_schemas(name: str, *, prefix: bool = False) -> list[str]:
    """Drop the schema ``name`` (every schema starting with it, with ``prefix``); returns
    the names dropped."""
    match = "starts_with(nspname, %s)" if prefix else "nspname = %s"
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        names = [
            r[0] for r in conn.execute(f"SELECT nspname FROM pg_namespace WHERE {match}", [name])
        ]
        for name in names:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))
    return names


def _sweep() -> None:
    with contextlib.suppress(Exception):
        drop_schemas(SESSION + "_", prefix=True)


def new_schema() -> str:
    global _used
    if not _used:  # conformance runs use the factory without this module's fixtures
        atexit.register(_sweep)
    _used = True
    return f"{SESSION}_{next(_schemas)}"


@contextmanager
def postgres_saver(tmp_path: Path | None = None, **options: Any) -> Iterator[PostgresSaver]:
    """A set-up saver in a fresh schema of this session's, dropped on exit.

    This is the factory the shared conformance suite runs the PostgreSQL saver with. Given a
    ``schema`` (another saver's), it opens a second saver on it and leaves the schema alone.
    """
    url = options.pop("url", None) or require_postgres()
    shared = options.pop("schema", None)
    schema = shared or new_schema()
    saver = PostgresSaver(url, schema=schema, **options)
    try:
        saver.setup()
        yield saver
    finally:
        saver.close()
        if shared is None:
            drop_schemas(schema)


@pytest.fixture(scope="module", autouse=True)
def session_schemas_dropped() -> Iterator[None]:
    yield
    if _used:
        drop_schemas(SESSION + "_", prefix=True)
        assert drop_schemas(SESSION + "_", prefix=True) == []


@pytest.fixture
def url() -> str:
    return require_postgres()


@pytest.fixture
def saver() -> Iterator[PostgresSaver]:
    with postgres_saver() as s:
        yield s


def query(schema: str, statement: str, params: Any = None) -> list[tuple[Any, ...]]:
    """Run ``statement`` with ``{s}`` standing for the schema; returns its rows."""
    text = sql.SQL(statement).format(s=sql.Identifier(schema))
    with psycopg.connect(postgres_url(), autocommit=True) as conn:
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


def count(schema: str, table: str) -> int:
    return query(schema, f"SELECT count(*) FROM {{s}}.threadline_{table}")[0][0]


def chain(thread_id: str, n: int, *, size: int = 100) -> list[CheckpointRecord]:
    """``n`` records of a growing conversation, as the engine would save them. ("step" and
    "fixed" are lists so that they are stored as blobs: small scalars live in the rows.)"""
    records: list[CheckpointRecord] = []
    parent: Checkpoint | None = None
    for i in range(n):
        values = {"messages": [item(j, size) for j in range(i + 1)], "step": [i], "fixed": ["f"]}
        record = step(thread_id, values, parent, metadata={"i": i})
        records.append(record)
        parent = record.checkpoint
    return records
