"""Setting up the PostgreSQL saver's schema: idempotent and safe concurrently, versioned (newer
tables refused, older ones migrated), asked for when missing, and schemas keeping savers
apart.

Needs PostgreSQL; each saver gets a schema of its own (``postgres_fixtures.py``).
"""

from __future__ import annotations

import threading

import pytest
from builders import step
from postgres_fixtures import (
    chain,
    drop_schemas,
    new_schema,
    postgres_saver,
    query,
    session_schemas_dropped,
    url,
)

from threadline.checkpoint.postgres import SCHEMA_VERSION, PostgresSaver
from threadline.checkpoint.postgres import connections as connections_module
from threadline.checkpoint.postgres import saver as saver_module
from threadline.errors import SaverUnavailableError

# Fixtures of postgres_fixtures, imported for the tests here.
__all__ = ["session_schemas_dropped", "url"]

# -- setup, schema versions, isolation -----------------------------------------------------------


def test_setup_is_idempotent_and_safe_to_run_concurrently(url: str) -> None:
    schema = new_schema()
    savers = [PostgresSaver(url, schema=schema) for _ in range(8)]
    gate = threading.Barrier(len(savers))
    errors: list[BaseException] = []

    def run(s: PostgresSaver) -> None:
        try:
            gate.wait()
            s.setup()
            s.setup()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in savers]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        assert query(schema, "SELECT version FROM {s}.threadline_schema_version") == [
            (SCHEMA_VERSION,)
        ]
        tables = query(
            schema,
            "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1",
            [schema],
        )
        assert [t[0] for t in tables] == [
            "threadline_blobs",
            "threadline_checkpoints",
            "threadline_heads",
            "threadline_schema_version",
            "threadline_writes",
        ]
        savers[0].put(step("t1", {"x": 1}, None))
        assert savers[-1].get_tuple("t1") is not None
    finally:
        for s in savers:
            s.close()
        drop_schemas(schema)


async def test_tables_of_a_newer_threadline_are_refused(url: str) -> None:
    with postgres_saver() as saver:
        query(
            saver.schema,
            "UPDATE {s}.threadline_schema_version SET version = %s",
            [SCHEMA_VERSION + 1],
        )
        for call in ("setup", "get_tuple", "put"):
            with PostgresSaver(url, schema=saver.schema) as other:
                with pytest.raises(SaverUnavailableError) as info:
                    if call == "setup":
                        other.setup()
                    elif call == "get_tuple":
                        other.get_tuple("t1")
                    else:
                        other.put(step("t1", {"x": 1}, None))
                assert f"schema version {SCHEMA_VERSION + 1}" in str(info.value)
                assert "upgrade threadline" in str(info.value)
        other = PostgresSaver(url, schema=saver.schema)
        with pytest.raises(SaverUnavailableError, match="newer threadline"):
            await other.aget_tuple("t1")
        await other.aclose()


def test_setup_migrates_an_older_schema_and_keeps_its_data(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next version adds a column and needs ``threadline_put`` made again: a schema
    at the current version (its function dropped) is brought to the next by ``setup``, and its
    checkpoints load and can be built on; a schema older than any migration (version 1: the
    loop's metadata as bytes) is refused."""
    records = chain("t1", 4)
    current, synthetic = SCHEMA_VERSION, SCHEMA_VERSION + 1
    with postgres_saver() as old:
        for record in records[:3]:
            old.put(record)
        query(old.schema, "DROP FUNCTION {s}.threadline_put")
        monkeypatch.setattr(saver_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(connections_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(
            saver_module, "MIGRATIONS", {current: ("ALTER TABLE {blobs} ADD COLUMN note text",)}
        )
        with PostgresSaver(url, schema=old.schema) as new:
            with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
                new.put(records[3])
            new.setup()
            new.setup()  # migrated once: the column is not added again
            versions = query(old.schema, "SELECT version FROM {s}.threadline_schema_version")
            assert versions == [(synthetic,)]
            assert query(old.schema, "SELECT count(note) FROM {s}.threadline_blobs") == [(0,)]
            got = new.get_tuple("t1")
            assert got is not None and got.checkpoint == records[2].checkpoint
            new.put(records[3])
            assert [r.checkpoint for r in new.list("t1")] == [
                r.checkpoint for r in reversed(records)
            ]
        query(old.schema, "UPDATE {s}.threadline_schema_version SET version = 1")
        with (
            PostgresSaver(url, schema=old.schema) as new,
            pytest.raises(SaverUnavailableError, match="format version 1, which this"),
        ):
            new.setup()


def test_missing_tables_say_to_call_setup(url: str) -> None:
    with PostgresSaver(url, schema=new_schema()) as saver:
        with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
            saver.get_tuple("t1")
        with pytest.raises(SaverUnavailableError, match=r"call saver.setup\(\)"):
            saver.put(step("t1", {"x": 1}, None))


def test_schemas_keep_savers_apart(url: str) -> None:
    odd = new_schema() + ' we"ird. schema'  # quoted identifiers all the way
    with postgres_saver() as a, postgres_saver(schema=odd) as b:
        assert a.schema != b.schema
        ra = step("t1", {"who": "a"}, None)
        rb = step("t1", {"who": "b"}, None)
        a.put(ra)
        b.put(rb)  # parent None: b's thread t1 is empty, whatever a holds
        got_a, got_b = a.get_tuple("t1"), b.get_tuple("t1")
        assert got_a is not None and got_a.checkpoint.values == {"who": "a"}
        assert got_b is not None and got_b.checkpoint.values == {"who": "b"}
        assert [t.thread_id for t in b.list_threads()] == ["t1"]
        b.delete_thread("t1")
        assert a.get_tuple("t1") is not None
    assert drop_schemas(odd) == [odd]  # (a schema given to the factory is the caller's)
    left = "SELECT nspname FROM pg_namespace WHERE nspname IN (%s, %s)"
    left = query("public", left, [a.schema, b.schema])
    assert left == []  # the factory dropped its own schema


def test_from_conn_string_and_from_url_set_up(url: str) -> None:
    from threadline.checkpoint.urls import from_url

    schema = new_schema()
    try:
        with PostgresSaver.from_conn_string(url, schema=schema) as saver:
            saver.put(step("t1", {"x": 1}, None))
        with from_url(url, schema=schema) as again:
            assert isinstance(again, PostgresSaver)
            got = again.get_tuple("t1")
            assert got is not None and got.checkpoint.values == {"x": 1}
    finally:
        drop_schemas(schema)
