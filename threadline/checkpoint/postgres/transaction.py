"""``PostgresTx``: the core's ``Transaction`` on one PostgreSQL connection, a statement a call.

It only reads (the backend writes in its own calls, ``WholeThreads`` among them). Its first
statement runs alone, which is one snapshot; it begins a transaction only if it needs a second
(a page's values are read with the page: ``page`` stashes them).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC
from typing import TYPE_CHECKING, Any

from threadline.checkpoint.backend import Check, Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bodies import body_versions
from threadline.checkpoint.layout import BlobRow, CheckpointRow
from threadline.checkpoint.postgres.connections import Session
from threadline.checkpoint.postgres.driver import BEGIN_READ, COMMIT, Batch, Op, Result, Stmt
from threadline.checkpoint.postgres.rows import blob_row
from threadline.checkpoint.rules import status_of

if TYPE_CHECKING:
    from threadline.checkpoint.postgres.backend import PostgresBackend

_THREADS_PAGE = 256


class PostgresTx:
    """One read-only transaction of a ``PostgresBackend`` (``checkpoint.backend.Transaction``)."""

    def __init__(self, backend: PostgresBackend, session: Session) -> None:
        self.backend = backend
        self.session = session
        self.sql = backend.q.tx
        self.begun = False
        self.ran = False
        self._stash: tuple[dict[Pair, BlobRow], Check] | None = None  # blobs of the last page

    def _run(self, *stmts: Stmt) -> list[Result]:
        """``stmts`` in one round trip (after a ``BEGIN``, if the transaction begins here)."""
        sent = list(stmts)
        if self.ran and not self.begun:
            sent.insert(0, BEGIN_READ)
            self.begun = True
        self.ran = True
        results = self.session.run(_batch(sent))
        return results[len(results) - len(stmts) :]

    def _rows(self, name: str, **params: Any) -> list[tuple[Any, ...]]:
        (result,) = self._run(Stmt(self.sql[name], params))
        return result.rows

    def end(self) -> None:
        if self.begun:
            self.session.run(_batch([COMMIT]))

    # -- reads ---------------------------------------------------------------------------------

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        """Checkpoints with their writes and blobs in one statement (``backend.load_op``); the
        blobs are stashed for ``values``."""
        target = "page" if before is None else "page_before"
        params = {"before": before, "n": limit}
        op = self.backend.load_op(thread_id, ns, target, params, self._versions_of)
        try:
            batch = next(op)
            while True:
                batch = op.send(self._run(*batch.stmts))
        except StopIteration as stop:
            stored, rows, check = stop.value
        self._stash = (rows, check)
        return stored  # type: ignore[no-any-return]

    def _versions_of(self, row: CheckpointRow) -> dict[str, str] | None:
        return body_versions(row.body, row.checkpoint_id, self.backend.codec)

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """The blob rows the last ``page`` came with: its one statement read every row its
        checkpoints' values need (rows it missed are not stored in that snapshot)."""
        assert self._stash is not None, "values are read with a page"
        return self._stash

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        keys, versions = [k for k, _ in pairs], [v for _, v in pairs]
        rows = self._rows("blob_meta", thread=thread_id, ns=ns, keys=keys, versions=versions)
        return {(r[0], r[1]): blob_row(r) for r in rows}

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        """Root heads, newest update first, a page a statement; status is worked out here."""
        found: list[ThreadRow] = []
        params: dict[str, Any] = {}
        name = "threads"
        while limit is None or len(found) < limit:
            n = _THREADS_PAGE if limit is None or status is not None else limit - len(found)
            params["n"] = n
            rows = self._rows(name, **params)
            for thread_id, head, updated_at, body, task_ids, kinds, next_ in rows:
                state = status_of(next_, zip(task_ids, kinds, strict=True))
                if status is None or state == status:
                    at = updated_at.astimezone(UTC).isoformat(timespec="microseconds")
                    found.append(ThreadRow(thread_id, state, head, at, body))
            if len(rows) < n:
                break
            name, params["at"], params["tid"] = "threads_after", rows[-1][2], rows[-1][0]
        return found if limit is None else found[:limit]


def _batch(stmts: list[Stmt]) -> Op[list[Result]]:
    results = yield Batch(stmts)
    return results
