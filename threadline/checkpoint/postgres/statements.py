"""Every SQL statement the PostgreSQL saver sends, with the schema's table names filled in."""

from __future__ import annotations

import hashlib

from psycopg import sql

from threadline.checkpoint.postgres.schema import DDL, DDL_VERSION_TABLE

# Pieces the statements name like tables (``{data}``, ``{parent}``...; see ``Queries``).
_PIECES = {
    # A blob's bytes (of a row ``b`` of the thread): its ``data``, followed, when they are inside
    # a write (``blobs.src_*``, see ``schema``), by that slice of the write. A write that is gone
    # adds nothing: the bytes then fail their CRC-32, a clear error rather than a wrong value.
    "data": """b.data || CASE WHEN b.src_id IS NULL THEN ''::bytea ELSE COALESCE(substring(
    (SELECT w.data FROM {writes} w
      WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = b.checkpoint_ns
        AND w.checkpoint_id = b.src_id AND w.task_id = b.src_task AND w.kind = 'result')
    FROM b.src_at + 1 FOR b.src_len), ''::bytea) END""",
    "size": "length(b.data) + COALESCE(b.src_len, 0)",  # ``length`` reads the TOAST header
    # A checkpoint's time as microseconds since 1970 (``rows.created_text`` spells it).
    "micros": "(extract(epoch FROM c.created_at) * 1000000)::bigint",
    # A checkpoint's parent (``schema``: NULL is the previous checkpoint of the namespace).
    "parent": """CASE WHEN c.parent_id IS NOT NULL THEN nullif(c.parent_id, '') ELSE (
    SELECT max(p.checkpoint_id) FROM {cps} p
     WHERE p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns
       AND p.checkpoint_id < c.checkpoint_id) END""",
}

# ``list_threads``: root heads, newest update first, with the head's body and its writes; a
# page after the first starts below the last one's (``rows.threads_op``).
_THREADS = """
SELECT h.thread_id, h.head, h.updated_at, c.body,
       ARRAY(SELECT w.task_id FROM {writes} w
              WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = ''
                AND w.checkpoint_id = h.head ORDER BY w.seq),
       ARRAY(SELECT w.kind FROM {writes} w
              WHERE w.thread_id = h.thread_id AND w.checkpoint_ns = ''
                AND w.checkpoint_id = h.head ORDER BY w.seq),
       h.next
  FROM {heads} h JOIN {cps} c
    ON c.thread_id = h.thread_id AND c.checkpoint_ns = '' AND c.checkpoint_id = h.head
 WHERE h.checkpoint_ns = ''{after}
 ORDER BY h.updated_at DESC, h.thread_id DESC
 LIMIT %(n)s
"""


# Two parameters whatever the put (see ``schema.py``): a JSON text and the bytes.
_PUT = "SELECT {put}(%(put)s::jsonb, %(data)b)"
_PUT_MANY = "SELECT state, detail FROM {put_many}(%(puts)s::jsonb, %(data)b)"
# The same put run on libpq itself (``connections.Hot``): the JSON as text, the bytes in binary.
_PUT_HOT = "SELECT {put}($1::jsonb, $2)"

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
# Only a root-namespace row is listed by its time (see ``schema.DDL``).
_TOUCH_HEAD = """
UPDATE {heads}
   SET updated_at = CASE WHEN checkpoint_ns = '' THEN clock_timestamp() ELSE updated_at END
 WHERE thread_id = %(thread)s AND checkpoint_ns = %(ns)s AND head = %(cid)s
"""

# Which checkpoints a load is about; ``{col}`` is the checkpoint id column to constrain.
_TARGET_LATEST = (
    "{col} = (SELECT h.head FROM {heads} h"
    " WHERE h.thread_id = %(thread)s AND h.checkpoint_ns = %(ns)s)"
)
_TARGET_ONE = "{col} = %(cid)s"
_PAGE_IDS = (
    "SELECT p.checkpoint_id FROM {cps} p"
    " WHERE p.thread_id = %(thread)s AND p.checkpoint_ns = %(ns)s{before}"
    " ORDER BY p.checkpoint_id DESC LIMIT %(n)s"
)
# A range, not ``IN (page)``: the bound is computed once (an InitPlan), whatever the planner
# believes of the table's size (with no statistics it re-ran an ``IN`` subquery per row).
_TARGET_PAGE = "{col} >= (SELECT min(pg.checkpoint_id) FROM (" + _PAGE_IDS + ") pg){upper}"


# A load is one statement (one snapshot, no transaction around it): the checkpoints (part 0,
# numbered newest first), their writes (part 1, with their ``seq``) and their blobs (part 2), as
# rows of one shape that ``backend._unpack`` puts in order (an ORDER BY here would sort the
# blobs' bytes too, on disk for a large value). One statement instead of three in a read-only
# transaction halves the client's work: psycopg spends more on each statement of a pipeline
# than the rows of a load cost to read. PostgreSQL plans it again at every call (~0.45 ms of
# server time: with the arrays empty, a custom plan looks cheaper than a generic one).
# ``need``: every blob the values live in, following ``base`` to a full blob (down a delta
# chain, or from a prefix row to the later version it is part of), each by its primary key
# (``LATERAL ... LIMIT 1``, which the planner cannot flatten into a join: a join let it hash
# every blob of the thread).
# ``held_*`` name the blobs whose bytes the saver has (``bytecache.HeldBlobs``): their data
# comes back NULL unless the row's CRC-32 or length differs (rewritten meanwhile). ``tip_*``
# name the tips of chains the saver holds (``chains.HeldChains``): the walk stops at a tip whose
# row still has that CRC-32.
_LOAD = """
WITH RECURSIVE need(key, version) AS (
    SELECT r.key, r.version
      FROM {cps} c CROSS JOIN LATERAL unnest(c.blob_keys, c.blob_versions) AS r(key, version)
     WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND {target_c}
  UNION
    SELECT d.key, d.base
      FROM need n CROSS JOIN LATERAL (
           SELECT b.key, b.base FROM {blobs} b
            WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
              AND b.key = n.key AND b.version = n.version AND b.base IS NOT NULL
              AND NOT EXISTS (
                  SELECT 1 FROM unnest(%(tip_keys)s::text[], %(tip_versions)s::text[],
                                       %(tip_crcs)s::bigint[]) AS t(key, version, crc32)
                   WHERE t.key = b.key AND t.version = b.version AND t.crc32 = b.crc32)
            LIMIT 1) d
)
SELECT 0 AS part, row_number() OVER (ORDER BY c.checkpoint_id DESC) AS ord,
       c.checkpoint_id, {parent}, c.created_raw, NULL::text, c.body, c.metadata,
       c.step::bigint, {micros}, NULL::bigint, NULL::bigint
  FROM {cps} c
 WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND {target_c}
UNION ALL
SELECT 1, w.seq, w.checkpoint_id, w.task_id, w.kind, w.task_name, w.data, NULL,
       NULL, NULL, NULL, NULL
  FROM {writes} w
 WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = %(ns)s AND {target_w}
UNION ALL
SELECT 2, 0, b.key, b.version, b.start, b.base, CASE WHEN h.key IS NULL THEN {data} END, NULL,
       b.chain_bytes, b.full_bytes, b.crc32, b.items
  FROM need n CROSS JOIN LATERAL (
       SELECT * FROM {blobs} b
        WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
          AND b.key = n.key AND b.version = n.version
        LIMIT 1) b
  LEFT JOIN unnest(%(held_keys)s::text[], %(held_versions)s::text[], %(held_crcs)s::bigint[],
                   %(held_sizes)s::bigint[]) AS h(key, version, crc32, size)
    ON h.key = b.key AND h.version = b.version AND h.crc32 = b.crc32
   AND h.size = {size}
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
    SELECT c.checkpoint_ns, c.checkpoint_id, c.created_at, c.parent_id,
           row_number() OVER (PARTITION BY c.checkpoint_ns ORDER BY c.checkpoint_id DESC) AS rn,
           lag(c.checkpoint_id) OVER (PARTITION BY c.checkpoint_ns ORDER BY c.checkpoint_id)
               AS prev
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
kept_parents AS (  -- a kept checkpoint whose implied parent (the previous one) goes names it
    UPDATE {cps} c SET parent_id = r.prev
      FROM ranked r
     WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = r.checkpoint_ns
       AND c.checkpoint_id = r.checkpoint_id AND r.parent_id IS NULL
       AND EXISTS (SELECT 1 FROM doomed d
                    WHERE d.checkpoint_ns = r.checkpoint_ns AND d.checkpoint_id = r.prev)
       AND NOT EXISTS (SELECT 1 FROM doomed d
                        WHERE d.checkpoint_ns = r.checkpoint_ns
                          AND d.checkpoint_id = r.checkpoint_id)
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
kept_sources AS (  -- live blobs whose bytes are in a doomed write get them in the row
    UPDATE {blobs} b
       SET data = {data}, src_id = NULL, src_task = NULL, src_at = NULL, src_len = NULL
      FROM doomed d
     WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = d.checkpoint_ns
       AND b.src_id = d.checkpoint_id
       AND EXISTS (
           SELECT 1 FROM live l
            WHERE l.checkpoint_ns = b.checkpoint_ns AND l.key = b.key AND l.version = b.version)
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

# A blob row without its bytes (``PostgresBackend.blob``).
_BLOB_META = """
SELECT b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, ''::bytea, b.items
  FROM {blobs} b
 WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
   AND b.key = %(key)s AND b.version = %(version)s"""

_THREAD_EXISTS = "SELECT EXISTS (SELECT 1 FROM {cps} WHERE thread_id = %(target)s)"

# After ``_DELETE_THREAD`` of the target (rows left there without checkpoints).
_COPY_THREAD = (
    """
INSERT INTO {heads} (thread_id, checkpoint_ns, head, next, updated_at)
SELECT %(target)s, checkpoint_ns, head, next, clock_timestamp()
  FROM {heads} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {cps} (
    thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, created_raw, body,
    metadata, blob_keys, blob_versions
)
SELECT %(target)s, checkpoint_ns, checkpoint_id, parent_id, step, created_at, created_raw,
       body, metadata, blob_keys, blob_versions
  FROM {cps} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {blobs} (
    thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32, data,
    items, src_id, src_task, src_at, src_len
)
SELECT %(target)s, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32,
       data, items, src_id, src_task, src_at, src_len
  FROM {blobs} WHERE thread_id = %(source)s
""",
    """
INSERT INTO {writes} (thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data)
SELECT %(target)s, checkpoint_ns, checkpoint_id, task_id, kind, task_name, data
  FROM {writes} WHERE thread_id = %(source)s
 ORDER BY seq
""",
)


# The names the statements give the tables and functions: ``threadline_<table>`` in the schema.
_TABLES = {
    "version": "schema_version",
    "heads": "heads",
    "cps": "checkpoints",
    "blobs": "blobs",
    "writes": "writes",
    "advance": "advance_head",
    "check_refs": "check_refs",
    "put": "put",
    "put_many": "put_many",
}


class Queries:
    """Every statement, with the schema's (quoted) table names filled in once."""

    def __init__(self, schema: str) -> None:
        self.names: dict[str, sql.Composable] = {
            name: sql.Identifier(schema, f"threadline_{table}") for name, table in _TABLES.items()
        }
        tables = dict(self.names)
        for name, piece in _PIECES.items():
            self.names[name] = sql.SQL(piece).format(**tables)
        self.schema = sql.Identifier(schema).as_string(None)
        self.version_table = self.names["version"].as_string(None)
        f = self.format
        self.ddl_version_table = f(DDL_VERSION_TABLE)
        self.ddl = tuple(f(stmt) for stmt in DDL)
        self.put = f(_PUT)
        self.put_many = f(_PUT_MANY)
        self.put_hot = f(_PUT_HOT).encode()  # libpq takes bytes: encoded once, not per put
        # Its prepared statement's name, one per schema (the statement names its tables).
        digest = hashlib.sha1(self.put_hot).hexdigest()[:16]
        self.put_hot_name = f"threadline_put_{digest}".encode()
        self.upsert_writes = f(_UPSERT_WRITES)
        self.touch_head = f(_TOUCH_HEAD)
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
        self.thread_exists = f(_THREAD_EXISTS)
        self.blob_meta = f(_BLOB_META)
        self.copy_thread = tuple(f(stmt) for stmt in _COPY_THREAD)
        before = " AND p.checkpoint_id < %(before)s"
        targets = {
            "latest": _TARGET_LATEST,
            "one": _TARGET_ONE,
            "page": _TARGET_PAGE.replace("{before}", "").replace("{upper}", ""),
            "page_before": _TARGET_PAGE.replace("{before}", before).replace(
                "{upper}", " AND {col} < %(before)s"
            ),
        }
        # The load (``_LOAD``) for each way of choosing the checkpoints.
        self.load = {name: f(_targeted(_LOAD, target)) for name, target in targets.items()}
        after = " AND (h.updated_at, h.thread_id) < (%(at)s, %(tid)s)"
        self.threads = {
            "threads": f(_THREADS.replace("{after}", "")),
            "threads_after": f(_THREADS.replace("{after}", after)),
        }

    def format(self, template: str) -> str:
        return sql.SQL(template).format(**self.names).as_string(None)


def _targeted(template: str, target: str) -> str:
    """``template`` constraining its checkpoints (``c``) and writes (``w``) to ``target``."""
    return template.replace("{target_c}", target.replace("{col}", "c.checkpoint_id")).replace(
        "{target_w}", target.replace("{col}", "w.checkpoint_id")
    )
