"""A saver backed by PostgreSQL (psycopg 3), for many processes and machines sharing threads.

Tables (in ``schema``, all named ``threadline_*``; DDL in ``_DDL``):

- ``heads``: one row per (thread, namespace) naming its newest checkpoint. ``put`` is a
  compare-and-set on this row (``threadline_advance_head``, the rule of ``memory.check_put``):
  it moves only from the checkpoint the new one was computed from (anywhere for a fork), and
  only to an id that sorts after it. Root-namespace rows also keep the planned task names and
  the time of the last change, so they serve ``list_threads`` (the "threads table").
- ``checkpoints``: the checkpoint without its values (``layout.encode_record``), its encoded
  metadata, and the ``(key, version)`` of every value in the clear, so loading fetches blobs
  and chains, and pruning finds unused blobs, in SQL without decoding anything.
- ``blobs``: one immutable row per stored value (full, or a delta on a list), keyed by
  (thread, namespace, key, version), with a CRC-32 of its bytes checked on load.
- ``writes``: pending writes, in insertion order (``seq``).
- ``schema_version`` (1).

Round trips: an operation's statements go in psycopg pipeline mode together with its ``BEGIN``
and ``COMMIT``, so ``put`` (head, row, blobs, check, writes, retention), ``put_writes``,
``get_tuple``, ``delete_thread``, ``prune`` and a page of ``list`` each take one round trip and
one transaction. ``put`` takes one more when the blob cache misses a base a list delta needs,
and a put that fails takes one more for the rollback (after a lost compare-and-set, or once
when values it relies on turned out not to be stored, before it is retried with them stored
in full). Sync methods run on a ``psycopg_pool.ConnectionPool``; the ``a*`` methods are native
async on an ``AsyncConnectionPool`` per event loop, opened on first use; neither serialises
calls: they run concurrently up to the pool size, and puts on one thread wait only for each
other, on its head row.

Every value goes into SQL as a bound parameter; metadata filters are applied in Python after
decoding, so a filter key never reaches SQL.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import threading
import zlib
from collections import OrderedDict
from collections.abc import AsyncIterator, Generator, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout

from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
)
from threadline.checkpoint.layout import (
    BlobRow,
    EncodedCheckpoint,
    WriteRow,
    assemble_values,
    decode_metadata,
    decode_write,
    encode_record,
    encode_writes,
    referenced_blobs,
    wanted_blobs,
)
from threadline.checkpoint.memory import (
    _check_keep_last,
    age_cutoff,
    check_put,
    created_ts,
    full_blobs,
    status_of,
)
from threadline.errors import ConcurrentUpdateError, SaverUnavailableError, SerializationError

__all__ = ["SCHEMA_VERSION", "PostgresSaver", "mask_url"]

SCHEMA_VERSION = 1

_CAS_SQLSTATE = "TL409"  # raised by threadline_advance_head when the head moved
_REFS_SQLSTATE = "TL410"  # raised by threadline_check_refs when values are not stored
_MISSING_SQLSTATES = {"42P01", "42883", "3F000"}  # undefined table / function, no such schema
_PAGE_SIZE = 64
_CACHE_SIZE = 50_000

_T = TypeVar("_T")


# --------------------------------------------------------------------------------------------
# SQL
# --------------------------------------------------------------------------------------------

_DDL_VERSION_TABLE = """
CREATE TABLE IF NOT EXISTS {version} (
    version integer NOT NULL
)
"""

_DDL = (
    """
CREATE TABLE IF NOT EXISTS {heads} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    head          text COLLATE "C",
    next          text[]      NOT NULL DEFAULT '{{}}',
    updated_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, checkpoint_ns)
)
""",
    """
CREATE INDEX IF NOT EXISTS {heads_recent_name} ON {heads} (updated_at DESC, thread_id DESC)
    WHERE checkpoint_ns = ''
""",
    """
CREATE TABLE IF NOT EXISTS {cps} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    parent_id     text COLLATE "C",
    step          integer     NOT NULL,
    created_at    timestamptz,
    body          bytea       NOT NULL,
    metadata      bytea       NOT NULL,
    blob_keys     text[] COLLATE "C" NOT NULL,
    blob_versions text[] COLLATE "C" NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
)
""",
    """
CREATE TABLE IF NOT EXISTS {blobs} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    key           text COLLATE "C" NOT NULL,
    version       text COLLATE "C" NOT NULL,
    start         text COLLATE "C" NOT NULL,
    base          text COLLATE "C",
    chain_bytes   bigint NOT NULL,
    full_bytes    bigint NOT NULL,
    crc32         bigint NOT NULL,
    data          bytea  NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, key, version)
)
""",
    """
CREATE TABLE IF NOT EXISTS {writes} (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    kind          text COLLATE "C" NOT NULL,
    task_name     text   NOT NULL,
    seq           bigint GENERATED ALWAYS AS IDENTITY,
    data          bytea  NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, kind)
)
""",
    # The compare-and-set of ``put`` (``memory.check_put`` in SQL): make sure the head row
    # exists, then move it only from the expected parent (from anywhere, for a fork), and only
    # forward: the new id must sort after the head. The UPDATE row-locks the head until the
    # transaction ends, so puts on one (thread, namespace) serialise here and nowhere else.
    """
CREATE OR REPLACE FUNCTION {advance}(
    p_thread text, p_ns text, p_parent text, p_new text, p_fork boolean, p_next text[]
) RETURNS void LANGUAGE plpgsql AS $threadline$
DECLARE
    v_actual text;
BEGIN
    INSERT INTO {heads} (thread_id, checkpoint_ns, head, next, updated_at)
    VALUES (p_thread, p_ns, NULL, '{{}}', clock_timestamp())
    ON CONFLICT (thread_id, checkpoint_ns) DO NOTHING;
    UPDATE {heads} AS h
       SET head = p_new, next = p_next, updated_at = clock_timestamp()
     WHERE h.thread_id = p_thread AND h.checkpoint_ns = p_ns
       AND (p_fork OR h.head IS NOT DISTINCT FROM p_parent)
       AND (h.head IS NULL OR p_new > h.head);
    IF NOT FOUND THEN
        SELECT h.head INTO v_actual FROM {heads} AS h
         WHERE h.thread_id = p_thread AND h.checkpoint_ns = p_ns;
        RAISE EXCEPTION 'threadline: thread moved on since the checkpoint was computed'
            USING ERRCODE = 'TL409',
                  DETAIL = json_build_object('actual', v_actual)::text;
    END IF;
END
$threadline$
""",
    # Run last in ``put``: every value of the new checkpoint must be stored, and every delta it
    # uses must still have its base (a value the hints called unchanged, or a base a stale cache
    # vouched for, may be gone). If not, it raises (SQLSTATE ``TL410``) with the keys, and the
    # put is retried once with those values stored in full.
    """
CREATE OR REPLACE FUNCTION {check_refs}(
    p_thread text, p_ns text, p_keys text[], p_versions text[]
) RETURNS void LANGUAGE plpgsql AS $threadline$
DECLARE
    v_missing text[];
BEGIN
    SELECT array_agg(DISTINCT r.key) INTO v_missing
      FROM unnest(p_keys, p_versions) AS r(key, version)
      LEFT JOIN {blobs} b
        ON b.thread_id = p_thread AND b.checkpoint_ns = p_ns
       AND b.key = r.key AND b.version = r.version
     WHERE b.key IS NULL
        OR (b.base IS NOT NULL AND NOT EXISTS (
                SELECT 1 FROM {blobs} a
                 WHERE a.thread_id = p_thread AND a.checkpoint_ns = p_ns
                   AND a.key = b.key AND a.version = b.base));
    IF v_missing IS NOT NULL THEN
        RAISE EXCEPTION 'threadline: values of the checkpoint are not stored'
            USING ERRCODE = 'TL410', DETAIL = array_to_json(v_missing)::text;
    END IF;
END
$threadline$
""",
)

_CHECK_REFS = (
    "SELECT {check_refs}(%(thread)s, %(ns)s, %(blob_keys)s::text[], %(blob_versions)s::text[])"
)

_ADVANCE = "SELECT {advance}(%(thread)s, %(ns)s, %(parent)s, %(cid)s, %(fork)s, %(next)s::text[])"

# Never an upsert: the head's compare-and-set guarantees the id is new.
_INSERT_CHECKPOINT = """
INSERT INTO {cps} (
    thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, body, metadata,
    blob_keys, blob_versions
) VALUES (
    %(thread)s, %(ns)s, %(cid)s, %(parent)s, %(step)s, %(created_at)s, %(body)b, %(metadata)b,
    %(blob_keys)s::text[], %(blob_versions)s::text[]
)
"""

# Blobs are immutable: a (key, version) stored once is never rewritten.
_INSERT_BLOBS = """
INSERT INTO {blobs} (
    thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32, data
)
SELECT %(thread)s, %(ns)s, b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes,
       b.crc32, b.data
  FROM unnest(%(keys)s::text[], %(versions)s::text[], %(starts)s::text[], %(bases)s::text[],
              %(chain_bytes)s::bigint[], %(full_bytes)s::bigint[], %(crc32)s::bigint[],
              %(data)b::bytea[])
       AS b(key, version, start, base, chain_bytes, full_bytes, crc32, data)
ON CONFLICT (thread_id, checkpoint_ns, key, version) DO NOTHING
"""

# ``seq`` (an identity) numbers new writes in the order given; replacing one keeps its place.
_UPSERT_WRITES = """
INSERT INTO {writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data)
SELECT %(thread)s, %(ns)s, %(cid)s, w.task_id, w.kind, w.task_name, w.data
  FROM unnest(%(task_ids)s::text[], %(kinds)s::text[], %(task_names)s::text[], %(data)b::bytea[])
       WITH ORDINALITY AS w(task_id, kind, task_name, data, ord)
 ORDER BY w.ord
ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, kind) DO UPDATE SET
    task_name = excluded.task_name,
    data = excluded.data
"""

# Lock the head first (as ``put`` does), so writes and saves of one thread never deadlock.
_TOUCH_HEAD = """
UPDATE {heads} SET updated_at = clock_timestamp()
 WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND head = %(cid)s
"""

_SELECT_BASES = """
SELECT b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes
  FROM {blobs} b
  JOIN unnest(%(keys)s::text[], %(versions)s::text[]) AS n(key, version)
    ON b.key = n.key AND b.version = n.version
 WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
"""

# Which checkpoints a load is about; ``{col}`` is the checkpoint id column to constrain.
_TARGET_LATEST = (
    "{col} = (SELECT h.head FROM {heads} h"
    " WHERE h.thread_id = %(thread)s AND h.checkpoint_ns = %(ns)s)"
)
_TARGET_ONE = "{col} = %(cid)s"
_TARGET_IDS = "{col} = ANY(%(ids)s::text[])"
_PAGE_IDS = (
    "SELECT p.checkpoint_id FROM {cps} p"
    " WHERE p.thread_id = %(thread)s AND p.checkpoint_ns = %(ns)s{before}"
    " ORDER BY p.checkpoint_id DESC LIMIT %(n)s"
)
_TARGET_PAGE = "{col} IN (" + _PAGE_IDS + ")"

_SELECT_CHECKPOINTS = """
SELECT c.checkpoint_id, c.body, c.metadata FROM {cps} c
 WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND {target}
 ORDER BY c.checkpoint_id DESC
"""

_SELECT_WRITES = """
SELECT w.checkpoint_id, w.task_id, w.kind, w.task_name, w.data FROM {writes} w
 WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = %(ns)s AND {target}
 ORDER BY w.seq
"""

# Every blob the target checkpoints' values live in, following delta chains to their full blob.
_SELECT_BLOBS = """
WITH RECURSIVE need(key, version) AS (
    SELECT r.key, r.version
      FROM {cps} c CROSS JOIN LATERAL unnest(c.blob_keys, c.blob_versions) AS r(key, version)
     WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND {target}
  UNION
    SELECT b.key, b.base
      FROM {blobs} b JOIN need n ON b.key = n.key AND b.version = n.version
     WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s AND b.base IS NOT NULL
)
SELECT b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, b.data, b.crc32
  FROM {blobs} b JOIN need n ON b.key = n.key AND b.version = n.version
 WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
"""

_LOCK_HEADS = """
SELECT 1 FROM {heads} WHERE thread_id = %(thread)s ORDER BY checkpoint_ns FOR {mode}
"""

_DELETE_THREAD = (
    "DELETE FROM {writes} WHERE thread_id = %(thread)s",
    "DELETE FROM {blobs} WHERE thread_id = %(thread)s",
    "DELETE FROM {cps} WHERE thread_id = %(thread)s",
    "DELETE FROM {heads} WHERE thread_id = %(thread)s",
)

# Drop a thread's (or one namespace's) checkpoints past the newest ``keep`` and, unless it is the
# newest, older than ``cutoff``; their writes; the head of a namespace left empty; and the blobs
# no remaining checkpoint uses (directly or as the base of a delta it uses). One statement: its
# CTEs share one snapshot, so "remaining" is spelled "not doomed".
_PRUNE = """
WITH RECURSIVE
ranked AS (
    SELECT c.checkpoint_ns, c.checkpoint_id, c.created_at,
           row_number() OVER (PARTITION BY c.checkpoint_ns ORDER BY c.checkpoint_id DESC) AS rn
      FROM {cps} c
     WHERE c.thread_id = %(thread)s{ns_c}
),
doomed AS (
    DELETE FROM {cps} c USING ranked r
     WHERE c.thread_id = %(thread)s
       AND c.checkpoint_ns = r.checkpoint_ns AND c.checkpoint_id = r.checkpoint_id
       AND (r.rn > %(keep)s::bigint OR (r.rn > 1 AND r.created_at < %(cutoff)s::timestamptz))
    RETURNING c.checkpoint_ns, c.checkpoint_id
),
gone_heads AS (
    DELETE FROM {heads} h
     WHERE h.thread_id = %(thread)s{ns_h}
       AND EXISTS (SELECT 1 FROM doomed d WHERE d.checkpoint_ns = h.checkpoint_ns)
       AND NOT EXISTS (
           SELECT 1 FROM ranked r
            WHERE r.checkpoint_ns = h.checkpoint_ns
              AND NOT EXISTS (
                  SELECT 1 FROM doomed d
                   WHERE d.checkpoint_ns = r.checkpoint_ns AND d.checkpoint_id = r.checkpoint_id))
),
gone_writes AS (
    DELETE FROM {writes} w USING doomed d
     WHERE w.thread_id = %(thread)s
       AND w.checkpoint_ns = d.checkpoint_ns AND w.checkpoint_id = d.checkpoint_id
),
live(checkpoint_ns, key, version) AS (
    SELECT c.checkpoint_ns, r.key, r.version
      FROM {cps} c CROSS JOIN LATERAL unnest(c.blob_keys, c.blob_versions) AS r(key, version)
     WHERE c.thread_id = %(thread)s{ns_c}
       AND NOT EXISTS (
           SELECT 1 FROM doomed d
            WHERE d.checkpoint_ns = c.checkpoint_ns AND d.checkpoint_id = c.checkpoint_id)
  UNION
    SELECT b.checkpoint_ns, b.key, b.base
      FROM {blobs} b
      JOIN live l ON b.checkpoint_ns = l.checkpoint_ns AND b.key = l.key
                 AND b.version = l.version
     WHERE b.thread_id = %(thread)s AND b.base IS NOT NULL
),
gone_blobs AS (
    DELETE FROM {blobs} b
     WHERE EXISTS (SELECT 1 FROM doomed)
       AND b.thread_id = %(thread)s{ns_b}
       AND NOT EXISTS (
           SELECT 1 FROM live l
            WHERE l.checkpoint_ns = b.checkpoint_ns AND l.key = b.key AND l.version = b.version)
    RETURNING b.checkpoint_ns, b.key, b.version
)
SELECT (SELECT count(*) FROM doomed),
       ARRAY(SELECT g.checkpoint_ns FROM gone_blobs g),
       ARRAY(SELECT g.key FROM gone_blobs g),
       ARRAY(SELECT g.version FROM gone_blobs g)
"""

_LIST_THREADS = """
SELECT h.thread_id, h.head, h.updated_at, h.next,
       ARRAY(SELECT w.task_id FROM {writes} w
              WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = ''
                AND w.checkpoint_id = h.head ORDER BY w.seq),
       ARRAY(SELECT w.kind FROM {writes} w
              WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = ''
                AND w.checkpoint_id = h.head ORDER BY w.seq)
  FROM {heads} h
 WHERE h.checkpoint_ns = '' AND h.head IS NOT NULL{after}
 ORDER BY h.updated_at DESC, h.thread_id DESC
 LIMIT %(n)s
"""
_LIST_THREADS_AFTER = " AND (h.updated_at, h.thread_id) < (%(at)s, %(tid)s)"

_THREAD_EXISTS = "SELECT EXISTS (SELECT 1 FROM {cps} WHERE thread_id = %(target)s)"

_COPY_THREAD = (
    "DELETE FROM {writes} WHERE thread_id = %(target)s",  # leftovers without checkpoints
    "DELETE FROM {blobs} WHERE thread_id = %(target)s",
    "DELETE FROM {heads} WHERE thread_id = %(target)s",
    """
INSERT INTO {heads} (thread_id, checkpoint_ns, head, next, updated_at)
SELECT %(target)s, checkpoint_ns, head, next, clock_timestamp()
  FROM {heads} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {cps} (
    thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, body, metadata,
    blob_keys, blob_versions
)
SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_id, step, created_at, body, metadata,
       blob_keys, blob_versions
  FROM {cps} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {blobs} (
    thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32, data
)
SELECT %(target)s, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32,
       data
  FROM {blobs} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data)
SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data
  FROM {writes} WHERE thread_id = %(source)s
 ORDER BY seq
""",
)


class _Queries:
    """Every statement, with the schema's (quoted) table names filled in once."""

    def __init__(self, schema: str) -> None:
        def table(name: str) -> sql.Composable:
            return sql.Identifier(schema, f"threadline_{name}")

        self.names: dict[str, sql.Composable] = {
            "version": table("schema_version"),
            "heads": table("heads"),
            "heads_recent_name": sql.Identifier("threadline_heads_recent"),
            "cps": table("checkpoints"),
            "blobs": table("blobs"),
            "writes": table("writes"),
            "advance": table("advance_head"),
            "check_refs": table("check_refs"),
        }
        self.schema = sql.Identifier(schema).as_string(None)
        self.version_table = self.names["version"].as_string(None)
        f = self.format
        self.ddl_version_table = f(_DDL_VERSION_TABLE)
        self.ddl = tuple(f(stmt) for stmt in _DDL)
        self.advance = f(_ADVANCE)
        self.check_refs = f(_CHECK_REFS)
        self.insert_checkpoint = f(_INSERT_CHECKPOINT)
        self.insert_blobs = f(_INSERT_BLOBS)
        self.upsert_writes = f(_UPSERT_WRITES)
        self.touch_head = f(_TOUCH_HEAD)
        self.select_bases = f(_SELECT_BASES)
        self.delete_thread = tuple(f(stmt) for stmt in _DELETE_THREAD)
        self.lock_heads_update = f(_LOCK_HEADS.replace("{mode}", "UPDATE"))
        self.lock_heads_share = f(_LOCK_HEADS.replace("{mode}", "SHARE"))
        scopes = {"{ns_c}": "c", "{ns_b}": "b", "{ns_h}": "h"}
        thread_wide, one_ns = _PRUNE, _PRUNE
        for mark, alias in scopes.items():
            thread_wide = thread_wide.replace(mark, "")
            one_ns = one_ns.replace(mark, f" AND {alias}.checkpoint_ns = %(ns)s")
        self.prune_thread = f(thread_wide)
        self.prune_ns = f(one_ns)
        self.list_threads = f(_LIST_THREADS.replace("{after}", ""))
        self.list_threads_after = f(_LIST_THREADS.replace("{after}", _LIST_THREADS_AFTER))
        self.thread_exists = f(_THREAD_EXISTS)
        self.copy_thread = tuple(f(stmt) for stmt in _COPY_THREAD)
        before = " AND p.checkpoint_id < %(before)s"
        # (checkpoints, writes, blobs) for each way of choosing the checkpoints to load.
        self.load: dict[str, tuple[str, str, str]] = {}
        targets = {
            "latest": _TARGET_LATEST,
            "one": _TARGET_ONE,
            "ids": _TARGET_IDS,
            "page": _TARGET_PAGE.replace("{before}", ""),
            "page_before": _TARGET_PAGE.replace("{before}", before),
        }
        for name, target in targets.items():
            self.load[name] = (
                f(
                    _SELECT_CHECKPOINTS.replace(
                        "{target}", target.replace("{col}", "c.checkpoint_id")
                    )
                ),
                f(_SELECT_WRITES.replace("{target}", target.replace("{col}", "w.checkpoint_id"))),
                f(_SELECT_BLOBS.replace("{target}", target.replace("{col}", "c.checkpoint_id"))),
            )
        self.page = self.load["page"][0]
        self.page_before = self.load["page_before"][0]

    def format(self, template: str) -> str:
        return sql.SQL(template).format(**self.names).as_string(None)  # type: ignore[arg-type]


# --------------------------------------------------------------------------------------------
# Operations: generators that yield batches of statements and get their results back, so the
# same logic runs on a sync and on an async connection. A batch is sent in pipeline mode: one
# round trip, whatever its size. The runner opens the transaction with the first batch and
# commits with the batch marked ``last``.
# --------------------------------------------------------------------------------------------


class _Stmt(NamedTuple):
    query: str
    params: Mapping[str, Any] | None = None
    # Server-side prepared from the first use on each connection. (Not "after a few uses":
    # psycopg loses track of a statement that becomes prepared in a pipeline that fails,
    # and later uses then fail with 'prepared statement "_pg3_N" does not exist'.)
    prepare: bool = True


class _Result(NamedTuple):
    rowcount: int
    rows: list[tuple[Any, ...]]


class _Batch(NamedTuple):
    stmts: Sequence[_Stmt]
    last: bool = True


_Op = Generator[_Batch, list[_Result], _T]

_BEGIN_WRITE = _Stmt("BEGIN")
_BEGIN_READ = _Stmt("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
_COMMIT = _Stmt("COMMIT")


class _Loaded(NamedTuple):
    """Raw rows of some checkpoints of one (thread, namespace), ready to decode."""

    checkpoints: list[tuple[Any, ...]]  # (checkpoint_id, body, metadata), newest first
    writes: list[tuple[Any, ...]]  # (checkpoint_id, task_id, kind, task_name, data) by seq
    blobs: list[tuple[Any, ...]]  # (key, version, start, base, chain, full, data, crc32)


class _HeadMoved(Exception):
    """The head's compare-and-set failed (``put`` turns it into ``ConcurrentUpdateError``)."""

    def __init__(self, actual: str | None) -> None:
        super().__init__(actual)
        self.actual = actual


class _NotStored(Exception):
    """Values the new checkpoint relies on are not stored (``put`` stores them in full)."""

    def __init__(self, keys: Sequence[str]) -> None:
        super().__init__(keys)
        self.keys = tuple(keys)


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def mask_url(url: str) -> str:
    """The URL with its password (``user:pw@`` or ``password=...``) replaced by ``***``."""
    masked = re.sub(r"(://[^:/@?#]*:)[^@/?#]*@", r"\1***@", url)
    return re.sub(r"(password\s*=\s*)('(?:[^'\\]|\\.)*'|[^&\s]+)", r"\1***", masked, flags=re.I)


def _password(url: str) -> str | None:
    try:
        return conninfo_to_dict(url).get("password")  # type: ignore[return-value]
    except Exception:
        return None


def _parse_time(text: str) -> datetime | None:
    """``created_at`` as a time (naive means UTC), for retention by age; None if not ISO."""
    ts = created_ts(text)
    return None if ts is None else datetime.fromtimestamp(ts, UTC)


def _dedupe_writes(rows: Iterable[WriteRow]) -> list[WriteRow]:
    """One row per (task_id, kind): the last value, at the first one's position."""
    by_key: dict[tuple[str, str], WriteRow] = {}
    for row in rows:
        by_key[(row.task_id, row.kind)] = row
    return list(by_key.values())


def _writes_params(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, rows: Sequence[WriteRow]
) -> dict[str, Any]:
    return {
        "thread": thread_id,
        "ns": checkpoint_ns,
        "cid": checkpoint_id,
        "task_ids": [r.task_id for r in rows],
        "kinds": [r.kind for r in rows],
        "task_names": [r.task_name for r in rows],
        "data": [r.data for r in rows],
    }


def _norm(row: BlobRow) -> BlobRow:
    """The row with its versions as strings, as the database holds them."""
    return dataclasses.replace(
        row,
        version=str(row.version),
        start=str(row.start),
        base=None if row.base is None else str(row.base),
    )


def _blob_row(row: Sequence[Any]) -> BlobRow:
    key, version, start, base, chain_bytes, full_bytes, *rest = row
    return BlobRow(key, version, start, base, chain_bytes, full_bytes, rest[0] if rest else b"")


class _BlobCache:
    """Metadata (no data) of stored blobs, by (thread, ns, key, version); a bounded LRU."""

    def __init__(self, size: int = _CACHE_SIZE) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._rows: OrderedDict[tuple[str, str, str, str], BlobRow] = OrderedDict()

    def get(self, thread_id: str, checkpoint_ns: str, key: str, version: str) -> BlobRow | None:
        k = (thread_id, checkpoint_ns, key, version)
        with self._lock:
            row = self._rows.get(k)
            if row is not None:
                self._rows.move_to_end(k)
            return row

    def add(self, thread_id: str, checkpoint_ns: str, rows: Iterable[BlobRow]) -> None:
        with self._lock:
            for row in rows:
                k = (thread_id, checkpoint_ns, row.key, row.version)
                self._rows[k] = dataclasses.replace(row, data=b"") if row.data else row
                self._rows.move_to_end(k)
            while len(self._rows) > self._size:
                self._rows.popitem(last=False)

    def discard(self, thread_id: str, keys: Iterable[tuple[str, str, str]]) -> None:
        """Forget ``(namespace, key, version)`` blobs of a thread."""
        with self._lock:
            for ns, key, version in keys:
                self._rows.pop((thread_id, ns, key, version), None)

    def drop(self, thread_id: str, checkpoint_ns: str | None = None) -> None:
        """Forget every blob of a thread (of one of its namespaces)."""
        with self._lock:
            doomed = [
                k
                for k in self._rows
                if k[0] == thread_id and (checkpoint_ns is None or k[1] == checkpoint_ns)
            ]
            for k in doomed:
                del self._rows[k]

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()


def _verify(
    thread_id: str,
    ns: str,
    versions: Mapping[str, str],
    rows: Mapping[tuple[str, str], BlobRow],
    damaged: set[tuple[str, str]],
) -> None:
    """Fail if a blob the values are rebuilt from (chains included) failed its CRC-32."""
    if not damaged:
        return
    stub = Checkpoint("", None, 0, {}, dict(versions), (), "")
    bad = sorted(referenced_blobs([stub], rows) & damaged)
    if bad:
        key, version = bad[0]
        raise SerializationError(
            f"the stored value of key {key!r} (version {version}) of thread {thread_id!r} "
            f"(namespace {ns!r}) is corrupted: its checksum does not match"
        )


# --------------------------------------------------------------------------------------------
# The saver
# --------------------------------------------------------------------------------------------


class PostgresSaver(BaseSaver):
    """Checkpoints in PostgreSQL, shared safely by any number of processes and machines.

    Call :meth:`setup` once (it is idempotent and safe to run concurrently) to create the
    tables, and :meth:`close` (or use the saver as a context manager) when done::

        with PostgresSaver.from_conn_string("postgresql://localhost/app") as saver:
            graph = builder.compile(checkpointer=saver)

    ``schema`` puts the tables in another schema (``setup`` creates it). ``pool_size`` bounds
    the connections of the sync pool and of each event loop's async pool. ``retention`` prunes
    a namespace's older checkpoints each time one is saved, in the same transaction.
    ``copy_thread`` raises ``ValueError`` if the target already has checkpoints. No connection
    is made before the first call.
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int = 10,
        retention: Retention | None = None,
        schema: str = "public",
        connect_timeout: float = 10.0,
        pool_timeout: float = 30.0,
    ) -> None:
        if pool_size < 1:
            raise ValueError("PostgresSaver pool_size must be at least 1")
        if not schema:
            raise ValueError("PostgresSaver schema must not be empty")
        self.url = url
        self.schema = schema
        self.retention = retention
        self.pool_size = pool_size
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._masked = mask_url(url)
        self._secret = _password(url)
        self._q = _Queries(schema)
        self._lock = threading.Lock()
        self._pool: ConnectionPool | None = None
        self._apools: dict[asyncio.AbstractEventLoop, asyncio.Task[AsyncConnectionPool]] = {}
        self._closing: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._cache = _BlobCache()

    @classmethod
    def from_conn_string(cls, url: str, **options: Any) -> PostgresSaver:
        """A set-up saver on ``url``: ``with PostgresSaver.from_conn_string(url) as saver:``."""
        saver = cls(url, **options)
        try:
            saver.setup()
        except BaseException:
            saver.close()
            raise
        return saver

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"PostgresSaver({self._masked!r}, schema={self.schema!r}, {state})"

    # -- setup ---------------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the schema, tables and functions if missing; safe to call concurrently.

        Raises ``SaverUnavailableError`` if the tables were made by a newer threadline.
        """
        self._run(self._setup_op(), _BEGIN_WRITE)

    async def asetup(self) -> None:
        await self._arun(self._setup_op(), _BEGIN_WRITE)

    def _setup_op(self) -> _Op[None]:
        q = self._q
        # Concurrent CREATE ... IF NOT EXISTS can still collide: one setup at a time per schema.
        lock = _Stmt(
            "SELECT pg_advisory_xact_lock(hashtext('threadline.setup'), hashtext(%(schema)s))",
            {"schema": self.schema},
            prepare=False,
        )
        stmts = [lock]
        if self.schema != "public":
            stmts.append(_Stmt(f"CREATE SCHEMA IF NOT EXISTS {q.schema}", prepare=False))
        stmts += [
            _Stmt(q.ddl_version_table, prepare=False),
            _Stmt(f"SELECT max(version) FROM {q.version_table}", prepare=False),
        ]
        results = yield _Batch(stmts, last=False)
        found = results[-1].rows[0][0]
        if found is not None and found > SCHEMA_VERSION:
            raise self._too_new(found)
        # (found < SCHEMA_VERSION: migrations go here once there is a version 2.)
        stmts = [_Stmt(ddl, prepare=False) for ddl in q.ddl]
        if found is None:
            stmts.append(
                _Stmt(
                    f"INSERT INTO {q.version_table} (version) VALUES (%(v)s)",
                    {"v": SCHEMA_VERSION},
                    prepare=False,
                )
            )
        yield _Batch(stmts)

    def _too_new(self, found: int) -> SaverUnavailableError:
        return SaverUnavailableError(
            f"the PostgreSQL checkpoint tables in schema {self.schema!r} at {self._masked} have "
            f"schema version {found}: they were made by a newer threadline (this one reads up "
            f"to version {SCHEMA_VERSION}); upgrade threadline to use them"
        )

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        loaded = self._run(self._get_op(thread_id, checkpoint_ns, checkpoint_id), _BEGIN_READ)
        return self._first(thread_id, checkpoint_ns, loaded)

    async def aget_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        op = self._get_op(thread_id, checkpoint_ns, checkpoint_id)
        loaded = await self._arun(op, _BEGIN_READ)
        return self._first(thread_id, checkpoint_ns, loaded)

    def _get_op(
        self, thread_id: str, checkpoint_ns: str, checkpoint_id: str | None
    ) -> _Op[_Loaded]:
        """The checkpoint, its writes and its blobs: one round trip, one snapshot."""
        params = {"thread": thread_id, "ns": checkpoint_ns, "cid": checkpoint_id}
        queries = self._q.load["latest" if checkpoint_id is None else "one"]
        results = yield _Batch([_Stmt(query, params) for query in queries])
        return _Loaded(*(r.rows for r in results))

    def _first(
        self, thread_id: str, checkpoint_ns: str, loaded: _Loaded
    ) -> CheckpointRecord | None:
        records = self._decode(thread_id, checkpoint_ns, loaded)
        return records[0] if records else None

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        if limit is not None and limit <= 0:
            return
        produced, cursor = 0, before
        while True:
            n = self._page_size(filter, limit, produced)
            op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n)
            loaded, n_rows, last_id = self._run(op, _BEGIN_READ)
            # Decoded and yielded with no connection held.
            for record in self._decode(thread_id, checkpoint_ns, loaded):
                yield record
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if n_rows < n:
                return
            cursor = last_id

    async def alist(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointRecord]:
        if limit is not None and limit <= 0:
            return
        produced, cursor = 0, before
        while True:
            n = self._page_size(filter, limit, produced)
            op = self._page_op(thread_id, checkpoint_ns, filter, cursor, n)
            loaded, n_rows, last_id = await self._arun(op, _BEGIN_READ)
            for record in self._decode(thread_id, checkpoint_ns, loaded):
                yield record
                produced += 1
                if limit is not None and produced >= limit:
                    return
            if n_rows < n:
                return
            cursor = last_id

    @staticmethod
    def _page_size(filter: Mapping[str, Any] | None, limit: int | None, produced: int) -> int:
        if limit is None or filter:
            return _PAGE_SIZE
        return max(1, min(_PAGE_SIZE, limit - produced))

    def _page_op(
        self,
        thread_id: str,
        checkpoint_ns: str,
        filter: Mapping[str, Any] | None,
        before: str | None,
        n: int,
    ) -> _Op[tuple[_Loaded, int, str | None]]:
        """One page of ``n`` checkpoints older than ``before``: (matching ones, rows, last id)."""
        params: dict[str, Any] = {
            "thread": thread_id,
            "ns": checkpoint_ns,
            "before": before,
            "n": n,
        }
        if not filter:
            # The page, its writes and its blobs in one round trip.
            queries = self._q.load["page" if before is None else "page_before"]
            results = yield _Batch([_Stmt(query, params) for query in queries])
            loaded = _Loaded(*(r.rows for r in results))
            rows = loaded.checkpoints
            return loaded, len(rows), rows[-1][0] if rows else None
        # With a filter: the page first, then writes and blobs of the matching checkpoints only
        # (same transaction, so the same snapshot).
        query = self._q.page if before is None else self._q.page_before
        (page,) = yield _Batch([_Stmt(query, params)], last=False)
        rows = page.rows
        last_id = rows[-1][0] if rows else None
        matching = [r for r in rows if metadata_matches(decode_metadata(r[2]), filter)]
        if not matching:
            return _Loaded([], [], []), len(rows), last_id
        params["ids"] = [r[0] for r in matching]
        _, writes_q, blobs_q = self._q.load["ids"]
        writes, blobs = yield _Batch([_Stmt(writes_q, params), _Stmt(blobs_q, params)])
        return _Loaded(matching, writes.rows, blobs.rows), len(rows), last_id

    def _decode(
        self, thread_id: str, checkpoint_ns: str, loaded: _Loaded
    ) -> list[CheckpointRecord]:
        if not loaded.checkpoints:
            return []
        blob_rows = [_blob_row(r[:7]) for r in loaded.blobs]
        damaged = {(r[0], r[1]) for r in loaded.blobs if zlib.crc32(r[6]) != r[7]}
        self._cache.add(thread_id, checkpoint_ns, blob_rows)
        rows = {(b.key, b.version): b for b in blob_rows}
        # Exactly the rows the chains need were fetched; walking a chain follows ``base``
        # pointers through every fetched row of its key.
        by_key: dict[str, list[BlobRow]] = {}
        for b in blob_rows:
            by_key.setdefault(b.key, []).append(b)
        chains = {(b.key, b.start): by_key[b.key] for b in blob_rows}
        writes: dict[str, list[TaskWrite]] = {}
        for cid, task_id, kind, task_name, data in loaded.writes:
            write = decode_write(WriteRow(task_id, kind, task_name, data))
            writes.setdefault(cid, []).append(write)
        records = []
        for cid, body, metadata in loaded.checkpoints:
            cp, _ = wanted_blobs(body)
            versions = {key: str(version) for key, version in cp.versions.items()}
            _verify(thread_id, checkpoint_ns, versions, rows, damaged)
            values = assemble_values(versions, rows, chains)
            records.append(
                CheckpointRecord(
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint=dataclasses.replace(cp, values=values),
                    metadata=decode_metadata(metadata),
                    pending_writes=tuple(writes.get(cid, ())),
                )
            )
        return records

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        missing = self._missing_bases(record)
        if missing:
            op = self._bases_op(record.thread_id, record.checkpoint_ns, missing)
            self._cache.add(record.thread_id, record.checkpoint_ns, self._run(op, None))
        encoded, blobs = self._encode(record)
        try:
            evicted = self._run(self._put_op(record, fork, encoded, blobs), _BEGIN_WRITE)
        except _HeadMoved as moved:
            raise self._moved(record, fork, moved) from None
        except _NotStored as gone:
            blobs = self._store_in_full(record, blobs, gone)
            try:
                evicted = self._run(self._put_op(record, fork, encoded, blobs), _BEGIN_WRITE)
            except _HeadMoved as moved:
                raise self._moved(record, fork, moved) from None
            except _NotStored as still:
                raise self._not_stored(record, still) from None
        self._after_put(record, blobs, evicted)

    async def aput(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        missing = self._missing_bases(record)
        if missing:
            op = self._bases_op(record.thread_id, record.checkpoint_ns, missing)
            self._cache.add(record.thread_id, record.checkpoint_ns, await self._arun(op, None))
        encoded, blobs = self._encode(record)
        try:
            evicted = await self._arun(self._put_op(record, fork, encoded, blobs), _BEGIN_WRITE)
        except _HeadMoved as moved:
            raise self._moved(record, fork, moved) from None
        except _NotStored as gone:
            blobs = self._store_in_full(record, blobs, gone)
            try:
                op = self._put_op(record, fork, encoded, blobs)
                evicted = await self._arun(op, _BEGIN_WRITE)
            except _HeadMoved as moved:
                raise self._moved(record, fork, moved) from None
            except _NotStored as still:
                raise self._not_stored(record, still) from None
        self._after_put(record, blobs, evicted)

    def _missing_bases(self, record: CheckpointRecord) -> list[tuple[str, str]]:
        """(key, version) of list bases a delta could extend that the cache does not know."""
        hints = record.hints
        if hints is None:
            return []
        wanted = {
            (key, str(base))
            for key, (base, _) in hints.extends.items()
            if key in hints.changed and key in record.checkpoint.values
        }
        return sorted(
            (key, version)
            for key, version in wanted
            if self._cache.get(record.thread_id, record.checkpoint_ns, key, version) is None
        )

    def _bases_op(
        self, thread_id: str, checkpoint_ns: str, wanted: Sequence[tuple[str, str]]
    ) -> _Op[list[BlobRow]]:
        params = {
            "thread": thread_id,
            "ns": checkpoint_ns,
            "keys": [k for k, _ in wanted],
            "versions": [v for _, v in wanted],
        }
        (result,) = yield _Batch([_Stmt(self._q.select_bases, params)])
        return [_blob_row(r) for r in result.rows]

    def _encode(self, record: CheckpointRecord) -> tuple[EncodedCheckpoint, list[BlobRow]]:
        """The encoded record and its blobs (``SerializationError`` before anything is sent)."""
        thread_id, ns = record.thread_id, record.checkpoint_ns

        def base_of(key: str, version: str) -> BlobRow | None:
            return self._cache.get(thread_id, ns, key, str(version))

        encoded = encode_record(record, base_of)
        return encoded, [_norm(b) for b in encoded.blobs]

    def _store_in_full(
        self, record: CheckpointRecord, blobs: Sequence[BlobRow], gone: _NotStored
    ) -> list[BlobRow]:
        """``blobs`` with the values of ``gone.keys`` stored whole (their bases, or the values
        the hints called unchanged, are not stored: wrong hints, a prune, a stale cache)."""
        self._cache.drop(record.thread_id, record.checkpoint_ns)
        keys = set(gone.keys)
        full = [_norm(b) for b in full_blobs(record, keys)]
        return [b for b in blobs if b.key not in keys] + full

    def _moved(
        self, record: CheckpointRecord, fork: bool, moved: _HeadMoved
    ) -> ConcurrentUpdateError:
        try:
            check_put(record, moved.actual, fork=fork)
        except ConcurrentUpdateError as exc:
            return exc
        return ConcurrentUpdateError(  # the head moved back between the check and this report
            f"thread {record.thread_id!r} (namespace {record.checkpoint_ns!r}) changed while "
            f"checkpoint {record.checkpoint.id} was being saved; nothing was written"
        )

    @staticmethod
    def _not_stored(record: CheckpointRecord, still: _NotStored) -> SerializationError:
        return SerializationError(
            f"checkpoint {record.checkpoint.id} of thread {record.thread_id!r} needs stored "
            f"values of keys {list(still.keys)!r} that are not there; nothing was written"
        )

    def _put_op(
        self,
        record: CheckpointRecord,
        fork: bool,
        encoded: EncodedCheckpoint,
        blobs: Sequence[BlobRow],
    ) -> _Op[list[tuple[str, str, str]]]:
        """Everything ``put`` writes, as one batch: one transaction, one round trip.

        Returns the ``(namespace, key, version)`` of blobs retention deleted.
        """
        thread_id, ns, cp = record.thread_id, record.checkpoint_ns, record.checkpoint
        writes = _dedupe_writes(encoded.writes)
        refs = sorted((key, str(version)) for key, version in cp.versions.items())
        params: dict[str, Any] = {
            "thread": thread_id,
            "ns": ns,
            "cid": cp.id,
            "parent": cp.parent_id,
            "fork": fork,
            "next": [task.name for task in cp.next],
            "step": cp.step,
            "created_at": _parse_time(cp.created_at),
            "body": encoded.row.body,
            "metadata": encoded.row.metadata,
            "blob_keys": [k for k, _ in refs],
            "blob_versions": [v for _, v in refs],
        }
        q = self._q
        stmts = [_Stmt(q.advance, params), _Stmt(q.insert_checkpoint, params)]
        if blobs:
            blob_params = {
                "thread": thread_id,
                "ns": ns,
                "keys": [b.key for b in blobs],
                "versions": [b.version for b in blobs],
                "starts": [b.start for b in blobs],
                "bases": [b.base for b in blobs],
                "chain_bytes": [b.chain_bytes for b in blobs],
                "full_bytes": [b.full_bytes for b in blobs],
                "crc32": [zlib.crc32(b.data) for b in blobs],
                "data": [b.data for b in blobs],
            }
            stmts.append(_Stmt(q.insert_blobs, blob_params))
        if refs:
            stmts.append(_Stmt(q.check_refs, params))
        if writes:
            stmts.append(_Stmt(q.upsert_writes, _writes_params(thread_id, ns, cp.id, writes)))
        retention = self.retention
        prune = retention is not None and (
            retention.max_checkpoints is not None or retention.max_age is not None
        )
        if retention is not None and prune:
            cutoff = age_cutoff(retention)
            prune_params = {
                "thread": thread_id,
                "ns": ns,
                "keep": retention.max_checkpoints,
                "cutoff": None if cutoff is None else datetime.fromtimestamp(cutoff, UTC),
            }
            stmts.append(_Stmt(q.prune_ns, prune_params))
        results = yield _Batch(stmts)
        if not prune:
            return []
        _, namespaces, keys, versions = results[-1].rows[0]
        return list(zip(namespaces, keys, versions, strict=True))

    def _after_put(
        self,
        record: CheckpointRecord,
        blobs: Sequence[BlobRow],
        evicted: Sequence[tuple[str, str, str]],
    ) -> None:
        self._cache.add(record.thread_id, record.checkpoint_ns, blobs)
        if evicted:
            self._cache.discard(record.thread_id, evicted)

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        op = self._put_writes_op(thread_id, checkpoint_ns, checkpoint_id, writes)
        if op is not None:
            self._run(op, _BEGIN_WRITE)

    async def aput_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        op = self._put_writes_op(thread_id, checkpoint_ns, checkpoint_id, writes)
        if op is not None:
            await self._arun(op, _BEGIN_WRITE)

    def _put_writes_op(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> _Op[None] | None:
        rows = _dedupe_writes(encode_writes(writes))  # raises before anything is sent
        if not rows:
            return None
        params = _writes_params(thread_id, checkpoint_ns, checkpoint_id, rows)
        # The head first (locked only if it is this checkpoint), as in ``put``: no deadlocks.
        stmts = [_Stmt(self._q.touch_head, params), _Stmt(self._q.upsert_writes, params)]

        def op() -> _Op[None]:
            yield _Batch(stmts)

        return op()

    def delete_thread(self, thread_id: str) -> None:
        self._run(self._delete_op(thread_id), _BEGIN_WRITE)
        self._cache.drop(thread_id)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._arun(self._delete_op(thread_id), _BEGIN_WRITE)
        self._cache.drop(thread_id)

    def _delete_op(self, thread_id: str) -> _Op[None]:
        params = {"thread": thread_id}
        stmts = [_Stmt(self._q.lock_heads_update, params)]
        stmts += [_Stmt(query, params) for query in self._q.delete_thread]
        yield _Batch(stmts)

    # -- threads and history -------------------------------------------------------------------

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        found: list[ThreadInfo] = []
        after: tuple[datetime, str] | None = None
        while limit is None or len(found) < limit:
            infos, after, more = self._run(self._threads_op(after, status, limit, found), None)
            found += infos
            if not more:
                break
        return found if limit is None else found[: max(0, limit)]

    async def alist_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        found: list[ThreadInfo] = []
        after: tuple[datetime, str] | None = None
        while limit is None or len(found) < limit:
            op = self._threads_op(after, status, limit, found)
            infos, after, more = await self._arun(op, None)
            found += infos
            if not more:
                break
        return found if limit is None else found[: max(0, limit)]

    def _threads_op(
        self,
        after: tuple[datetime, str] | None,
        status: ThreadStatus | None,
        limit: int | None,
        found: Sequence[ThreadInfo],
    ) -> _Op[tuple[list[ThreadInfo], tuple[datetime, str] | None, bool]]:
        """One page of threads, newest update first; status is worked out here, in Python."""
        n = 256 if limit is None or status is not None else max(1, limit - len(found))
        params: dict[str, Any] = {"n": n}
        query = self._q.list_threads
        if after is not None:
            params["at"], params["tid"] = after
            query = self._q.list_threads_after
        (result,) = yield _Batch([_Stmt(query, params)])
        infos = []
        for thread_id, head, updated_at, next_, task_ids, kinds in result.rows:
            info_status = status_of(next_, zip(task_ids, kinds, strict=True))
            if status is not None and info_status != status:
                continue
            infos.append(
                ThreadInfo(
                    thread_id=thread_id,
                    status=info_status,
                    checkpoint_id=head,
                    updated_at=updated_at.astimezone(UTC).isoformat(timespec="microseconds"),
                    next=tuple(next_),
                )
            )
        rows = result.rows
        last = (rows[-1][2], rows[-1][0]) if rows else None
        return infos, last, len(rows) == n

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        _check_keep_last(keep_last)
        count, evicted = self._run(self._prune_op(thread_id, keep_last), _BEGIN_WRITE)
        self._cache.discard(thread_id, evicted)
        return count

    async def aprune(self, thread_id: str, *, keep_last: int) -> int:
        _check_keep_last(keep_last)
        count, evicted = await self._arun(self._prune_op(thread_id, keep_last), _BEGIN_WRITE)
        self._cache.discard(thread_id, evicted)
        return count

    def _prune_op(
        self, thread_id: str, keep_last: int
    ) -> _Op[tuple[int, list[tuple[str, str, str]]]]:
        params = {"thread": thread_id, "keep": keep_last, "cutoff": None}
        lock = _Stmt(self._q.lock_heads_update, params)  # no put on this thread meanwhile
        _, result = yield _Batch([lock, _Stmt(self._q.prune_thread, params)])
        count, namespaces, keys, versions = result.rows[0]
        return count, list(zip(namespaces, keys, versions, strict=True))

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy every checkpoint, value and write of a thread to an empty thread id.

        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing. One transaction.
        """
        self._run(self._copy_op(source_thread_id, target_thread_id), _BEGIN_WRITE)
        self._cache.drop(target_thread_id)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._arun(self._copy_op(source_thread_id, target_thread_id), _BEGIN_WRITE)
        self._cache.drop(target_thread_id)

    def _copy_op(self, source: str, target: str) -> _Op[None]:
        params = {"source": source, "target": target, "thread": source}
        # The source's heads are share-locked: no put or prune changes it while it is copied.
        exists, _ = yield _Batch(
            [_Stmt(self._q.thread_exists, params), _Stmt(self._q.lock_heads_share, params)],
            last=False,
        )
        if exists.rows[0][0]:
            raise ValueError(
                f"cannot copy thread {source!r} to {target!r}: the target already has "
                "checkpoints; delete it first or pick another id"
            )
        yield _Batch([_Stmt(query, params) for query in self._q.copy_thread])

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Close the pools; further calls raise ``SaverUnavailableError``. Idempotent.

        An async pool is closed on its event loop when that loop can still run; in async code
        prefer ``await saver.aclose()`` (or ``async with``).
        """
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            apools, self._apools = self._apools, {}
        self._cache.clear()
        if pool is not None:
            pool.close()
        for loop, task in apools.items():
            self._close_apool_from_sync(loop, task)

    async def aclose(self) -> None:
        """Close the pools from async code: this loop's pool is awaited, others as in close."""
        loop = asyncio.get_running_loop()
        with self._lock:
            self._closed = True
            pool, self._pool = self._pool, None
            apools, self._apools = self._apools, {}
        self._cache.clear()
        mine = apools.pop(loop, None)
        if mine is not None:
            apool: AsyncConnectionPool | None = None
            with contextlib.suppress(Exception):
                apool = await mine
            if apool is not None:
                await apool.close()
        if pool is not None:
            await asyncio.to_thread(pool.close)
        for other, task in apools.items():
            self._close_apool_from_sync(other, task)

    def _close_apool_from_sync(
        self, loop: asyncio.AbstractEventLoop, task: asyncio.Task[AsyncConnectionPool]
    ) -> None:
        if loop.is_closed():
            return  # its connections close when they are collected
        if not task.done():
            loop.call_soon_threadsafe(task.cancel)
            return
        if task.cancelled() or task.exception() is not None:
            return
        pool = task.result()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # close() called from async code on that loop: finish in the loop
            closing = loop.create_task(pool.close())
            self._closing.add(closing)
            closing.add_done_callback(self._closing.discard)
        elif loop.is_running():
            asyncio.run_coroutine_threadsafe(pool.close(), loop).result(self._pool_timeout)
        else:
            loop.run_until_complete(pool.close())

    def __enter__(self) -> PostgresSaver:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> PostgresSaver:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- connections ---------------------------------------------------------------------------

    def _pool_kwargs(self) -> dict[str, Any]:
        return {
            "conninfo": self.url,
            "min_size": 1,
            "max_size": self.pool_size,
            # BEGIN / COMMIT travel in the pipeline with the statements they wrap.
            "kwargs": {"autocommit": True},
            "timeout": self._pool_timeout,
            "name": f"threadline-{self.schema}",
            "open": False,
        }

    def _closed_error(self) -> SaverUnavailableError:
        return SaverUnavailableError(f"{self!r} is closed")

    def _unreachable(self, exc: BaseException) -> SaverUnavailableError:
        reason = str(exc).strip() or type(exc).__name__
        if self._secret:
            reason = reason.replace(self._secret, "***")
        return SaverUnavailableError(f"cannot reach PostgreSQL at {self._masked}: {reason}")

    def _connect_kwargs(self) -> dict[str, Any]:
        return {"autocommit": True, "connect_timeout": max(1, round(self._connect_timeout))}

    def _check_version(self, found: Any) -> None:
        if found is not None and found > SCHEMA_VERSION:
            raise self._too_new(found)

    def _sync_pool(self) -> ConnectionPool:
        pool = self._pool
        if pool is not None:
            return pool
        with self._lock:
            if self._closed:
                raise self._closed_error()
            if self._pool is None:
                # A first direct connection gives a clear error (the pool would only time out)
                # and checks that the tables are not from a newer threadline.
                try:
                    with psycopg.connect(self.url, **self._connect_kwargs()) as conn:
                        exists = conn.execute(_PROBE, [self._q.version_table]).fetchone()
                        if exists and exists[0] is not None:
                            row = conn.execute(
                                f"SELECT max(version) FROM {self._q.version_table}"
                            ).fetchone()
                            self._check_version(row[0] if row else None)
                except psycopg.Error as exc:
                    raise self._unreachable(exc) from exc
                pool = ConnectionPool(**self._pool_kwargs())
                try:
                    pool.open(wait=True, timeout=self._connect_timeout)
                except PoolTimeout as exc:
                    pool.close()
                    raise self._unreachable(exc) from exc
                self._pool = pool
            return self._pool

    async def _async_pool(self) -> AsyncConnectionPool:
        """This event loop's pool, opened by the first call made on the loop."""
        loop = asyncio.get_running_loop()
        task = self._apools.get(loop)
        if task is None:
            with self._lock:
                if self._closed:
                    raise self._closed_error()
                task = self._apools.get(loop)
                if task is None:
                    for other in [lp for lp in self._apools if lp.is_closed()]:
                        del self._apools[other]  # left behind by a finished asyncio.run()
                    task = loop.create_task(self._open_async_pool())
                    self._apools[loop] = task
        try:
            return await asyncio.shield(task)
        except BaseException:
            if task.done():
                with self._lock:
                    if self._apools.get(loop) is task:
                        del self._apools[loop]  # let the next call try again
            raise

    async def _open_async_pool(self) -> AsyncConnectionPool:
        try:
            conn = await psycopg.AsyncConnection.connect(self.url, **self._connect_kwargs())
            async with conn:
                cur = await conn.execute(_PROBE, [self._q.version_table])
                exists = await cur.fetchone()
                if exists and exists[0] is not None:
                    cur = await conn.execute(f"SELECT max(version) FROM {self._q.version_table}")
                    row = await cur.fetchone()
                    self._check_version(row[0] if row else None)
        except psycopg.Error as exc:
            raise self._unreachable(exc) from exc
        pool = AsyncConnectionPool(**self._pool_kwargs())
        try:
            await pool.open(wait=True, timeout=self._connect_timeout)
        except PoolTimeout as exc:
            await pool.close()
            raise self._unreachable(exc) from exc
        return pool

    def _map_error(self, exc: BaseException) -> BaseException | None:
        """The exception a driver error stands for, or None to let it through."""
        if isinstance(exc, PoolTimeout):
            return SaverUnavailableError(
                f"no PostgreSQL connection to {self._masked} became free within "
                f"{self._pool_timeout}s (pool_size={self.pool_size}): {exc}"
            )
        if not isinstance(exc, psycopg.Error):
            return None
        state = exc.sqlstate
        if state in (_CAS_SQLSTATE, _REFS_SQLSTATE):
            detail: Any = None
            with contextlib.suppress(ValueError, TypeError):
                detail = json.loads(exc.diag.message_detail or "null")
            if state == _CAS_SQLSTATE:
                return _HeadMoved(detail.get("actual") if isinstance(detail, dict) else None)
            return _NotStored([str(k) for k in detail] if isinstance(detail, list) else [])
        if state in _MISSING_SQLSTATES:
            return SaverUnavailableError(
                f"the PostgreSQL checkpoint tables are missing in schema {self.schema!r} at "
                f"{self._masked} ({str(exc).strip()}); call saver.setup() first"
            )
        if isinstance(exc, psycopg.OperationalError) and (
            state is None or state.startswith("08") or state.startswith("57P")
        ):
            return self._unreachable(exc)
        return None

    # -- running operations --------------------------------------------------------------------

    def _run(self, op: _Op[_T], begin: _Stmt | None) -> _T:
        """Drive ``op`` on a pooled connection, in a transaction opened with ``begin`` (None:
        each batch on its own, for single-statement operations)."""
        try:
            pool = self._sync_pool()
            with pool.connection() as conn:
                return _drive(conn, op, begin)
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        finally:
            op.close()

    async def _arun(self, op: _Op[_T], begin: _Stmt | None) -> _T:
        try:
            pool = await self._async_pool()
            async with pool.connection() as conn:
                return await _adrive(conn, op, begin)
        except Exception as exc:
            mapped = self._map_error(exc)
            if mapped is None:
                raise
            raise mapped from exc
        finally:
            op.close()


_PROBE = "SELECT to_regclass(%s)"


def _drive(conn: psycopg.Connection[Any], op: _Op[_T], begin: _Stmt | None) -> _T:
    in_txn = False
    try:
        batch = next(op)
        while True:
            stmts, skip, in_txn = _frame(batch, begin, in_txn)
            cursors = _pipeline(conn, stmts)
            results = [_result(cur) for cur in cursors[skip : skip + len(batch.stmts)]]
            batch = op.send(results)
    except StopIteration as stop:
        if in_txn:
            conn.execute("COMMIT")
        return stop.value  # type: ignore[no-any-return]
    except BaseException:
        if not conn.closed and not conn.broken and conn.info.transaction_status != 0:
            with contextlib.suppress(psycopg.Error):
                conn.execute("ROLLBACK")
        raise


async def _adrive(conn: psycopg.AsyncConnection[Any], op: _Op[_T], begin: _Stmt | None) -> _T:
    in_txn = False
    try:
        batch = next(op)
        while True:
            stmts, skip, in_txn = _frame(batch, begin, in_txn)
            cursors = await _apipeline(conn, stmts)
            results = [await _aresult(cur) for cur in cursors[skip : skip + len(batch.stmts)]]
            batch = op.send(results)
    except StopIteration as stop:
        if in_txn:
            await conn.execute("COMMIT")
        return stop.value  # type: ignore[no-any-return]
    except BaseException:
        if not conn.closed and not conn.broken and conn.info.transaction_status != 0:
            with contextlib.suppress(psycopg.Error):
                await conn.execute("ROLLBACK")
        raise


def _frame(batch: _Batch, begin: _Stmt | None, in_txn: bool) -> tuple[list[_Stmt], int, bool]:
    """The batch's statements with BEGIN / COMMIT around them as needed.

    Returns the statements, how many were prepended, and whether a transaction stays open.
    """
    stmts = list(batch.stmts)
    skip = 0
    if begin is not None and not in_txn:
        stmts.insert(0, begin)
        skip = 1
        in_txn = True
    if in_txn and batch.last:
        stmts.append(_COMMIT)
        in_txn = False
    return stmts, skip, in_txn


def _pipeline(conn: psycopg.Connection[Any], stmts: Sequence[_Stmt]) -> list[psycopg.Cursor[Any]]:
    """Send ``stmts`` in one pipeline (one round trip); raise the first error, if any.

    psycopg may notice an error while still sending; stopping there (rather than raising out
    of the pipeline block) lets the block end cleanly before the error is raised.
    """
    cursors = []
    error: psycopg.Error | None = None
    try:
        with conn.pipeline():
            for stmt in stmts:
                cur = conn.cursor(binary=True)
                try:
                    cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)  # type: ignore[arg-type]
                except psycopg.Error as exc:
                    error = exc
                    break
                cursors.append(cur)
    except psycopg.Error:
        if error is None:
            raise
    if error is not None:
        raise error
    return cursors


async def _apipeline(
    conn: psycopg.AsyncConnection[Any], stmts: Sequence[_Stmt]
) -> list[psycopg.AsyncCursor[Any]]:
    cursors = []
    error: psycopg.Error | None = None
    try:
        async with conn.pipeline():
            for stmt in stmts:
                cur = conn.cursor(binary=True)
                try:
                    await cur.execute(stmt.query, stmt.params, prepare=stmt.prepare)  # type: ignore[arg-type]
                except psycopg.Error as exc:
                    error = exc
                    break
                cursors.append(cur)
    except psycopg.Error:
        if error is None:
            raise
    if error is not None:
        raise error
    return cursors


def _result(cur: psycopg.Cursor[Any]) -> _Result:
    rows = cur.fetchall() if cur.description is not None else []
    return _Result(cur.rowcount, rows)


async def _aresult(cur: psycopg.AsyncCursor[Any]) -> _Result:
    rows = await cur.fetchall() if cur.description is not None else []
    return _Result(cur.rowcount, rows)
