"""A saver backed by one SQLite file (stdlib ``sqlite3``), for single-machine durability.

WAL mode with ``synchronous=NORMAL``: readers never block the writer, and a committed
checkpoint survives a process crash (``synchronous="full"``: a power loss too). One connection,
the saver's own or one given to it, is shared by the threads that use the saver under a lock;
savers and processes may share a file, waiting up to ``timeout`` seconds for each other's write
transactions. Each ``put`` is one transaction and one commit: compare-and-set on the head, the
row, the new blobs, the writes, the thread row if its status changed, and retention. Every value
is a bound parameter; each blob row carries a CRC-32, checked on load. ``AsyncSqliteSaver`` (in
``aio``) is the same saver under LangGraph's async name.

The package: ``schema.py`` (the tables and every statement), ``connection.py`` (opening or
adopting a connection; the schema version and its migrations), ``queries.py`` (reading blob
rows and their chains), ``backend.py`` (``SqliteBackend``, the ``checkpoint.backend`` protocol)
and ``saver.py`` (``SqliteSaver``: ``core.CoreSaver`` over it).
"""

from threadline.checkpoint.sqlite.saver import SqliteSaver
from threadline.checkpoint.sqlite.schema import SCHEMA_VERSION

__all__ = ["SCHEMA_VERSION", "SqliteSaver"]
