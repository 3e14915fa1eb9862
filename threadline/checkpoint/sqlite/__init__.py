"""A saver backed by one SQLite file (stdlib ``sqlite3``), for single-machine durability.

The database runs in WAL mode with ``synchronous=NORMAL``: readers never block the writer, and a
committed checkpoint survives a process crash (``synchronous="full"``: a power loss too). One
connection, the saver's own or one given to it, is shared by every thread that uses the saver,
guarded by a lock; several savers (or processes) may open the same file, and wait up to
``timeout`` seconds for each other's write transactions. ``AsyncSqliteSaver`` (in ``aio``) is
the same saver under LangGraph's async name.

Storage follows ``threadline.checkpoint.layout`` (format version 1): a small ``checkpoints`` row
per checkpoint holding every small scalar value (``layout.inlined``: a step that only bumps a
counter writes one row), one ``blobs`` row per other value that changed (list deltas for lists
that grew), the
pending ``writes``, and a ``threads`` row per thread holding its status, written only when the
status changes (``list_threads`` joins each row with the thread's newest checkpoint, one query).
Each ``put`` is one transaction and one commit: compare-and-set on the head, the row, the new
blobs, the writes, the thread row if its status changed, and retention.

Every value goes into SQL as a bound parameter. Metadata is stored encoded and filtered in
Python, so a filter key never reaches SQL. Each blob row carries a CRC-32 of its data, checked
on load, so a damaged value fails with an error naming its key instead of loading garbage.

The package, by layer:

- ``schema.py`` — the tables and the statements that write their rows;
- ``connection.py`` — the connection: opened on a path, or a caller's checked and prepared;
- ``migration.py`` — opening a file: WAL mode, the version check, migrations (none yet)
  (in one transaction; a failure leaves the file as it was);
- ``queries.py`` — reading and writing rows inside a transaction: blobs and their delta
  chains, writes;
- ``backend.py`` — ``SqliteBackend``: the backend protocol (``checkpoint.backend``) on the
  connection, its lock and transactions, and the bytes and chains it holds;
- ``saver.py`` — ``SqliteSaver``: ``core.CoreSaver`` (the public API) over that backend.
"""

from threadline.checkpoint.sqlite.saver import SqliteSaver
from threadline.checkpoint.sqlite.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "SqliteSaver"]
