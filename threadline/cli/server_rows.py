"""After ``resume``/``fork`` moved a thread the server runs, its row in the server's records
says so too (``GET /threads/{id}`` and ``/threads/search`` by status read that row).

The server updates the row itself after its own runs and state updates; this does what its
``update_state`` route does, for a change made outside it. Only for a thread of one of the
config's graphs (``graph_id`` known) on a database the server keeps records in.
"""

from __future__ import annotations

from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from threadline.cli.context import is_postgres
from threadline.cli.graphs import ThreadGraph

if TYPE_CHECKING:
    from threadline.server.db import Tx


def sync_server_row(url: str, schema: str | None, bound: ThreadGraph, thread_id: str) -> bool:
    """Refresh the thread's status, values and interrupts in ``tl_threads``; whether it had
    a row there."""
    if bound.graph_id is None or not (is_postgres(url) or urlsplit(url).scheme == "sqlite"):
        return False
    from threadline.server import records
    from threadline.server.db import Database
    from threadline.server.wire import interrupts_by_task, jsonable, thread_status

    snap = bound.graph.get_state({"configurable": {"thread_id": thread_id}})

    def refresh(tx: Tx) -> bool:
        if not records.thread_exists(tx, thread_id):
            return False
        records.set_thread_state(
            tx, thread_id, thread_status(snap), jsonable(snap.values), interrupts_by_task(snap)
        )
        return True

    db = Database(url, schema=schema) if schema and is_postgres(url) else Database(url)
    try:
        return db.do(refresh)
    finally:
        db.close()
