"""The PostgreSQL saver's errors: an unreachable server reported without its password, a closed
saver, damaged values naming their key, and a dropped connection reported then reconnected.

Needs PostgreSQL; each saver gets a schema of its own (``postgres_fixtures.py``).
"""

from __future__ import annotations

import socket
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest
from builders import step, w
from postgres_fixtures import chain, postgres_saver, query, saver, session_schemas_dropped, url

from threadline.checkpoint.postgres import PostgresSaver, mask_url
from threadline.errors import SaverUnavailableError, SerializationError

# Fixtures of postgres_fixtures, imported for the tests here.
__all__ = ["saver", "session_schemas_dropped", "url"]

# -- errors --------------------------------------------------------------------------------------


def _dead_url(url: str, password: str) -> str:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    parts = urlsplit(url)
    user = parts.username or "root"
    return urlunsplit((parts.scheme, f"{user}:{password}@127.0.0.1:{port}", parts.path, "", ""))


async def test_an_unreachable_server_is_reported_without_the_password(url: str) -> None:
    secret = "s3cr3t-pw"
    dead = _dead_url(url, secret)
    saver = PostgresSaver(dead, connect_timeout=2)
    for action in (saver.setup, lambda: saver.get_tuple("t1")):
        with pytest.raises(SaverUnavailableError) as info:
            action()
        message = str(info.value)
        assert "cannot reach PostgreSQL" in message and ":***@127.0.0.1:" in message
        assert secret not in message and secret not in repr(saver)
    with pytest.raises(SaverUnavailableError) as ainfo:
        await saver.aput(step("t1", {"x": 1}, None))
    assert ":***@" in str(ainfo.value) and secret not in str(ainfo.value)
    await saver.aclose()


def test_mask_url() -> None:
    assert mask_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert mask_url("postgresql://u@h/db") == "postgresql://u@h/db"
    assert mask_url("postgresql://h/db?password=pw&sslmode=x") == (
        "postgresql://h/db?password=***&sslmode=x"
    )
    assert mask_url("host=h password='p w' dbname=d") == "host=h password=*** dbname=d"


def test_a_closed_saver_refuses_calls(url: str) -> None:
    with postgres_saver() as saver:
        saver.put(step("t1", {"x": 1}, None))
    saver.close()  # idempotent
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t1")


def _corrupt(schema: str, key: str, how: str) -> int:
    if how == "truncate":
        statement = "UPDATE {s}.threadline_blobs SET data = substring(data from 1 for 3)"
    else:  # same length, one byte changed: only the checksum can tell
        statement = (
            "UPDATE {s}.threadline_blobs SET data = set_byte(data, length(data) - 1,"
            " (get_byte(data, length(data) - 1) + 1) %% 256)"
        )
    rows = query(schema, statement + " WHERE key = %s RETURNING version", [key])
    return len(rows)


@pytest.mark.parametrize("how", ["truncate", "flip"])
async def test_a_damaged_value_fails_naming_its_key(saver: PostgresSaver, how: str) -> None:
    records = chain("t1", 4)
    for record in records:
        saver.put(record)
    saver.put_writes("t1", "", records[-1].checkpoint.id, [w("a", value=1)])
    assert _corrupt(saver.schema, "messages", how) >= 2  # a full blob and deltas
    with postgres_saver(schema=saver.schema) as fresh:  # nothing cached
        with pytest.raises(SerializationError, match="'messages'"):
            fresh.get_tuple("t1")
        with pytest.raises(SerializationError, match="'messages'"):
            await fresh.aget_tuple("t1", "", records[0].checkpoint.id)
        with pytest.raises(SerializationError, match="'messages'"):
            list(fresh.list("t1"))


def test_a_connection_dropped_under_a_put_is_reported_and_the_next_put_reconnects(
    url: str,
) -> None:
    """The sync put runs on libpq itself: a dead connection must still be the saver's
    ``SaverUnavailableError`` (not a bare psycopg error), and lose nothing saved."""
    with postgres_saver(pool_size=1) as saver:
        first = step("t1", {"n": [1]}, None)
        saver.put(first)
        with psycopg.connect(url, autocommit=True) as admin:
            killed = admin.execute(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE pid <> pg_backend_pid() AND query LIKE %s",
                [f"%{saver.schema}%"],
            ).fetchone()
        assert killed is not None and killed[0] == 1
        second = step("t1", {"n": [1, 2]}, first.checkpoint)
        with pytest.raises(SaverUnavailableError, match="cannot reach PostgreSQL"):
            saver.put(second)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == first.checkpoint
        saver.put(second)
        got = saver.get_tuple("t1")
        assert got is not None and got.checkpoint == second.checkpoint
