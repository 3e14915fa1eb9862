"""A sixth backend, written only against ``threadline.checkpoint.backend``: four dicts of rows.

Each table is a dict keyed by its primary key, as a database would keep it. A write
transaction works on copies of the tables and swaps them in when it ends without an error, so
a failed put leaves nothing behind (a real rollback). It is
in the conformance suite (``factories.py``) to show that the protocol and its docstrings are
enough to write a backend.
"""

from __future__ import annotations

import threading
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from threadline.checkpoint.backend import Pair, StoredCheckpoint, ThreadRow
from threadline.checkpoint.base import Retention, ThreadStatus
from threadline.checkpoint.core import CoreSaver
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow
from threadline.checkpoint.rules import now_iso
from threadline.checkpoint.transactional import Transactional
from threadline.serde import Serializer

Tables = dict[str, dict[tuple[Any, ...], Any]]


class DictRowsBackend(Transactional):
    """Tables ``checkpoints`` (thread, ns, id), ``blobs`` (thread, ns, key, version), ``writes``
    (thread, ns, id, task_id, kind) -> (seq, row), ``threads`` (thread,) -> (status, time)."""

    compaction = REPLACE
    in_process = True
    sealed = False

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tables: Tables = {"checkpoints": {}, "blobs": {}, "writes": {}, "threads": {}}
        self._seq = 0

    @contextmanager
    def transaction(self, write: bool) -> Iterator[_Tx]:
        with self._lock:
            tables = {name: dict(rows) for name, rows in self._tables.items()} if write else None
            tx = _Tx(self, tables or self._tables)
            yield tx
            if tables is not None:
                self._tables = tables

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        with self._lock:
            row: BlobRow | None = self._tables["blobs"].get((thread_id, ns, key, version))
            return row

    def close(self) -> None:
        """Nothing to release."""

    def next_seq(self) -> int:
        self._seq += 1
        return self._seq


class _Tx:
    def __init__(self, backend: DictRowsBackend, tables: Tables) -> None:
        self.backend = backend
        self.cps = tables["checkpoints"]
        self.blobs = tables["blobs"]
        self.writes = tables["writes"]
        self.thread_rows = tables["threads"]

    # -- reads ---------------------------------------------------------------------------------
    def _ids(self, thread_id: str, ns: str) -> list[str]:
        return sorted((k[2] for k in self.cps if k[:2] == (thread_id, ns)), reverse=True)

    def head(self, thread_id: str, ns: str) -> str | None:
        ids = self._ids(thread_id, ns)
        return ids[0] if ids else None

    def status(self, thread_id: str) -> ThreadStatus | None:
        row = self.thread_rows.get((thread_id,))
        return row[0] if row is not None else None

    def checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        checkpoint_id = checkpoint_id or self.head(thread_id, ns)
        row = self.cps.get((thread_id, ns, checkpoint_id))
        if row is None or checkpoint_id is None:
            return None
        mine = [v for k, v in self.writes.items() if k[:3] == (thread_id, ns, checkpoint_id)]
        writes = tuple(w for _, w in sorted(mine, key=lambda sw: sw[0]))
        return StoredCheckpoint(row, writes)

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        ids = [cid for cid in self._ids(thread_id, ns) if before is None or cid < before]
        found = [self.checkpoint(thread_id, ns, cid) for cid in ids[:limit]]
        return [stored for stored in found if stored is not None]

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], None]:
        found: dict[Pair, BlobRow] = {}
        for key, version in [pair for versions in wanted for pair in versions.items()]:
            ref: str | None = version
            while ref is not None and (row := self.blobs.get((thread_id, ns, key, ref))):
                found[(key, ref)] = row
                ref = row.base
        return found, None

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        rows = {kv: self.blobs.get((thread_id, ns, *kv)) for kv in pairs}
        return {kv: row.without_data() for kv, row in rows.items() if row is not None}

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        mine = [row for k, row in self.blobs.items() if k[:2] == (thread_id, ns)]
        return {(row.key, row.version): row.without_data() for row in mine}

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        return [
            (cid, self.cps[(thread_id, ns, cid)].created_at) for cid in self._ids(thread_id, ns)
        ]

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        return [(k[2], row.body) for k, row in self.cps.items() if k[:2] == (thread_id, ns)]

    def namespaces(self, thread_id: str) -> list[str]:
        return sorted({k[1] for k in self.cps if k[0] == thread_id})

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        rows = []
        for (thread_id,), (st, at) in self.thread_rows.items():
            head = self.checkpoint(thread_id, "", None)
            if head is not None and (status is None or st == status):
                at = max(at, head.row.created_at)
                rows.append(ThreadRow(thread_id, st, head.row.checkpoint_id, at, head.row.body))
        rows.sort(key=lambda r: (r.updated_at, r.thread_id), reverse=True)
        return rows[:limit] if limit is not None else rows

    # -- writes --------------------------------------------------------------------------------
    def insert(
        self,
        thread_id: str,
        ns: str,
        row: CheckpointRow,
        blobs: Sequence[BlobRow],
        prefixes: Sequence[BlobRow],
    ) -> None:
        self.cps[(thread_id, ns, row.checkpoint_id)] = row
        for b in blobs:
            self.blobs.setdefault((thread_id, ns, b.key, b.version), b)
        for p in prefixes:
            if (thread_id, ns, p.key, p.version) in self.blobs:
                self.blobs[(thread_id, ns, p.key, p.version)] = p

    def add_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        for w in writes:
            key = (thread_id, ns, checkpoint_id, w.task_id, w.kind)
            old = self.writes.get(key)
            self.writes[key] = (old[0] if old else self.backend.next_seq(), w)

    def set_thread(
        self, thread_id: str, status: ThreadStatus, head: str, next_names: Sequence[str]
    ) -> None:
        self.thread_rows[(thread_id,)] = (status, now_iso())

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        for cid in ids:
            self.cps.pop((thread_id, ns, cid), None)
            for key in [k for k in self.writes if k[:3] == (thread_id, ns, cid)]:
                del self.writes[key]
        if ns == "" and self.head(thread_id, "") is None:
            self.thread_rows.pop((thread_id,), None)

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        for kv in pairs:
            self.blobs.pop((thread_id, ns, *kv), None)

    def delete_thread(self, thread_id: str) -> None:
        for table in (self.cps, self.blobs, self.writes, self.thread_rows):
            for key in [k for k in table if k[0] == thread_id]:
                del table[key]

    def copy_thread(self, source: str, target: str) -> None:
        self.delete_thread(target)
        for table in (self.cps, self.blobs, self.writes):
            for key, row in [(k, r) for k, r in table.items() if k[0] == source]:
                table[(target, *key[1:])] = row
        if (source,) in self.thread_rows:
            self.thread_rows[(target,)] = (self.thread_rows[(source,)][0], now_iso())


class DictRowsSaver(CoreSaver):
    def __init__(
        self, *, retention: Retention | None = None, serde: Serializer | None = None
    ) -> None:
        super().__init__(DictRowsBackend(), retention=retention, serde=serde)
