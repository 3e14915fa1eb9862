"""Opening a database: WAL mode, the schema version check, and migrating older versions.

Version 1 kept each checkpoint's values in one blob; version 2 had today's rows in a rowid
``checkpoints`` table, with two more indexes; version 3 did not record the length of stored
lists (its chains are never compacted into prefix rows, and load as they are); version 4
rewrote each thread's row at every put. Each migration runs inside the transaction that opens
the file, so a failure leaves it as it was.
"""

from __future__ import annotations

import json
import sqlite3
import time
import zlib
from collections.abc import Callable
from typing import Any, TypeVar

import ormsgpack

from threadline import serde
from threadline.checkpoint.base import Checkpoint
from threadline.checkpoint.layout import BODY_TAG, wanted_blobs
from threadline.checkpoint.rules import created_ts, status_of
from threadline.checkpoint.sqlite.schema import (
    INSERT_BLOB,
    INSERT_CHECKPOINT,
    SCHEMA,
    SCHEMA_VERSION,
    UPSERT_THREAD,
)
from threadline.errors import SaverUnavailableError, SerializationError

_T = TypeVar("_T")


def prepare(
    conn: sqlite3.Connection, path: str, timeout: float, synchronous: str = "NORMAL"
) -> None:
    """Put a newly opened connection in WAL mode and create, check or migrate the schema.

    ``synchronous`` is one of ``SYNCHRONOUS`` (checked by the caller). One transaction: a
    migration that fails leaves the file as it was.
    """
    # Compaction frees the pages of rewritten blobs; with incremental auto-vacuum (settable only
    # before the first table exists: a no-op on older files) ``put`` gives them back to the OS.
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    # Switching to WAL needs an exclusive lock and, unlike other statements, can fail with
    # "database is locked" at once instead of waiting for the busy timeout when several
    # connections open a new file together: retry it within the timeout.
    _retry_locked(lambda: conn.execute("PRAGMA journal_mode=WAL").fetchone(), timeout)
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS threadline_schema_version (version INTEGER NOT NULL)"
        )
        (found,) = conn.execute("SELECT MAX(version) FROM threadline_schema_version").fetchone()
        _check_version(conn, path, found)
        _upgrade(conn, path, found)
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _check_version(conn: sqlite3.Connection, path: str, found: int | None) -> None:
    """Refuse a file of a newer threadline, or another tool's tables under our names."""
    if found is not None and found > SCHEMA_VERSION:
        raise SaverUnavailableError(
            f"SQLite checkpoint database {path!r} has schema version {found}: it "
            f"was written by a newer threadline (this one reads up to version "
            f"{SCHEMA_VERSION}); upgrade threadline to open it"
        )
    if found is None:
        foreign = conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('checkpoints', 'blobs', 'writes', 'threads') ORDER BY name"
        ).fetchall()
        if foreign:
            raise SaverUnavailableError(
                f"SQLite database {path!r} has tables threadline did not create "
                f"({', '.join(t for (t,) in foreign)}): is it another tool's database?"
            )


def _upgrade(conn: sqlite3.Connection, path: str, found: int | None) -> None:
    """Create the schema in a new file, or migrate an older one to ``SCHEMA_VERSION``."""
    if found == 1:
        try:
            migrate_v1(conn)
        except (SerializationError, ValueError, TypeError) as exc:
            raise SaverUnavailableError(
                f"cannot migrate SQLite checkpoint database {path!r} from schema "
                f"version 1 to {SCHEMA_VERSION}: {exc}; the file was left unchanged"
            ) from exc
    elif found == 2:
        migrate_v2(conn)
    elif found == 3:
        migrate_v3(conn)
    elif found == 4:
        migrate_v4(conn)
    elif found == 5:
        migrate_v5(conn)
    else:
        for statement in SCHEMA:
            conn.execute(statement)
        if found is None:
            conn.execute(
                "INSERT INTO threadline_schema_version (version) VALUES (?)", (SCHEMA_VERSION,)
            )


def _retry_locked(action: Callable[[], _T], timeout: float) -> _T:
    """Run ``action``, again while SQLite says the file is locked or busy, up to ``timeout``."""
    deadline = time.monotonic() + timeout
    delay = 0.001
    while True:
        try:
            return action()
        except sqlite3.OperationalError as exc:
            message = str(exc).lower()
            if ("locked" not in message and "busy" not in message) or (
                time.monotonic() >= deadline
            ):
                raise
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


# ------------------------------------------------------------------- raw msgpack (migration)
#
# Migrating a version-1 database and collecting unused blobs read a few fields of stored
# checkpoints. Doing it at the msgpack level, leaving typed ext values as opaque bytes, means it
# never needs the classes inside the values registered (and never decodes what it does not
# need). The layout is serde's format version 1: a 2-byte header, then msgpack; a record
# (dataclass) is ext 14 holding ``[name, {field: value}]``, a tuple ext 1 holding an array.

_PLAIN_HEADER = b"\x01\x00"  # serde format version 1, no flags (no compression, no encryption)
_EXT_TUPLE, _EXT_RECORD = 1, 14


class _RawExt:
    __slots__ = ("code", "data")

    def __init__(self, code: int, data: bytes) -> None:
        self.code = code
        self.data = data


def _raw_unpack(data: bytes) -> Any:
    return ormsgpack.unpackb(data, ext_hook=_RawExt)


def _raw_pack(obj: Any) -> bytes:
    def default(value: Any) -> Any:
        if type(value) is _RawExt:
            return ormsgpack.Ext(value.code, value.data)
        raise TypeError(type(value).__name__)

    return ormsgpack.packb(obj, default=default)


def _raw_record(ext: Any) -> tuple[list[Any], dict[str, Any]]:
    """``(items, fields)`` of a raw record ext; ``items[1] is fields``. ValueError if not one."""
    if type(ext) is not _RawExt or ext.code != _EXT_RECORD:
        raise ValueError("not a record")
    items = _raw_unpack(ext.data)
    if type(items) is not list or len(items) < 2 or type(items[1]) is not dict:
        raise ValueError("malformed record")
    return items, items[1]


def _raw_blob(blob: bytes) -> Any:
    if blob[:2] != _PLAIN_HEADER:
        raise ValueError("not a plain serde blob")
    return _raw_unpack(blob[2:])


def body_versions(body: bytes) -> dict[str, str] | None:
    """The versions of the values a stored checkpoint body keeps in blobs (not those it holds
    inline), or ``None`` if it cannot be read."""
    try:
        stored = _raw_blob(body)
        if type(stored) is list and stored and stored[0] == BODY_TAG:
            versions = stored[5]  # see layout._body
            if len(stored) > 9 and type(stored[9]) is dict:
                versions = {k: v for k, v in versions.items() if k not in stored[9]}
        else:
            versions = _raw_record(stored)[1]["versions"]
        if type(versions) is dict and all(type(v) is str for v in versions.values()):
            return versions
    except Exception:
        pass
    try:
        _, refs = wanted_blobs(body)
    except SerializationError:
        return None
    return dict(refs)


def body_next(body: bytes, codec: serde.Serializer = serde.DEFAULT) -> tuple[str, ...]:
    """The names of the tasks a stored checkpoint body plans (their arguments left undecoded,
    so a ``Send`` payload of an unregistered class does not keep a thread out of a listing)."""
    try:
        stored = _raw_blob(body)
        if type(stored) is list and stored and stored[0] == BODY_TAG:
            names = tuple(task[0] for task in stored[6])  # see layout._body
            if all(type(n) is str for n in names):
                return names
    except Exception:
        pass
    cp, _ = wanted_blobs(body, codec)
    return tuple(t.name for t in cp.next)


def _v1_values(values_blob: bytes) -> dict[str, bytes]:
    """A version-1 values blob (all values in one dict) split into one blob per key."""
    try:
        raw = _raw_blob(values_blob)
        if type(raw) is not dict or not all(type(k) is str for k in raw):
            raise ValueError("not a dict with str keys")
        return {key: _PLAIN_HEADER + _raw_pack(value) for key, value in raw.items()}
    except Exception:  # not the plain layout: decode and re-encode (needs registered classes)
        values = serde.loads(values_blob)
        return {key: serde.dumps(value, path_prefix=key) for key, value in values.items()}


def _v1_body(checkpoint_blob: bytes, versions: dict[str, str]) -> tuple[bytes, tuple[str, ...]]:
    """A version-1 checkpoint blob with new ``versions``; and the names of its planned tasks."""
    try:
        items, fields = _raw_record(_raw_blob(checkpoint_blob))
        fields["versions"] = versions
        fields["values"] = {}
        planned = fields["next"]
        if type(planned) is not _RawExt or planned.code != _EXT_TUPLE:
            raise ValueError("next is not a tuple")
        names = tuple(str(_raw_record(task)[1]["name"]) for task in _raw_unpack(planned.data))
        body = _PLAIN_HEADER + _raw_pack(_RawExt(_EXT_RECORD, _raw_pack(items)))
        return body, names
    except Exception:  # not the plain layout: decode and re-encode (needs registered classes)
        cp = serde.loads(checkpoint_blob)
        if not isinstance(cp, Checkpoint):
            raise SerializationError(f"stored checkpoint decoded to {type(cp).__name__}") from None
        new = Checkpoint(
            cp.id,
            cp.parent_id,
            cp.step,
            {},
            versions,
            cp.next,
            cp.created_at,
            cp.barriers,
            cp.updated_by,
        )
        return serde.dumps(new), tuple(t.name for t in cp.next)


def migrate_v2(conn: sqlite3.Connection) -> None:
    """Schema 2 -> 3, inside the caller's transaction: the same rows, stored more compactly.

    Version 3 keeps checkpoints in a ``WITHOUT ROWID`` table (the primary key is the table, not
    a second copy of every key in an index), and drops two indexes every ``put`` paid for:
    ``blobs_by_chain`` (a chain is read as a range of the primary key) and ``threads_by_status``
    (``list_threads`` filters the ``threads_by_update`` order instead).
    """
    conn.execute("ALTER TABLE checkpoints RENAME TO threadline_v2_checkpoints")
    for statement in SCHEMA:
        conn.execute(statement)
    columns = (
        "thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, created_ts, body, "
        "metadata"
    )
    conn.execute(
        f"INSERT INTO checkpoints ({columns}) SELECT {columns} FROM threadline_v2_checkpoints"
    )
    conn.execute("DROP TABLE threadline_v2_checkpoints")
    conn.execute("DROP INDEX IF EXISTS threads_by_status")
    conn.execute("DROP INDEX IF EXISTS blobs_by_chain")
    migrate_v3(conn)


def migrate_v3(conn: sqlite3.Connection) -> None:
    """Schema 3 -> 4: blobs gain ``items``, the length of a stored list (NULL in old rows)."""
    columns = {row[1] for row in conn.execute("PRAGMA table_info(blobs)")}
    if "items" not in columns:
        conn.execute("ALTER TABLE blobs ADD COLUMN items INTEGER")
    migrate_v4(conn)


def migrate_v4(conn: sqlite3.Connection) -> None:
    """Schema 4 -> 5: a thread row is written when its status changes, not at every put, and
    ``list_threads`` orders by its head instead, so its ``updated_at`` index goes."""
    conn.execute("DROP INDEX IF EXISTS threads_by_update")
    migrate_v5(conn)


def migrate_v5(conn: sqlite3.Connection) -> None:
    """Schema 5 -> 6: checkpoint rows may hold small scalar values (``layout.inlined``). The
    tables are unchanged and old rows load as they are; the new number keeps an older
    threadline, which would call such rows malformed, out of the file."""
    conn.execute("UPDATE threadline_schema_version SET version = ?", (SCHEMA_VERSION,))


def migrate_v1(conn: sqlite3.Connection) -> None:
    """Schema 1 -> 2, inside the caller's transaction.

    Version 1 kept each checkpoint's values in one blob, with integer versions. Each v1
    checkpoint becomes a v2 row whose every value is a full blob under the checkpoint's own id
    as version (nothing is shared between checkpoints, which is simple and always right). The
    ``writes`` table is unchanged; the ``threads`` table is built from each thread's newest
    root checkpoint.
    """
    conn.execute("ALTER TABLE checkpoints RENAME TO threadline_v1_checkpoints")
    for statement in SCHEMA:
        conn.execute(statement)
    heads: dict[str, tuple[str, str, tuple[str, ...]]] = {}  # thread -> (id, created_at, next)
    last = -1
    while True:
        batch = conn.execute(
            "SELECT rowid, thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at,"
            " checkpoint, values_blob, metadata FROM threadline_v1_checkpoints"
            " WHERE rowid > ? ORDER BY rowid LIMIT 100",
            (last,),
        ).fetchall()
        if not batch:
            break
        for rowid, thread_id, ns, cid, parent, step, created_at, cp_blob, values, meta in batch:
            last = rowid
            try:
                blobs = _v1_values(values)
                body, names = _v1_body(cp_blob, dict.fromkeys(blobs, cid))
            except Exception as exc:
                raise SerializationError(
                    f"checkpoint {cid} of thread {thread_id!r} (namespace {ns!r}) cannot be "
                    f"read ({exc}); delete that row from the checkpoints table to migrate"
                ) from exc
            conn.execute(
                INSERT_CHECKPOINT,
                (thread_id, ns, cid, parent, step, created_at, created_ts(created_at), body, meta),
            )
            conn.executemany(
                INSERT_BLOB,
                [
                    (thread_id, ns, key, cid, cid, None, 0, len(data), zlib.crc32(data), data, None)
                    for key, data in blobs.items()
                ],
            )
            if ns == "" and (thread_id not in heads or cid > heads[thread_id][0]):
                heads[thread_id] = (cid, created_at, names)
    for thread_id, (cid, created_at, names) in heads.items():
        keys = conn.execute(
            "SELECT task_id, kind FROM writes "
            "WHERE thread_id = ? AND checkpoint_ns = '' AND checkpoint_id = ?",
            (thread_id, cid),
        ).fetchall()
        conn.execute(
            UPSERT_THREAD,
            (thread_id, status_of(names, keys), cid, created_at, json.dumps(list(names))),
        )
    conn.execute("DROP TABLE threadline_v1_checkpoints")
    conn.execute("UPDATE threadline_schema_version SET version = ?", (SCHEMA_VERSION,))
