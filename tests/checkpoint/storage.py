"""Looking into, and tampering with, what the durable savers keep: rows, files and keys.

For tests that check what a run leaves in storage (``stored_sizes``), or how a saver copes with
stored bytes it did not write (``rewrite_value``), on every durable backend at once. Each
function takes the saver under test and reaches its storage the way that saver's own tests do
(the SQLite file, the directory, the PostgreSQL schema, the Redis key prefix). ``reopened``
gives a second saver on the same storage, with nothing cached, to read back what was changed.

Import it as ``from storage import stored_sizes`` (``tests/checkpoint/`` is on ``sys.path``).
"""

from __future__ import annotations

import json
import sqlite3
import zlib
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from urllib.parse import quote

from threadline import serde
from threadline.checkpoint import BaseSaver, FileSaver, SqliteSaver

Change = Callable[[bytes], bytes]

# Every column that holds encoded bytes, per table (keys and ids are small next to them).
_SQLITE_BYTES = {"checkpoints": "body, metadata", "blobs": "data", "writes": "value"}
_POSTGRES_BYTES = {"checkpoints": "body, metadata", "blobs": "data", "writes": "data"}


def stored_sizes(saver: BaseSaver) -> list[int]:
    """The size in bytes of every stored row, file or key of ``saver``'s storage."""
    if isinstance(saver, SqliteSaver):
        with closing(sqlite3.connect(saver.path)) as conn:
            return [
                sum(len(c) for c in row)
                for table, columns in _SQLITE_BYTES.items()
                for row in conn.execute(f"SELECT {columns} FROM {table}")
            ]
    if isinstance(saver, FileSaver):
        return [p.stat().st_size for p in Path(saver.directory).rglob("*") if p.is_file()]
    if type(saver).__name__ == "PostgresSaver":
        return [
            sum(len(c) for c in row)
            for table, columns in _POSTGRES_BYTES.items()
            for row in _postgres(saver, f"SELECT {columns} FROM {{s}}.threadline_{table}")
        ]
    if type(saver).__name__ == "RedisSaver":
        with _redis(saver) as client:
            keys = client.scan_iter(match=_redis_glob(saver.prefix) + ":*", count=1000)
            return [client.memory_usage(k, samples=0) or 0 for k in keys]
    raise TypeError(f"no storage to look into for {type(saver).__name__}")


def rewrite_value(
    saver: BaseSaver, thread_id: str, key: str, version: str, change: Change, *, crc: bool
) -> None:
    """Replace the bytes of the full value blob of ``key`` at ``version`` (root namespace) with
    ``change(bytes)``; with ``crc`` its stored checksum is made to match, so only decoding can
    tell, else the saver's checksum catches the change first."""
    if isinstance(saver, SqliteSaver):
        _rewrite_sqlite(saver, thread_id, key, version, change, crc)
    elif isinstance(saver, FileSaver):
        _rewrite_file(saver, key, version, change, crc)
    elif type(saver).__name__ == "PostgresSaver":
        _rewrite_postgres(saver, thread_id, key, version, change, crc)
    elif type(saver).__name__ == "RedisSaver":
        _rewrite_redis(saver, thread_id, key, version, change, crc)
    else:
        raise TypeError(f"no storage to tamper with for {type(saver).__name__}")


@contextmanager
def reopened(saver: BaseSaver) -> Iterator[BaseSaver]:
    """Another saver on ``saver``'s storage: it holds no cached bytes, so it reads them all."""
    if isinstance(saver, SqliteSaver):
        fresh: BaseSaver = SqliteSaver(saver.path)
    elif isinstance(saver, FileSaver):
        fresh = FileSaver(saver.directory)
    else:  # PostgreSQL and Redis: same server, same schema or key prefix
        where = {"schema": saver.schema} if hasattr(saver, "schema") else {"prefix": saver.prefix}
        fresh = type(saver)(saver.url, **where)  # type: ignore[call-arg]
    with fresh:
        yield fresh


def _rewrite_sqlite(
    saver: SqliteSaver, thread_id: str, key: str, version: str, change: Change, crc: bool
) -> None:
    where = "WHERE thread_id = ? AND checkpoint_ns = '' AND key = ? AND version = ?"
    with closing(sqlite3.connect(saver.path)) as conn, conn:
        ((data, stored_crc),) = conn.execute(
            f"SELECT data, crc32 FROM blobs {where}", (thread_id, key, version)
        ).fetchall()
        new = change(data)
        checksum = zlib.crc32(new) if crc else stored_crc
        conn.execute(
            f"UPDATE blobs SET data = ?, crc32 = ? {where}",
            (new, checksum, thread_id, key, version),
        )


def _rewrite_file(saver: FileSaver, key: str, version: str, change: Change, crc: bool) -> None:
    (path,) = Path(saver.directory).rglob(f"{key}@{version}.blob")
    line, _, payload = path.read_bytes().partition(b"\n")
    header = json.loads(line)
    if header.pop("json", False):  # kept as readable JSON: back to the bytes it stands for
        payload = serde.dumps(json.loads(payload))
    new = change(payload)
    header["size"] = len(new)
    if crc:
        header["crc32"] = zlib.crc32(new)
    path.write_bytes(json.dumps(header).encode() + b"\n" + new)


def _rewrite_postgres(
    saver: BaseSaver, thread_id: str, key: str, version: str, change: Change, crc: bool
) -> None:
    where = "WHERE thread_id = %s AND checkpoint_ns = '' AND key = %s AND version = %s"
    blobs = "{s}.threadline_blobs"
    ((data, stored_crc),) = _postgres(
        saver, f"SELECT data, crc32 FROM {blobs} {where}", [thread_id, key, version]
    )
    new = change(bytes(data))
    checksum = zlib.crc32(new) if crc else stored_crc
    _postgres(
        saver,
        f"UPDATE {blobs} SET data = %s, crc32 = %s {where}",
        [new, checksum, thread_id, key, version],
    )


def _rewrite_redis(
    saver: BaseSaver, thread_id: str, key: str, version: str, change: Change, crc: bool
) -> None:
    name = f"{saver.prefix}:{{t:{_q(thread_id)}}}:b::{_q(key)}:{_q(version)}"  # type: ignore[attr-defined]
    with _redis(saver) as client:
        stored = client.get(name)
        assert stored is not None, name
        header, _, data = stored.partition(b"\n")
        fields = header.split(b"|")  # the seventh field is the data's CRC-32
        new = change(data)
        if crc:
            fields[6] = str(zlib.crc32(new)).encode()
        client.set(name, b"|".join(fields) + b"\n" + new)


def _postgres(saver: BaseSaver, statement: str, params: list[object] | None = None) -> list:
    import psycopg  # present whenever a PostgresSaver could be made
    from psycopg import sql

    text = sql.SQL(statement).format(s=sql.Identifier(saver.schema))  # type: ignore[attr-defined]
    with psycopg.connect(saver.url, autocommit=True) as conn:  # type: ignore[attr-defined]
        cur = conn.execute(text, params)
        return cur.fetchall() if cur.description else []


@contextmanager
def _redis(saver: BaseSaver) -> Iterator:
    import redis  # present whenever a RedisSaver could be made

    with redis.Redis.from_url(saver.url) as client:  # type: ignore[attr-defined]
        yield client


def _q(text: str) -> str:
    return quote(text, safe="")


def _redis_glob(text: str) -> str:
    return "".join("\\" + c if c in "*?[]\\" else c for c in text)
