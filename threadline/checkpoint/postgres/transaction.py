"""``PostgresTx``: the core's read ``Transaction`` on PostgreSQL, a statement a call.

It only reads (the backend writes in its own calls, ``WholeThreads`` among them). Each read is
one statement, which is one snapshot, on a connection borrowed for it: a page's values are read
with the page (``page`` stashes them), and only ``threads`` may need more than one statement (its
pages after the first share one transaction).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from threadline.checkpoint.backend import Check, Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.layout import BlobRow, CheckpointRow
from threadline.checkpoint.postgres.connections import BEGIN_READ, COMMIT, Batch, Op, Stmt
from threadline.checkpoint.rules import status_of

if TYPE_CHECKING:
    from threadline.checkpoint.postgres.backend import PostgresBackend

_THREADS_PAGE = 256


class PostgresTx:
    """One read-only transaction of a ``PostgresBackend`` (``checkpoint.backend.Transaction``)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self.backend = backend
        self._stash: tuple[dict[Pair, BlobRow], Check] | None = None  # blobs of the last page

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        """Checkpoints with their writes and blobs in one statement (``backend.load_op``); the
        blobs are stashed for ``values``."""
        target = "page" if before is None else "page_before"
        params = {"before": before, "n": limit}
        op = self.backend.load_op(thread_id, ns, target, params, self._versions_of)
        stored, rows, check = self.backend.db.run(op, None)
        self._stash = (rows, check)
        return stored

    def _versions_of(self, row: CheckpointRow) -> dict[str, str] | None:
        return body_versions(row.body, row.checkpoint_id, self.backend.codec)

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """The blob rows the last ``page`` came with: its one statement read every row its
        checkpoints' values need (rows it missed are not stored in that snapshot)."""
        assert self._stash is not None, "values are read with a page"
        return self._stash

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        return self.backend.db.run(self._threads_op(status, limit), None)

    def _threads_op(self, status: ThreadStatus | None, limit: int | None) -> Op[list[ThreadRow]]:
        """Root heads, newest update first, a page a statement; status is worked out here. The
        first page is a statement alone; a transaction begins only if a second one is needed."""
        found: list[ThreadRow] = []
        params: dict[str, Any] = {}
        name, begun = "threads", False
        while limit is None or len(found) < limit:
            n = _THREADS_PAGE if limit is None or status is not None else limit - len(found)
            stmts = [Stmt(self.backend.q.threads[name], {**params, "n": n})]
            if name != "threads" and not begun:
                stmts.insert(0, BEGIN_READ)
                begun = True
            rows = (yield Batch(stmts))[-1].rows
            for thread_id, head, updated_at, body, task_ids, kinds, next_ in rows:
                state = status_of(next_, zip(task_ids, kinds, strict=True))
                if status is None or state == status:
                    at = updated_at.astimezone(UTC).isoformat(timespec="microseconds")
                    found.append(ThreadRow(thread_id, state, head, at, body))
            if len(rows) < n:
                break
            name, params["at"], params["tid"] = "threads_after", rows[-1][2], rows[-1][0]
        if begun:
            yield Batch([COMMIT])
        return found if limit is None else found[:limit]
