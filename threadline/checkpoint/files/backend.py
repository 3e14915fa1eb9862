"""``FilesBackend`` and its ``FilesTransaction``: the backend protocol (``checkpoint.backend``)
over plain files.

A write transaction locks a thread when a call first names it (``flock`` on the thread's
``.lock``, exclusive, so compare-and-set works across processes) and keeps the lock to its end;
a page of history holds it shared, so its rows and the values they name are read as of one
moment. A load takes no lock: every file appears whole, by a rename, so it only has to notice a
checkpoint pruned or deleted under it. A put (``insert``) writes its blobs, then the prefix rows
that replace older ones (once the new full blob they point at is durable), its preview and
``HEAD``; its pending writes follow (``add_writes``), and its row file **last** (``land``, at the
next call or the end): a crash before leaves the previous checkpoint the newest, and the next
writer sweeps up the files of the unfinished one.
"""

from __future__ import annotations

import os
import secrets
import shutil
import threading
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime

from threadline.checkpoint.backend import (
    Check,
    Loaded,
    Pair,
    StoredCheckpoint,
    ThreadRow,
    VersionsOf,
)
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bodies import body_next
from threadline.checkpoint.chains import HeldChains, HoldsChains
from threadline.checkpoint.files import disk, rows
from threadline.checkpoint.files.disk import ROOT_NS_DIR, TMP, TRASH, all_names, remove_file
from threadline.checkpoint.files.preview import write_preview
from threadline.checkpoint.layout import REPLACE, BlobRow, CheckpointRow, WriteRow, missing_rows
from threadline.checkpoint.rules import now_iso, status_of
from threadline.checkpoint.transactional import Transactional
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import Serializer


class FilesBackend(HoldsChains, Transactional):
    """Rows as files under ``directory/threads`` (docs/storage.md shows the layout)."""

    compaction = REPLACE
    in_process = False
    sealed = False  # each file keeps a CRC-32 of its own

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
        return rows.read_blob(self.ns_dir(thread_id, ns), key, version, data=False)

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
            row = rows.read_row(thread_id, path, checkpoint_id)
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


class FilesTransaction:
    """Reads and writes of one transaction of a ``FilesBackend``."""

    def __init__(self, backend: FilesBackend, write: bool) -> None:
        self.backend = backend
        self.write = write
        self.committed: list[Callable[[], None]] = []  # cache updates, once it ends well
        self._locks: dict[str, int] = {}  # thread folder -> its locked .lock
        self._fresh: set[str] = set()  # thread folders made just to lock them
        self._wrote = False
        self._staged: tuple[str, str, bytes] | None = None  # (ns folder, id, row file)
        self._landed: tuple[str, str] | None = None  # (ns folder, id) of the row it landed

    def _thread(self, thread_id: str, *, shared: bool = False, land: bool = True) -> str:
        """The thread's folder, after landing the staged row (``land``): every call but
        ``add_writes`` for the staged checkpoint itself comes after it. A write transaction
        locks the folder when a call first names it; a read transaction that pages history
        holds it ``shared`` to its end, so no prune deletes a checkpoint of the page, or its
        values, before they are read."""
        if land:
            self.land()
        thread_dir = self.backend.thread_dir(thread_id)
        if thread_dir in self._locks or not (self.write or shared):
            return thread_dir
        if self.write:
            existed = os.path.isdir(thread_dir)
            self._locks[thread_dir] = disk.lock(thread_dir)
            if not existed:
                self._fresh.add(thread_dir)
        elif (fd := disk.share(thread_dir)) is not None:
            self._locks[thread_dir] = fd
        return thread_dir

    def _ns(self, thread_id: str, ns: str, *, land: bool = True) -> str:
        return disk.ns_dir(self._thread(thread_id, land=land), ns)

    def land(self) -> None:
        """Write the row file of the put this transaction made: the checkpoint exists now."""
        if self._staged is None:
            return
        ns_dir, cid, data = self._staged
        self._staged = None
        self._landed = (ns_dir, cid)
        disk.fsync_dir(ns_dir)  # HEAD's rename, before the row: a row never outlives it
        disk.write_file(disk.row_path(ns_dir, cid), data)

    def release(self) -> None:
        """Unlock; a thread folder made only to lock it goes again."""
        for thread_dir, fd in self._locks.items():
            bare = thread_dir in self._fresh and not self._wrote
            if bare and all_names(thread_dir) == [".lock"]:
                with suppress(OSError):  # another process's files arrived meanwhile
                    remove_file(os.path.join(thread_dir, ".lock"))
                    os.rmdir(thread_dir)
            os.close(fd)
        self._locks.clear()

    # -- reads ---------------------------------------------------------------------------------

    def head(self, thread_id: str, ns: str) -> str | None:
        ns_dir = self._ns(thread_id, ns)
        found, agreed = disk.newest(ns_dir)
        if self.write and os.path.isdir(ns_dir):
            if not agreed:
                disk.sweep(ns_dir)  # HEAD names a missing row: a put crashed here
            self.backend.sweep_once(ns_dir)
        return found

    def status(self, thread_id: str) -> ThreadStatus | None:
        """The status ``thread.json`` records if it names the root's newest checkpoint, else
        ``None``: a put that lands a new head then rewrites it, so it is stale only after a
        crash (``list_threads`` then recomputes it)."""
        thread_dir = self._thread(thread_id)
        doc = rows.read_thread_doc(thread_dir)
        if doc is None or doc["head"] != disk.head(os.path.join(thread_dir, ROOT_NS_DIR)):
            return None
        return doc["status"]  # type: ignore[no-any-return]

    def checkpoint(
        self, thread_id: str, ns: str, checkpoint_id: str | None
    ) -> StoredCheckpoint | None:
        ns_dir = self._ns(thread_id, ns)
        cid = checkpoint_id if checkpoint_id is not None else disk.head(ns_dir)
        if cid is None:
            return None
        return self._stored(thread_id, ns_dir, cid, disk.row_path(ns_dir, cid))

    def _stored(self, thread_id: str, ns_dir: str, cid: str, path: str) -> StoredCheckpoint | None:
        row = rows.read_row(thread_id, path, cid)
        if row is None:
            return None
        return StoredCheckpoint(row, tuple(rows.read_writes(ns_dir, cid)))

    def page(
        self, thread_id: str, ns: str, before: str | None, limit: int
    ) -> list[StoredCheckpoint]:
        ns_dir = disk.ns_dir(self._thread(thread_id, shared=True), ns)
        paths = disk.row_ids(ns_dir)
        out: list[StoredCheckpoint] = []
        for cid in sorted(paths, reverse=True):
            if before is not None and cid >= before:
                continue
            stored = self._stored(thread_id, ns_dir, cid, paths[cid])
            if stored is not None:
                out.append(stored)
                if len(out) >= limit:
                    break
        return out

    def values(
        self, thread_id: str, ns: str, wanted: Sequence[Mapping[str, str]]
    ) -> tuple[dict[Pair, BlobRow], Check | None]:
        """Each value's rows, following ``base`` to a full blob (a file missing ends the walk;
        ``layout`` names it). Every file is checked as it is read: no ``Check``.

        The walk stops early at the tip of a chain ``chains`` holds whose file still records
        the CRC-32 held: the rows below come from the process, so a long conversation reads
        one header line instead of its whole chain. A compaction racing this read can turn a
        row of the walk into a prefix row: either form holds the same value.
        """
        ns_dir = self._ns(thread_id, ns)
        chains = self.backend.chains
        tips = chains.tips(thread_id, ns)
        pool: dict[Pair, BlobRow] = {}
        for versions in wanted:
            for key, version in versions.items():
                ref: str | None = version
                while ref is not None and (key, ref) not in pool:  # a loop ends at a seen row
                    crc = rows.recorded_crc(ns_dir, key, ref) if (key, ref) in tips else None
                    if crc is not None:  # a chain whose tip records other bytes is let go
                        below = chains.rows_below(thread_id, ns, {(key, ref): crc})
                        if (key, ref) in below:
                            pool.update(below)
                            break
                    row = rows.read_blob(ns_dir, key, ref)
                    if row is None:
                        break
                    pool[(key, ref)] = row
                    ref = row.base
        return pool, None

    def blob_meta(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> dict[Pair, BlobRow]:
        ns_dir = self._ns(thread_id, ns)
        found = {pair: rows.read_blob(ns_dir, *pair, data=False) for pair in pairs}
        return {pair: row for pair, row in found.items() if row is not None}

    def all_blob_meta(self, thread_id: str, ns: str) -> dict[Pair, BlobRow]:
        """Unreadable headers are left out (so their files are left be)."""
        folder = os.path.join(self._ns(thread_id, ns), "blobs")
        out: dict[Pair, BlobRow] = {}
        for name in disk.visible_names(folder):
            try:
                row = rows.blob_row(rows.blob_header(os.path.join(folder, name)), b"")
            except (OSError, ValueError, KeyError, TypeError):
                continue
            out[(row.key, row.version)] = row
        return out

    def ids(self, thread_id: str, ns: str) -> list[tuple[str, str]]:
        paths = disk.row_ids(self._ns(thread_id, ns))
        at = self.backend.created_at
        return [(cid, at(thread_id, paths[cid], cid)) for cid in sorted(paths, reverse=True)]

    def bodies(self, thread_id: str, ns: str) -> list[tuple[str, bytes]]:
        """An unreadable row gives an empty body: pruning then keeps every blob."""
        out: list[tuple[str, bytes]] = []
        for cid, path in disk.row_ids(self._ns(thread_id, ns)).items():
            try:
                row = rows.read_row(thread_id, path, cid)
            except SerializationError:
                row = CheckpointRow(cid, None, 0, "", b"", b"")
            if row is not None:
                out.append((cid, row.body))
        return out

    def namespaces(self, thread_id: str) -> list[str]:
        found = disk.namespaces(self._thread(thread_id))
        return sorted(ns for ns, ns_dir in found.items() if disk.head(ns_dir) is not None)

    def threads(self, status: ThreadStatus | None, limit: int | None) -> list[ThreadRow]:
        found: list[ThreadRow] = []
        for name in disk.visible_names(self.backend.threads_dir):
            if name.startswith("t-"):
                row = self._thread_row(os.path.join(self.backend.threads_dir, name))
                if row is not None and (status is None or row.status == status):
                    found.append(row)
        found.sort(key=lambda r: (r.updated_at, r.thread_id), reverse=True)
        return found if limit is None else found[:limit]

    def _thread_row(self, thread_dir: str) -> ThreadRow | None:
        """From ``thread.json``, or made again from the head if it is missing or stale (a crash
        between the row and it). ``None``: no root checkpoint, or an unreadable one."""
        root = os.path.join(thread_dir, ROOT_NS_DIR)
        head = disk.head(root)
        if head is None:
            return None
        try:
            info = disk.read_json(os.path.join(root, "namespace.json"))
            row = rows.read_row(info["thread_id"], disk.row_path(root, head), head)
            if row is None:
                return None
            doc = rows.read_thread_doc(thread_dir)
            if doc is not None and doc["head"] == head:
                at = max(doc["updated_at"], row.created_at)
                return ThreadRow(doc["thread_id"], doc["status"], head, at, row.body)
            names = body_next(row.body, self.backend.codec)
            keys = [(w.task_id, w.kind) for w in rows.read_writes(root, head, data=False)]
            mtime = os.stat(disk.row_path(root, head)).st_mtime
            at = datetime.fromtimestamp(mtime, UTC).isoformat()
            return ThreadRow(info["thread_id"], status_of(names, keys), head, at, row.body)
        except CorruptedDataError:
            return rows.damaged_head(thread_dir, head)
        except (OSError, ValueError, KeyError, TypeError, SerializationError):
            return None

    # -- writes --------------------------------------------------------------------------------

    def insert(
        self,
        thread_id: str,
        ns: str,
        row: CheckpointRow,
        blobs: Sequence[BlobRow],
        prefixes: Sequence[BlobRow],
    ) -> None:
        backend = self.backend
        ns_dir = self._ns(thread_id, ns)
        data = rows.row_file(row, backend.codec, backend.encrypted)
        self._init(ns_dir, thread_id, ns)
        cid = row.checkpoint_id
        shutil.rmtree(disk.writes_dir(ns_dir, cid), ignore_errors=True)  # a crashed put's
        texts = {b.key: rows.json_text(b.data) for b in blobs} if backend.previews else {}
        rows.store_blobs(ns_dir, blobs, prefixes, texts)
        if backend.previews:
            write_preview(ns_dir, row, blobs, texts, backend.codec)
        # A hint (``disk.newest``): its rename is made durable before the row's (``land``); its
        # bytes need not be, as a garbled HEAD reads as none and the rows are scanned instead.
        disk.write_json(os.path.join(ns_dir, "HEAD"), {"checkpoint_id": cid}, durable=False)
        self._staged = (ns_dir, cid, data)
        chains = backend.chains
        self.committed.append(lambda: chains.stored(thread_id, ns, blobs))

    def _init(self, ns_dir: str, thread_id: str, ns: str) -> None:
        """Before a write: create a namespace's folders on first use, and sweep up after
        crashes the first time this process writes there."""
        if not os.path.exists(os.path.join(ns_dir, "namespace.json")):
            for sub in disk.SUBFOLDERS:
                disk.make_dirs(os.path.join(ns_dir, sub))
            info = {"thread_id": thread_id, "checkpoint_ns": ns}
            disk.write_json(os.path.join(ns_dir, "namespace.json"), info)
        self.backend.sweep_once(ns_dir)
        self._wrote = True

    def add_writes(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        ns_dir = self._ns(thread_id, ns, land=False)
        if self._staged is not None and self._staged[:2] != (ns_dir, checkpoint_id):
            self.land()
        self._init(ns_dir, thread_id, ns)
        backend = self.backend
        formats = (backend.encrypted, backend.previews)
        rows.store_writes(ns_dir, checkpoint_id, writes, backend.codec, formats)

    def set_thread(
        self, thread_id: str, status: ThreadStatus, head: str, next_names: Sequence[str]
    ) -> None:
        self._wrote = True
        doc = {
            "thread_id": thread_id,
            "status": status,
            "head": head,
            "updated_at": now_iso(),
            "next": list(next_names),
        }
        # Naming the row this transaction landed, it need not survive a power failure: lost,
        # stale or garbled, it no longer names the head, and is made again from the head's row.
        # (One rewritten after a write on an existing head must: a stale copy would still match.)
        path = os.path.join(self._thread(thread_id), "thread.json")  # lands the staged row
        fresh = self._landed == (self.backend.ns_dir(thread_id, ""), head)
        disk.write_json(path, doc, durable=not fresh)

    def delete(self, thread_id: str, ns: str, ids: Collection[str]) -> None:
        """Rows first (the checkpoints are gone at once), then their writes and previews."""
        self._wrote = True
        ns_dir = self._ns(thread_id, ns)
        paths = [disk.row_path(ns_dir, cid) for cid in ids]
        for path in paths:
            remove_file(path)
        disk.fsync_dir(os.path.join(ns_dir, "checkpoints"))
        self.backend.forget_rows(paths)
        for cid in ids:
            shutil.rmtree(disk.writes_dir(ns_dir, cid), ignore_errors=True)
            remove_file(disk.preview_path(ns_dir, cid))
        if disk.head(ns_dir) is None:
            remove_file(os.path.join(ns_dir, "HEAD"))
            if ns == "":
                remove_file(os.path.join(self._thread(thread_id), "thread.json"))

    def delete_blobs(self, thread_id: str, ns: str, pairs: Collection[Pair]) -> None:
        ns_dir = self._ns(thread_id, ns)
        for key, version in pairs:
            remove_file(disk.blob_path(ns_dir, key, version))

    def delete_thread(self, thread_id: str) -> None:
        """The folder is renamed away (the thread disappears at once, as a whole), then
        removed once the transaction ends."""
        if not os.path.isdir(self.backend.thread_dir(thread_id)):
            return
        thread_dir = self._thread(thread_id)
        self._wrote = True
        trash = os.path.join(self.backend.directory, f"{TRASH}{secrets.token_hex(8)}")
        os.rename(thread_dir, trash)
        disk.fsync_dir(self.backend.threads_dir)
        self.committed.append(lambda: self.backend.forget(thread_id))
        self.committed.append(lambda: shutil.rmtree(trash, ignore_errors=True))

    def copy_thread(self, source: str, target: str) -> None:
        """Hard-links every file of each namespace into a staging folder renamed into place,
        the root namespace last: an interrupted copy never shows in ``list_threads``."""
        self._wrote = True
        source_dir, target_dir = self._thread(source), self._thread(target)
        for name in all_names(target_dir):  # leftovers that hold no checkpoint
            path = os.path.join(target_dir, name)
            if name == ROOT_NS_DIR or name.startswith(("ns-", TMP)):
                shutil.rmtree(path, ignore_errors=True)
        self.committed.append(lambda: self.backend.forget(target))
        found = sorted(disk.namespaces(source_dir).items(), key=lambda item: item[0] == "")
        for ns, ns_dir in found:
            stage = os.path.join(target_dir, f"{TMP}ns-{secrets.token_hex(6)}")
            for sub in disk.SUBFOLDERS:
                os.makedirs(os.path.join(stage, sub))
            for sub in ("checkpoints", "values", "blobs"):
                disk.link_all(os.path.join(ns_dir, sub), os.path.join(stage, sub))
            for cid_dir in disk.visible_names(os.path.join(ns_dir, "writes")):
                os.mkdir(os.path.join(stage, "writes", cid_dir))
                disk.link_all(*(os.path.join(d, "writes", cid_dir) for d in (ns_dir, stage)))
            disk.fsync_dir(os.path.join(stage, "writes"))
            head = disk.head(ns_dir)
            if head is not None:
                disk.write_json(os.path.join(stage, "HEAD"), {"checkpoint_id": head})
            info = {"thread_id": target, "checkpoint_ns": ns}
            disk.write_json(os.path.join(stage, "namespace.json"), info)
            os.rename(stage, disk.ns_dir(target_dir, ns))
        disk.fsync_dir(target_dir)
        row = self._thread_row(source_dir)
        if row is not None:
            names = body_next(row.body, self.backend.codec)
            self.set_thread(target, row.status, row.head, names)
