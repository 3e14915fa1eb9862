"""The SQLite tables (schema version 3) and the statements that read and write their rows.

``checkpoints`` is a ``WITHOUT ROWID`` table: its primary key is the table, so a put writes one
b-tree, not a table and an index. ``blobs`` keeps a rowid (its rows hold values of any size) and
has no index but its primary key: a delta chain is a range of it. ``writes`` keeps one too: its
rows are often over 1 KB (a batch of the execution trace), which a ``WITHOUT ROWID`` leaf would
move to an overflow page, a page as costly as the index. Every b-tree a put touches costs it a
page written to the WAL.

A checkpoint row is compact (about 75 bytes for a step that moves a counter): its
``created_at`` column has no type, so it holds a small integer, the microseconds from the
millisecond of the row's id (``stamps.stored_created``), or the text when that does not give it
back; ``CREATED_AT`` is the SQL function that spells either as text. Its ``metadata`` is empty
when it is the loop's (``bodies.encode_metadata``), and its ``parent_id`` NULL when the parent
is the previous checkpoint (``_SELECT``).
"""

from threadline.checkpoint.bytecache import MIN_BYTES

SCHEMA_VERSION = 3

CREATED_AT = "threadline_created_at"
"""SQL function ``(checkpoint_id, created_at column) -> text`` (``stamps.created_text``),
registered on every connection the saver uses."""

# ``seq`` is the rowid: a new row's is one more than the largest in the table, so it keeps a
# checkpoint's writes in insertion order, and an upsert that replaces a write keeps its row and
# so its position. (Version 2 counted ``seq`` per checkpoint with a ``MAX(seq)`` subquery in
# each insert, which read every earlier write of the checkpoint: ``connection.MIGRATIONS``.)
WRITES = """
    CREATE TABLE IF NOT EXISTS writes (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        checkpoint_id TEXT    NOT NULL,
        task_id       TEXT    NOT NULL,
        kind          TEXT    NOT NULL,
        task_name     TEXT    NOT NULL,
        seq           INTEGER PRIMARY KEY,
        value         BLOB    NOT NULL,
        UNIQUE (thread_id, checkpoint_ns, checkpoint_id, task_id, kind)
    )
"""

SCHEMA = (
    """
    CREATE TABLE IF NOT EXISTS checkpoints (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        checkpoint_id TEXT    NOT NULL,
        parent_id     TEXT,
        step          INTEGER NOT NULL,
        created_at            NOT NULL,
        body          BLOB    NOT NULL,
        metadata      BLOB    NOT NULL,
        PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id)
    ) WITHOUT ROWID
    """,
    """
    CREATE TABLE IF NOT EXISTS blobs (
        thread_id     TEXT    NOT NULL,
        checkpoint_ns TEXT    NOT NULL DEFAULT '',
        key           TEXT    NOT NULL,
        version       TEXT    NOT NULL,
        start         TEXT    NOT NULL,
        base          TEXT,
        chain_bytes   INTEGER NOT NULL,
        full_bytes    INTEGER NOT NULL,
        crc32         INTEGER NOT NULL,
        data          BLOB    NOT NULL,
        items         INTEGER,
        PRIMARY KEY (thread_id, checkpoint_ns, key, version)
    )
    """,
    WRITES,
    """
    CREATE TABLE IF NOT EXISTS threads (
        thread_id     TEXT    NOT NULL PRIMARY KEY,
        status        TEXT    NOT NULL,
        checkpoint_id TEXT    NOT NULL,
        updated_at    TEXT    NOT NULL,
        next          TEXT    NOT NULL
    )
    """,
)

INSERT_CHECKPOINT = """
    INSERT INTO checkpoints (
        thread_id, checkpoint_ns, checkpoint_id, parent_id, step, created_at, body, metadata
    ) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
"""

_BLOBS = """blobs (
    thread_id, checkpoint_ns, key, version, start, base, chain_bytes, full_bytes, crc32, data, items
)"""
# A (key, version) stored already holds the same value (perhaps as a prefix row): keep it.
INSERT_BLOB = f"INSERT OR IGNORE INTO {_BLOBS} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
# Compaction: an older version becomes a prefix of a newer full blob and drops its bytes. A
# replace, not an update: the shrunk row moves to the end of the table instead of leaving a
# mostly empty page behind, so emptied pages go to the freelist (and back to the OS).
REPLACE_WITH_PREFIX = f"INSERT OR REPLACE INTO {_BLOBS} VALUES (?, ?, ?, ?, ?, ?, 0, ?, 0, x'', ?)"


def repoint_prefixes(versions: int) -> str:
    """Prefix rows of ``versions`` (just compacted) point straight at the new full blob.

    Without this, a version compacted n times ago would load through n prefix rows.
    """
    marks = ", ".join("?" * versions)
    return f"""
    UPDATE blobs SET start = ?, base = ?, full_bytes = ?
     WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? AND chain_bytes = 0
       AND base IN ({marks})
    """


# A new write takes the next ``seq`` (``WRITES``); replacing one keeps its row and position.
UPSERT_WRITE = """
    INSERT INTO writes (thread_id, checkpoint_ns, checkpoint_id, task_id, kind, task_name, value)
    VALUES (?, ?, ?, ?, ?, ?, ?)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, kind) DO UPDATE SET
        task_name = excluded.task_name,
        value = excluded.value
"""

UPSERT_THREAD = """
    INSERT INTO threads (thread_id, status, checkpoint_id, updated_at, next)
    VALUES (?, ?, ?, ?, ?)
    ON CONFLICT (thread_id) DO UPDATE SET
        status = excluded.status,
        checkpoint_id = excluded.checkpoint_id,
        updated_at = excluded.updated_at,
        next = excluded.next
"""


# Each thread with its head row: newest first by the later of its head's creation and the thread
# row's last write (a write on the head, a change of status).
LIST_THREADS = """
    SELECT t.thread_id, t.status, h.checkpoint_id,
           max(t.updated_at, threadline_created_at(h.checkpoint_id, h.created_at)) AS at,
           h.body
      FROM threads t
      JOIN checkpoints h
        ON h.thread_id = t.thread_id AND h.checkpoint_ns = ''
       AND h.checkpoint_id = (SELECT MAX(c.checkpoint_id) FROM checkpoints c
                               WHERE c.thread_id = t.thread_id AND c.checkpoint_ns = '')
     {where}
     ORDER BY at DESC, t.thread_id DESC LIMIT ?
"""


# A put's two reads in one statement (parameters: thread, namespace, thread; numbered ones are
# refused from a sequence by Python 3.14): the head, its compare-and-set, and the thread's
# status. The status is written only when it changes, so most puts write no thread row (two
# pages fewer to commit); ``list_threads`` reads the head's own time and plan (``LIST_THREADS``).
HEAD_AND_STATUS = """
    SELECT (SELECT MAX(checkpoint_id) FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = ?),
           (SELECT status FROM threads WHERE thread_id = ?)
"""


# A row's ``parent_id`` is NULL when its parent is the previous checkpoint of the namespace (the
# put's parent was the head: ``_Tx.insert``) and '' when it has none; a deletion first names the
# deleted checkpoint in the row that implied it (``NAME_PARENT``). Reads take one row more, the
# previous checkpoint of the last they want, and spell the parents out (``_Tx._with_writes``).
_SELECT = """
    SELECT checkpoint_id, parent_id, step, created_at, body, metadata FROM checkpoints
     WHERE thread_id = ? AND checkpoint_ns = ?"""

SELECT_ONE = _SELECT + " AND checkpoint_id <= ? ORDER BY checkpoint_id DESC LIMIT 2"

SELECT_LATEST = _SELECT + " ORDER BY checkpoint_id DESC LIMIT 2"

SELECT_PAGE = _SELECT + " AND (? IS NULL OR checkpoint_id < ?) ORDER BY checkpoint_id DESC LIMIT ?"

# Parameters: the deleted id, thread, namespace, thread, namespace, the deleted id.
NAME_PARENT = """
    UPDATE checkpoints SET parent_id = ?
     WHERE thread_id = ? AND checkpoint_ns = ? AND parent_id IS NULL
       AND checkpoint_id = (SELECT min(checkpoint_id) FROM checkpoints
                             WHERE thread_id = ? AND checkpoint_ns = ? AND checkpoint_id > ?)
"""

# Copying a thread (parameters: target, source), then its thread row (target, now, source).
COPY_THREAD = (
    "INSERT INTO checkpoints SELECT ?, checkpoint_ns, checkpoint_id, parent_id, step, created_at,"
    " body, metadata FROM checkpoints WHERE thread_id = ?",
    "INSERT INTO blobs SELECT ?, checkpoint_ns, key, version, start, base, chain_bytes,"
    " full_bytes, crc32, data, items FROM blobs WHERE thread_id = ?",
    "INSERT INTO writes SELECT ?, checkpoint_ns, checkpoint_id, task_id, kind, task_name, NULL,"
    " value FROM writes WHERE thread_id = ? ORDER BY seq",
)
COPY_THREAD_ROW = (
    "INSERT INTO threads SELECT ?, status, checkpoint_id, ?, next FROM threads WHERE thread_id = ?"
)


def select_writes(count: int) -> str:
    """The writes of ``count`` checkpoints (parameters: thread, namespace, ids), in order."""
    return (
        "SELECT checkpoint_id, task_id, kind, task_name, value FROM writes WHERE thread_id = ? "
        f"AND checkpoint_ns = ? AND checkpoint_id IN ({', '.join('?' * count)}) "
        "ORDER BY checkpoint_id, seq"
    )


BLOB_META = "key, version, start, base, chain_bytes, full_bytes, items"
SELECT_BLOB = (
    f"SELECT {BLOB_META} FROM blobs"
    " WHERE thread_id = ? AND checkpoint_ns = ? AND key = ? AND version = ?"
)
JOINED_META = "b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, b.items"
# Large data comes in a second query, unless the process has it already (``ByteCache``).
JOINED_DATA = JOINED_META + f", CASE WHEN length(b.data) < {MIN_BYTES} THEN b.data END, b.crc32"
BY_PAIR = "b.key = w.k AND b.version = w.v"  # ``join_blobs`` of (key, version) pairs
CHUNK = 400  # pairs per query: 802 parameters, under the 999 of older SQLite builds


def join_blobs(width: int, count: int, columns: str, where: str) -> str:
    """``columns`` of the blob rows matching ``where`` for each of ``count`` tuples of ``width``
    parameters (``w.k, w.v[, w.last]``), then thread and namespace.

    The tuples are a ``VALUES`` list joined (in that order: ``CROSS JOIN``) to the table, so
    SQLite probes the primary key once per tuple whatever its statistics say.
    """
    marks = "(" + ", ".join("?" * width) + ")"
    return (
        f"WITH w ({', '.join(('k', 'v', 'last')[:width])}) AS (VALUES {', '.join([marks] * count)})"
        f" SELECT {columns} FROM w CROSS JOIN blobs AS b"
        f" WHERE b.thread_id = ? AND b.checkpoint_ns = ? AND {where}"
    )
