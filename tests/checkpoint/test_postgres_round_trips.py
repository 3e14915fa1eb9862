"""The PostgreSQL saver's round trips, counted on the wire (``wire_counter.py``): one round trip
and one transaction per put, one per read, a cold cache costs one query, and a statement the
server forgot is prepared again.

Needs PostgreSQL; each saver gets a schema of its own (``postgres_fixtures.py``).
"""

from __future__ import annotations

from typing import Any

from builders import step, w
from postgres_fixtures import chain, postgres_saver, query, session_schemas_dropped, url
from wire_counter import WireCounter, counted, wire

from threadline.checkpoint.base import Retention
from threadline.checkpoint.postgres import PostgresSaver

# Fixtures of postgres_fixtures and wire_counter, imported for the tests here.
__all__ = ["counted", "session_schemas_dropped", "url", "wire"]

# -- round trips and transactions ----------------------------------------------------------------


def test_put_is_one_round_trip_and_one_transaction(
    counted: tuple[PostgresSaver, WireCounter],
) -> None:
    saver, wire = counted
    records = chain("t1", 12)
    saver.put(records[0])  # opens the pool
    for record in records[1:]:
        wire.reset()
        saver.put(record)
        assert wire.turns == 1, wire.statements
        assert len(wire.statements) == 1 and "threadline_put" in wire.statements[0]
    # The growing list went in as deltas (the cache knew every base: no extra query).
    deltas = "SELECT count(*) FROM {s}.threadline_blobs WHERE base IS NOT NULL"
    assert query(saver.schema, deltas)[0][0] >= 5
    # A put with pending writes and retention is still one round trip.
    last = records[-1].checkpoint
    nxt = step("t1", {"messages": ["new"]}, last, writes=(w("a", value=1), w("b", "error", "x")))
    saver.retention = Retention(max_checkpoints=5)
    wire.reset()
    saver.put(nxt)
    assert wire.turns == 1
    assert wire.keywords("BEGIN") == 1 and wire.keywords("COMMIT") == 1, wire.statements
    assert len(list(saver.list("t1"))) == 5


def test_reads_and_writes_round_trips(counted: tuple[PostgresSaver, WireCounter]) -> None:
    saver, wire = counted
    records = chain("t1", 5)
    for record in records:
        saver.put(record)
    head = records[-1].checkpoint
    trips: dict[str, int] = {}

    def measure(name: str, action: Any) -> None:
        wire.reset()
        action()
        trips[name] = wire.turns

    measure("get_tuple", lambda: saver.get_tuple("t1"))
    measure("get_tuple by id", lambda: saver.get_tuple("t1", "", records[1].checkpoint.id))
    measure("put_writes", lambda: saver.put_writes("t1", "", head.id, [w("x", value=1)]))
    measure("list", lambda: list(saver.list("t1")))
    measure("list filter", lambda: list(saver.list("t1", filter={"i": 2})))
    measure("list_threads", lambda: saver.list_threads())
    measure("prune", lambda: saver.prune("t1", keep_last=3))
    measure("copy_thread", lambda: saver.copy_thread("t1", "t2"))
    measure("delete_thread", lambda: saver.delete_thread("t2"))
    assert trips == {
        "get_tuple": 1,
        "get_tuple by id": 1,
        "put_writes": 1,
        "list": 1,
        "list filter": 1,  # the page brings its values: one statement
        "list_threads": 1,
        "prune": 1,
        "copy_thread": 2,
        "delete_thread": 1,
    }


async def test_aput_is_one_round_trip(counted: tuple[PostgresSaver, WireCounter]) -> None:
    saver, wire = counted
    records = chain("t1", 6)
    await saver.aput(records[0])
    for record in records[1:]:
        wire.reset()
        await saver.aput(record)
        assert wire.turns == 1
        assert len(wire.statements) == 1 and "threadline_put" in wire.statements[0]
    wire.reset()
    got = await saver.aget_tuple("t1")
    assert wire.turns == 1
    assert got is not None and got.checkpoint == records[-1].checkpoint


def test_a_cold_cache_costs_one_query(url: str, wire: WireCounter) -> None:
    warm, cold = chain("warm", 5), chain("t1", 5)
    with postgres_saver(url=wire.url(url)) as first:
        for record in [*warm, *cold[:4]]:
            first.put(record)
        # A second saver (another process, say) extends the list: it must look the base up.
        with postgres_saver(url=wire.url(url), schema=first.schema) as second:
            second.get_tuple("nobody")  # open its pool
            second.put(chain("other", 1)[0])  # the connection prepares the put statement once
            wire.reset()
            second.put(cold[4])
            assert wire.turns == 2  # the base's metadata, then the put
            got = second.get_tuple("t1")
            assert got is not None and got.checkpoint == cold[4].checkpoint
        # Stored as a delta all the same, as the saver that knew the base stored it.
        bases = [
            query(
                first.schema,
                "SELECT base IS NOT NULL FROM {s}.threadline_blobs"
                " WHERE thread_id = %s AND key = 'messages' AND version = %s",
                [r.thread_id, r.checkpoint.versions["messages"]],
            )
            for r in (warm[4], cold[4])
        ]
        assert bases == [[(True,)], [(True,)]]


def test_a_put_prepares_its_statement_again_when_the_server_forgot_it() -> None:
    """A sync put runs a statement prepared on each connection (``driver.Hot``); after a
    ``DEALLOCATE ALL`` (or a pooler's reset) it is prepared again, and nothing is lost."""
    with postgres_saver(pool_size=1) as saver:
        records = chain("t1", 3)
        saver.put(records[0])
        with saver._db._sync_pool().connection() as conn:  # the pool's only connection
            names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements")]
            assert any(n.startswith("threadline_put_") for n in names)
            conn.execute("DEALLOCATE ALL")
        saver.put(records[1])
        saver.put(records[2])
        assert [r.checkpoint for r in saver.list("t1")] == [r.checkpoint for r in reversed(records)]
