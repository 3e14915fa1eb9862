"""The statements of a ``transaction.PostgresTx``: one per read or write of the core's
``Transaction`` (templates over ``statements.Queries.names``), and the SQL pieces the load and
prune statements share with them."""

from __future__ import annotations

# A blob's bytes (of a row ``b`` of the thread): its ``data``, followed, when they are inside a
# write (``blobs.src_*``, see ``schema``), by that slice of the write. A write that is gone adds
# nothing: the bytes then fail their CRC-32, a clear error rather than a wrong value.
BLOB_DATA = """b.data || CASE WHEN b.src_id IS NULL THEN ''::bytea ELSE COALESCE(substring(
    (SELECT w.data FROM {writes} w
      WHERE w.thread_id = %(thread)s AND w.checkpoint_ns = b.checkpoint_ns
        AND w.checkpoint_id = b.src_id AND w.task_id = b.src_task AND w.kind = 'result')
    FROM b.src_at + 1 FOR b.src_len), ''::bytea) END"""
# A checkpoint's time as microseconds since 1970 (``rows.created_text`` spells it).
MICROS = "(extract(epoch FROM c.created_at) * 1000000)::bigint"
# A checkpoint's parent (``schema``: NULL is the previous checkpoint of the namespace).
PARENT = """CASE WHEN c.parent_id IS NOT NULL THEN nullif(c.parent_id, '') ELSE (
    SELECT max(p.checkpoint_id) FROM {cps} p
     WHERE p.thread_id = c.thread_id AND p.checkpoint_ns = c.checkpoint_ns
       AND p.checkpoint_id < c.checkpoint_id) END"""

_META = "b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, b.items"
_NS = "thread_id = %(thread)s AND checkpoint_ns = %(ns)s"

# Every blob row rebuilding the named values needs, down each chain to a full blob, with data.
_VALUES = f"""
WITH RECURSIVE need(key, version) AS (
    SELECT * FROM unnest(%(keys)s::text[], %(versions)s::text[])
  UNION
    SELECT b.key, b.base FROM need n JOIN {{blobs}} b
        ON b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
       AND b.key = n.key AND b.version = n.version
     WHERE b.base IS NOT NULL
)
SELECT {_META}, {BLOB_DATA}, b.crc32
  FROM need n JOIN {{blobs}} b
    ON b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s
   AND b.key = n.key AND b.version = n.version
"""

# Blobs whose bytes are inside a write that goes get them in their own row first.
_KEEP_SOURCES = f"""
UPDATE {{blobs}} b
   SET data = {BLOB_DATA}, src_id = NULL, src_task = NULL, src_at = NULL, src_len = NULL
 WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s AND b.src_id = ANY(%(ids)s::text[])
"""

# Checkpoints whose parent is implied (the previous one) and about to go name it.
_KEEP_PARENTS = f"""
UPDATE {{cps}} c SET parent_id = {PARENT.replace("{cps}", "{{cps}}")}
 WHERE c.thread_id = %(thread)s AND c.checkpoint_ns = %(ns)s AND c.parent_id IS NULL
   AND NOT c.checkpoint_id = ANY(%(ids)s::text[])
   AND {PARENT.replace("{cps}", "{{cps}}")} = ANY(%(ids)s::text[])
"""

_DROP_EMPTY_HEAD = """
DELETE FROM {heads} h WHERE h.thread_id = %(thread)s AND h.checkpoint_ns = %(ns)s
   AND NOT EXISTS (SELECT 1 FROM {cps} c
                    WHERE c.thread_id = h.thread_id AND c.checkpoint_ns = h.checkpoint_ns)
"""

# ``list_threads``: root heads, newest update first, with the head's body and its writes.
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
_AFTER = " AND (h.updated_at, h.thread_id) < (%(at)s, %(tid)s)"

TX_STATEMENTS = {
    "values": _VALUES,
    "blob_meta": f"""
SELECT {_META} FROM {{blobs}} b
  JOIN unnest(%(keys)s::text[], %(versions)s::text[]) AS n(key, version)
    ON b.key = n.key AND b.version = n.version
 WHERE b.thread_id = %(thread)s AND b.checkpoint_ns = %(ns)s""",
    "all_blob_meta": f"SELECT {_META} FROM {{blobs}} b WHERE b.{_NS}",
    "ids": f"SELECT c.checkpoint_id, {MICROS}, c.created_raw FROM {{cps}} c WHERE c.{_NS}"
    " ORDER BY c.checkpoint_id DESC",
    "bodies": f"SELECT checkpoint_id, body FROM {{cps}} WHERE {_NS}",
    "namespaces": "SELECT DISTINCT checkpoint_ns FROM {cps} WHERE thread_id = %(thread)s",
    "keep_sources": _KEEP_SOURCES,
    "keep_parents": _KEEP_PARENTS,
    "delete_writes": f"DELETE FROM {{writes}} WHERE {_NS} AND checkpoint_id = ANY(%(ids)s::text[])",
    "delete_cps": f"DELETE FROM {{cps}} WHERE {_NS} AND checkpoint_id = ANY(%(ids)s::text[])",
    "drop_empty_head": _DROP_EMPTY_HEAD,
    "delete_blobs": f"""
DELETE FROM {{blobs}} b USING unnest(%(keys)s::text[], %(versions)s::text[]) AS n(key, version)
 WHERE b.{_NS} AND b.key = n.key AND b.version = n.version""",
    "threads": _THREADS.replace("{after}", ""),
    "threads_after": _THREADS.replace("{after}", _AFTER),
}
