"""What the PostgreSQL saver's server-side functions read and rewrite, counted by PostgreSQL
itself (``pg_stat_get_xact_*``: this transaction's counts): a put's check reads a few index
entries however long the thread, and a head outside the root namespace is updated in place.

Same server and schema conventions as ``test_postgres_saver``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import psycopg
import pytest
from builders import step
from psycopg import sql
from services import postgres_url
from test_postgres_saver import chain, postgres_saver

from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.postgres import PostgresSaver


@pytest.fixture
def saver() -> Iterator[PostgresSaver]:
    with postgres_saver() as s:
        yield s


def in_one_transaction(schema: str, *statements: str, params: Any = None) -> list[Any]:
    """Run ``statements`` (``{s}`` is the schema) in one transaction; the last one's rows."""
    with psycopg.connect(postgres_url()) as conn:
        # As a long-lived connection runs them, after five calls: one generic plan.
        conn.execute("SET plan_cache_mode = force_generic_plan")
        rows: list[Any] = []
        for statement in statements:
            cur = conn.execute(sql.SQL(statement).format(s=sql.Identifier(schema)), params)
            rows = cur.fetchall() if cur.description else []
        conn.rollback()
        return rows


def test_a_put_checks_its_values_without_reading_the_whole_thread(saver: PostgresSaver) -> None:
    """``threadline_check_refs`` looks up each value and its base by primary key; a hashed
    ``NOT EXISTS`` read every blob of the thread on each put (cost grew with the thread)."""
    records = chain("t1", 80)
    for record in records:
        saver.put(record)
    head = records[-1].checkpoint
    refs = {"keys": list(head.versions), "versions": [str(v) for v in head.versions.values()]}
    read = in_one_transaction(
        saver.schema,
        "SELECT {s}.threadline_check_refs('t1', '', %(keys)s, %(versions)s)",
        "SELECT pg_stat_get_xact_tuples_returned(to_regclass(%(index)s))",
        params={**refs, "index": f'"{saver.schema}".threadline_blobs_pkey'},
    )
    assert read[0][0] <= 2 * len(refs["keys"])  # each value and its base, nothing else


def test_a_head_outside_the_root_namespace_is_updated_in_place(saver: PostgresSaver) -> None:
    """Root-namespace heads are listed by the time they changed (an indexed column), so their
    updates cannot be HOT; other namespaces' heads keep their time and are updated in place."""
    sub, root = step("t1", {"x": 1}, None, ns="sub"), step("t1", {"x": 1}, None)
    saver.put(sub)
    saver.put(root)
    advance = "SELECT {s}.threadline_advance_head('t1', %(ns)s, %(parent)s, %(new)s, false, '{{}}')"
    counts = (
        "SELECT pg_stat_get_xact_tuples_updated(to_regclass(%(heads)s)),"
        " pg_stat_get_xact_tuples_hot_updated(to_regclass(%(heads)s))"
    )
    times = "SELECT checkpoint_ns, updated_at FROM {s}.threadline_heads ORDER BY checkpoint_ns"
    heads = f'"{saver.schema}".threadline_heads'
    before = in_one_transaction(saver.schema, times)
    for ns, record, hot in (("sub", sub, 1), ("", root, 0)):
        params = {"ns": ns, "parent": record.checkpoint.id, "new": new_checkpoint_id()}
        params["heads"] = heads
        assert in_one_transaction(saver.schema, advance, counts, params=params) == [(1, hot)]
        after = dict(in_one_transaction(saver.schema, advance, times, params=params))
        assert (after[ns] == dict(before)[ns]) == (ns != "")
