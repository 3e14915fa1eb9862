"""Open what a server or worker process needs from its settings: saver, store, records, graphs."""

from __future__ import annotations

import uuid
from urllib.parse import unquote, urlsplit

from threadline.checkpoint.urls import from_url
from threadline.server import records
from threadline.server.db import Database
from threadline.server.execute import Services
from threadline.server.graphs import load_graphs
from threadline.server.settings import ServerSettings
from threadline.store.base import BaseStore

_NAMESPACE = uuid.UUID("6f1d5a4e-8c1b-4d0e-9a53-0b7c1f2e3d4a")


def graph_assistant_id(graph_id: str) -> str:
    """The assistant each served graph has, with an id stable across restarts and machines."""
    return str(uuid.uuid5(_NAMESPACE, graph_id))


def store_from_url(url: str, schema: str = "public") -> BaseStore:
    """The store kept beside the checkpoints: the same SQLite file or PostgreSQL database."""
    scheme = urlsplit(url).scheme.lower()
    if scheme in ("postgres", "postgresql"):
        from threadline.store.postgres import PostgresStore

        store: BaseStore = PostgresStore(url, schema=schema)
    elif scheme == "sqlite":
        from threadline.store.sqlite import SqliteStore

        rest = url.split("://", 1)[1]
        store = SqliteStore(":memory:" if rest in ("", ":memory:") else unquote(rest[1:]))
    else:
        from threadline.store.memory import InMemoryStore

        return InMemoryStore()
    store.setup()  # type: ignore[attr-defined]
    return store


def open_services(settings: ServerSettings, worker_id: str = "local") -> Services:
    """Everything of ``settings`` opened; the config's graphs are registered as assistants."""
    postgres = settings.db.startswith(("postgres://", "postgresql://"))
    saver = from_url(settings.db, **({"schema": settings.schema} if postgres else {}))
    store = store_from_url(settings.db, settings.schema)
    db = Database(settings.db, schema=settings.schema)
    graphs = load_graphs(settings.graphs, settings.base_dir, saver, store)
    for graph_id in graphs:
        _register(db, graph_id)
    if settings.queue == "procrastinate":
        from threadline.server.jobs import apply_schema

        apply_schema(settings)
    return Services(
        db=db,
        saver=saver,
        store=store,
        graphs=graphs,
        worker_id=worker_id,
        lease_seconds=settings.lease_seconds,
    )


def _register(db: Database, graph_id: str) -> None:
    system = {
        "assistant_id": graph_assistant_id(graph_id),
        "graph_id": graph_id,
        "name": graph_id,
        "metadata": {"created_by": "system"},
    }
    db.do(lambda tx: records.put_system_assistant(tx, system))


def close_services(services: Services) -> None:
    services.db.close()
    services.saver.close()
    close = getattr(services.store, "close", None)
    if close is not None:
        close()
