"""``PostgresSaver``: ``core.CoreSaver`` over a ``PostgresBackend`` on a URL or a given
connection or pool."""

from __future__ import annotations

from typing import Any, Self

from threadline.checkpoint.base import Retention
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.postgres.backend import PostgresBackend
from threadline.checkpoint.postgres.connections import BEGIN_WRITE, Batch, Op, Stmt
from threadline.checkpoint.postgres.pools import Given, connections_for
from threadline.checkpoint.postgres.schema import MIGRATIONS, SCHEMA_VERSION
from threadline.checkpoint.postgres.statements import Queries
from threadline.serde import DEFAULT, Serializer


class PostgresSaver(CoreSaver):
    """Checkpoints in PostgreSQL, shared safely by any number of processes and machines.

    Give it a URL, or (as LangGraph's docs do) a ``psycopg.Connection`` or ``ConnectionPool``
    made with ``autocommit=True``, which stays yours (``pools.py``). Call :meth:`setup` once
    (idempotent, safe to run concurrently) to create the tables, and :meth:`close` (or use the
    saver as a context manager) when done::

        with PostgresSaver.from_conn_string("postgresql://localhost/app") as saver:
            graph = builder.compile(checkpointer=saver)

    ``schema`` puts the tables in another schema (``setup`` creates it). ``pool_size`` bounds
    the connections of the sync pool and of each event loop's async pool opened from a URL.
    ``retention`` prunes a namespace's older checkpoints each time one is saved, in the same
    transaction. ``copy_thread`` raises ``ValueError`` if the target already has checkpoints.
    No connection is made before the first call. ``close`` closes an async pool on its event
    loop when that loop can still run; in async code prefer ``await saver.aclose()``.
    """

    backend: PostgresBackend

    def __init__(
        self,
        conn: str | Given,
        *,
        pool_size: int | None = None,
        retention: Retention | None = None,
        serde: Serializer | None = None,
        schema: str = "public",
        connect_timeout: float | None = None,
        pool_timeout: float | None = None,
    ) -> None:
        if not schema:
            raise ValueError("PostgresSaver schema must not be empty")
        self.url = conn if isinstance(conn, str) else None
        self.schema = schema
        self._q = Queries(schema)
        pools = {"pool_size": pool_size, "connect_timeout": connect_timeout}
        pools["pool_timeout"] = pool_timeout
        name, table = type(self).__name__, self._q.version_table
        self._db = connections_for(name, conn, schema, table, pools)
        codec = serde or DEFAULT
        backend = PostgresBackend(self._db, self._q, codec)
        super().__init__(backend, retention=retention, serde=codec)

    @classmethod
    def from_conn_string(cls, conn_string: str, *, pipeline: bool = False, **options: Any) -> Self:
        """A set-up saver: ``with PostgresSaver.from_conn_string(url) as saver:``. Its
        operations are pipelined whatever ``pipeline`` says (each is one round trip)."""
        saver = cls(conn_string, **options)
        try:
            saver.setup()
        except BaseException:
            saver.close()
            raise
        return saver

    def __repr__(self) -> str:
        state = "closed" if self._db.closed else "open"
        return f"PostgresSaver({self._db.masked!r}, schema={self.schema!r}, {state})"

    @property
    def pool_size(self) -> int:
        """The most connections of the sync pool, and of each event loop's async pool."""
        return self._db.pool_size

    # -- setup ---------------------------------------------------------------------------------

    def setup(self) -> None:
        """Create the schema, tables and functions if missing; safe to call concurrently.

        Raises ``SaverUnavailableError`` if the tables were made by a newer threadline.
        """
        self._db.run(self._setup_op(), BEGIN_WRITE)

    async def asetup(self) -> None:
        await self._db.arun(self._setup_op(), BEGIN_WRITE)

    def _setup_op(self) -> Op[None]:
        q, table = self._q, self._q.version_table
        # Concurrent CREATE ... IF NOT EXISTS can still collide: one setup at a time per schema.
        lock = "SELECT pg_advisory_xact_lock(hashtext('threadline.setup'), hashtext(%(schema)s))"
        stmts = [_once(lock, {"schema": self.schema})]
        if self.schema != "public":
            stmts.append(_once(f"CREATE SCHEMA IF NOT EXISTS {q.schema}"))
        stmts += [_once(q.ddl_version_table), _once(f"SELECT max(version) FROM {table}")]
        results = yield Batch(stmts, last=False)
        found = results[-1][0][0]
        if found is not None and found > SCHEMA_VERSION:
            raise self._db.too_new(found)
        stmts = [
            _once(q.format(migration))
            for step in migrations_from(found, SCHEMA_VERSION, MIGRATIONS, f"schema {q.schema}")
            for migration in step
        ]
        stmts += [_once(ddl) for ddl in q.ddl]
        version = {"v": SCHEMA_VERSION}
        if found is None:
            stmts.append(_once(f"INSERT INTO {table} (version) VALUES (%(v)s)", version))
        elif found < SCHEMA_VERSION:
            stmts.append(_once(f"UPDATE {table} SET version = %(v)s", version))
        yield Batch(stmts)

    # -- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the pools from async code: this loop's pool is awaited, others as in close."""
        await self.backend.aclose()
        super().close()


def _once(query: str, params: dict[str, Any] | None = None) -> Stmt:
    """A statement of ``setup``, not worth preparing."""
    return Stmt(query, params, prepare=False)
