"""``FilesBackend``: the backend protocol (``checkpoint.backend``) over plain files.

A write transaction (``transaction.FilesTransaction``) locks each thread when a call first
names it (``flock`` on the thread's ``.lock``, exclusive, so compare-and-set works across
processes) and unlocks them when it ends. A page of history holds the lock shared, so its rows
and the values they name are read as of one moment. A load takes no lock: every file appears
whole, by a rename, so it only has to notice a checkpoint pruned or deleted under it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Collection, Iterator
from contextlib import contextmanager

from threadline.checkpoint.backend import Loaded, VersionsOf
from threadline.checkpoint.chains import HeldChains, HoldsChains
from threadline.checkpoint.files import disk
from threadline.checkpoint.files.rows import read_blob, read_row
from threadline.checkpoint.files.transaction import FilesTransaction
from threadline.checkpoint.layout import REPLACE, BlobRow, missing_rows
from threadline.checkpoint.transactional import Transactional
from threadline.errors import SerializationError
from threadline.serde import Serializer


class FilesBackend(HoldsChains, Transactional):
    """Rows as files under ``directory/threads`` (docs/storage.md shows the layout)."""

    compaction = REPLACE
    in_process = False

    def __init__(self, directory: str, codec: Serializer, previews: bool) -> None:
        self.directory = directory
        self.threads_dir = os.path.join(directory, "threads")
        self.codec = codec
        # Readable copies of values and metadata would undo encryption at rest: none then.
        self.encrypted = codec.key_id is not None
        self.previews = previews and not self.encrypted
        self.chains = HeldChains(codec=codec)  # long delta chains, joined and decoded
        self._guard = threading.Lock()  # guards the two caches below
        self._swept: set[str] = set()  # namespace folders this process swept after crashes
        self._created: dict[str, str] = {}  # row path -> created_at (a row never changes)

    def thread_dir(self, thread_id: str) -> str:
        return os.path.join(self.threads_dir, "t-" + disk.encode_name(thread_id))

    def ns_dir(self, thread_id: str, ns: str) -> str:
        return disk.ns_dir(self.thread_dir(thread_id), ns)

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own files."""

    @contextmanager
    def transaction(self, write: bool) -> Iterator[FilesTransaction]:
        """A write transaction's row file lands when it ends without an error."""
        tx = FilesTransaction(self, write)
        try:
            yield tx
            tx.land()
        finally:
            tx.release()
        for action in tx.committed:
            action()

    def load(
        self, thread_id: str, ns: str, checkpoint_id: str | None, versions_of: VersionsOf
    ) -> Loaded | None:
        """``Transactional.load`` without a lock: a checkpoint whose values went while it was
        read (pruned or deleted meanwhile: its row file is gone) is not stored, and the newest
        is read again."""
        for _ in range(5):
            loaded = super().load(thread_id, ns, checkpoint_id, versions_of)
            if loaded is None:
                return None
            row = loaded[0].row
            versions = versions_of(row)
            if not versions or not missing_rows(versions, loaded[1]):
                return loaded
            if os.path.exists(disk.row_path(self.ns_dir(thread_id, ns), row.checkpoint_id)):
                return loaded
            if checkpoint_id is not None:
                return None
        return None

    def blob(self, thread_id: str, ns: str, key: str, version: str) -> BlobRow | None:
        return read_blob(self.ns_dir(thread_id, ns), key, version, data=False)

    # -- for transactions ----------------------------------------------------------------------

    def sweep_once(self, ns_dir: str) -> None:
        """Sweep a namespace the first time this process writes it (under the thread lock)."""
        with self._guard:
            first = ns_dir not in self._swept
            self._swept.add(ns_dir)
        if first:
            disk.sweep(ns_dir)

    def created_at(self, thread_id: str, path: str, checkpoint_id: str) -> str:
        """A row's ``created_at``, remembered (retention asks at every put)."""
        with self._guard:
            found = self._created.get(path)
        if found is not None:
            return found
        try:
            row = read_row(thread_id, path, checkpoint_id)
        except SerializationError:
            return ""  # no age: retention by age keeps it
        found = row.created_at if row is not None else ""
        with self._guard:
            if len(self._created) > 100_000:
                self._created.clear()
            self._created[path] = found
        return found

    def forget_rows(self, paths: Collection[str]) -> None:
        with self._guard:
            for path in paths:
                self._created.pop(path, None)

    def forget(self, thread_id: str | None = None) -> None:
        """Also the rows remembered of the thread's folder (deleted or copied over), or all."""
        super().forget(thread_id)
        inside = "" if thread_id is None else self.thread_dir(thread_id) + os.sep
        with self._guard:
            for path in [p for p in self._created if p.startswith(inside)]:
                del self._created[path]
