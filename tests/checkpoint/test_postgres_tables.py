"""What the PostgreSQL saver's server-side functions read and rewrite, counted by PostgreSQL
itself (``pg_stat_get_xact_*``: this transaction's counts): a put's check reads a few index
entries however long the thread, and a head is updated in place; and how many bytes a
checkpoint's row costs.

Same server and schema conventions as ``postgres_fixtures.py``.
"""

from __future__ import annotations

from typing import Any

import psycopg
from builders import counter_graph, step
from postgres_fixtures import chain, saver
from psycopg import sql
from services import postgres_url

from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.postgres import PostgresSaver

__all__ = ["saver"]  # a fixture of postgres_fixtures, imported for the tests here


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
    """Every head is updated in place (HOT: no index covers the time a root head changed);
    other namespaces' heads keep their time."""
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
    for ns, record, hot in (("sub", sub, 1), ("", root, 1)):
        params = {"ns": ns, "parent": record.checkpoint.id, "new": new_checkpoint_id()}
        params["heads"] = heads
        assert in_one_transaction(saver.schema, advance, counts, params=params) == [(1, hot)]
        after = dict(in_one_transaction(saver.schema, advance, times, params=params))
        assert (after[ns] == dict(before)[ns]) == (ns != "")


def test_a_counter_step_costs_at_most_200_bytes_of_checkpoint_rows(saver: PostgresSaver) -> None:
    """A step that only moves a counter writes one compact row (no metadata bytes: the loop's
    is rebuilt from the step): with its key's index, at most 200 bytes of the checkpoints table
    a checkpoint (table, indexes and TOAST); the head is updated in place."""
    builder = counter_graph(2000)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 4000}
    assert builder.compile(checkpointer=saver).invoke({"n": 0}, config) == {"n": 2000}
    # The table, its indexes and TOAST; not the free-space and visibility maps, which autovacuum
    # adds (32 KB) whenever it happens to visit the table.
    size = (
        "SELECT pg_relation_size(c.oid) + pg_indexes_size(c.oid)"
        " + COALESCE(pg_total_relation_size(NULLIF(c.reltoastrelid, 0)), 0),"
        " pg_relation_size(c.oid) FROM pg_class c WHERE c.oid = to_regclass(%(t)s)"
    )
    table = f'"{saver.schema}".threadline_{{}}'
    counted = "SELECT count(*) FROM {s}.threadline_checkpoints"
    ((count,),) = in_one_transaction(saver.schema, counted)
    ((rows, _),) = in_one_transaction(saver.schema, size, params={"t": table.format("checkpoints")})
    ((_, heads),) = in_one_transaction(saver.schema, size, params={"t": table.format("heads")})
    # Updated in place, the head's 2,001 old versions are pruned from its page: a few pages, not
    # the ~220 KB of keeping them all (pruning waits while any session, autovacuum's ANALYZE
    # too, holds an older snapshot, so the exact count of pages varies from run to run).
    assert count == 2002 and rows / count <= 200 and heads <= 65536
