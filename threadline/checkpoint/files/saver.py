"""``FileSaver``: the folder layout, locking, and the saver API over the files."""

from __future__ import annotations

import binascii
import dataclasses
import fcntl
import json
import os
import secrets
import shutil
import threading
import time
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from threadline.checkpoint.base import (
    BaseSaver,
    Checkpoint,
    CheckpointRecord,
    PlannedTask,
    Retention,
    TaskWrite,
    ThreadInfo,
    ThreadStatus,
    metadata_matches,
    thread_status,
)
from threadline.checkpoint.bodies import (
    blob_versions,
    decode_metadata,
    encode_body,
    encode_metadata,
    wanted_blobs,
)
from threadline.checkpoint.chains import HeldChains
from threadline.checkpoint.changes import hints_of
from threadline.checkpoint.files.disk import (
    ROOT_NS_DIR,
    TMP,
    TRASH,
    all_names,
    b64,
    decode_name,
    encode_name,
    fsync_dir,
    json_bytes,
    link_or_copy,
    make_dirs,
    remove_file,
    unb64,
    version_name,
    visible_names,
    write_file,
    write_key,
)
from threadline.checkpoint.files.preview import preview_changes, safe_render
from threadline.checkpoint.formats import migrations_from
from threadline.checkpoint.layout import (
    BlobRow,
    EncodedCheckpoint,
    Pool,
    WriteRow,
    checkpoint_values,
    decode_write,
    encode_record,
    encode_writes,
    full_blobs,
    referenced_blobs,
)
from threadline.checkpoint.rules import age_cutoff, check_keep_last, check_put, created_ts, now_iso
from threadline.errors import SaverUnavailableError, SerializationError
from threadline.serde import DEFAULT, Serializer
from threadline.serde import _format as fmt

__all__ = ["FORMAT_VERSION", "FileSaver"]

#: The folder format; ``MIGRATIONS[n]`` rewrites a folder of version ``n`` as ``n + 1`` (see
#: ``formats``; none yet).
FORMAT_VERSION = 1
MIGRATIONS: dict[int, Callable[[str], None]] = {}
_FORMAT_NAME = "threadline.files"


def _checksum(data: bytes) -> dict[str, int]:
    """The checksum a file keeps of its bytes: a CRC-32, as the other savers keep."""
    return {"crc32": zlib.crc32(data)}


def _checks(fields: Mapping[str, Any], data: bytes) -> bool:
    """Whether ``data`` matches the file's checksum."""
    return fields.get("crc32") == zlib.crc32(data)


@dataclasses.dataclass(frozen=True, slots=True)
class _Row:
    """A row file as loaded: the stored bytes and the fields kept in the clear."""

    checkpoint_id: str
    body: bytes
    metadata: bytes
    created_at: str


def _rebuilt(doc: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """The body and metadata bytes of a row, made again from its readable fields.

    A row file keeps its exact bytes (base64) only when this does not give them back: planned
    tasks with arguments, values JSON cannot show exactly (metadata, or inline ``values`` such
    as bytes or NaN), a codec that compresses or seals. Always encoded with the plain default
    codec, so any saver rebuilds the same bytes; the row's checksum says whether they are
    right. ``values`` (the small scalars the body holds) is absent in rows without any.
    """
    try:
        inline = doc.get("values")
        if inline is not None and type(inline) is not dict:
            return None
        cp = Checkpoint(
            doc["checkpoint_id"],
            doc["parent_id"],
            doc["step"],
            {},
            doc["versions"],
            tuple(PlannedTask(name) for name in doc["next"]),
            doc["created_at"],
            {key: tuple(names) for key, names in doc["barriers"].items()},
            tuple(doc["updated_by"]),
        )
        return encode_body(cp, DEFAULT, inline), encode_metadata(doc["metadata"], cp.id)
    except (KeyError, TypeError, AttributeError, ValueError, SerializationError):
        return None


def _json_text(data: bytes) -> bytes | None:
    """The value of plain blob bytes as JSON text, if that text encodes back to those bytes
    (with the plain default codec, as any saver reading it would); None otherwise."""
    if data[:2] != fmt.PLAIN_HEADER:
        return None
    try:
        text = json.dumps(DEFAULT.loads(data), ensure_ascii=False, allow_nan=False)
        return text.encode() if DEFAULT.dumps(json.loads(text)) == data else None
    except (TypeError, ValueError, RecursionError, SerializationError):
        return None


def _shown(inline: Mapping[str, Any]) -> dict[str, Any]:
    """The inline values of a row as its ``values`` field: as they are where JSON shows them
    exactly (numbers, booleans, None, text), else a rendering (``"<3 bytes>"``, ``"nan"``) that
    ``_rebuilt`` does not turn back into the body, so the row keeps its bytes too."""
    return {key: safe_render(value) for key, value in inline.items()}


def _blob_file(blob: BlobRow, text: bytes | None = None) -> bytes:
    """A blob file: one JSON line with the row's fields, size and SHA-256, then the bytes, or
    (``"json": true``) the value as JSON text that encodes back to them (``_json_text``).

    A prefix row is the header line alone (``base`` names the version it is a prefix of).
    """
    header = {
        "key": blob.key,
        "version": blob.version,
        "start": blob.start,
        "base": blob.base,
        "chain_bytes": blob.chain_bytes,
        "full_bytes": blob.full_bytes,
        "items": blob.items,
        "size": len(blob.data),
        **_checksum(blob.data),
    }
    if text is not None:
        header["json"] = True
    line = json.dumps(header, ensure_ascii=True).encode("ascii")
    return line + b"\n" + (blob.data if text is None else text)


def _blob_row(header: dict[str, Any], data: bytes) -> BlobRow:
    """The row a blob file's header describes; ``items`` is absent in files written before
    list lengths were kept (such rows are never compacted into prefix rows)."""
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    items = header.get("items")
    return BlobRow(
        key=header["key"],
        version=header["version"],
        start=header["start"],
        base=header["base"],
        chain_bytes=int(header["chain_bytes"]),
        full_bytes=int(header["full_bytes"]),
        data=data,
        items=int(items) if items is not None else None,
    )


class FileSaver(BaseSaver):
    """Checkpoints as plain files under ``directory`` (created if missing); see the module doc.

    Several savers, threads and processes may share one directory. ``retention`` prunes each
    (thread, namespace) on save. ``close()`` is a no-op (nothing stays open), so the saver works
    as a context manager and can be used again afterwards.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        retention: Retention | None = None,
        previews: bool = True,
        serde: Serializer | None = None,
    ) -> None:
        self.directory = os.path.abspath(os.fspath(directory))
        self.retention = retention
        self.serde = serde or DEFAULT
        # Readable copies of values and metadata would undo encryption at rest: none then.
        self._encrypted = self.serde.key_id is not None
        self.previews = previews and not self._encrypted
        self._threads = os.path.join(self.directory, "threads")
        self._swept: set[str] = set()
        self._swept_lock = threading.Lock()  # guards the two caches below
        self._created: dict[str, tuple[int, float | None]] = {}  # row path -> (inode, created)
        self._chains = HeldChains(codec=self.serde)  # long delta chains, joined and decoded
        try:
            make_dirs(self._threads)
            self._check_format()
        except SaverUnavailableError:
            raise
        except OSError as exc:
            raise SaverUnavailableError(
                f"cannot open checkpoint directory {self.directory!r}: {exc}"
            ) from exc
        self._empty_trash()

    def __repr__(self) -> str:
        return f"FileSaver({self.directory!r})"

    def close(self) -> None:
        """Nothing to release: every call opens and closes its own files."""

    def _check_format(self) -> None:
        path = os.path.join(self.directory, "FORMAT.json")
        try:
            with open(path, "rb") as f:
                found = json.loads(f.read())
        except FileNotFoundError:
            marker = {"format": _FORMAT_NAME, "version": FORMAT_VERSION}
            tmp = os.path.join(self.directory, f"{TMP}{os.getpid()}-{secrets.token_hex(6)}")
            with open(tmp, "wb") as f:
                f.write(json_bytes(marker))
                f.flush()
                os.fsync(f.fileno())
            try:
                os.link(tmp, path)  # never replaces a marker another process just wrote
            except FileExistsError:
                pass
            finally:
                os.unlink(tmp)
            fsync_dir(self.directory)
            return
        except ValueError as exc:
            raise SaverUnavailableError(
                f"checkpoint directory {self.directory!r}: FORMAT.json is unreadable ({exc})"
            ) from exc
        if not isinstance(found, dict) or found.get("format") != _FORMAT_NAME:
            raise SaverUnavailableError(
                f"{self.directory!r} is not a threadline checkpoint directory (FORMAT.json)"
            )
        version = found.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise SaverUnavailableError(
                f"checkpoint directory {self.directory!r} has format version {version!r}, newer "
                f"than this threadline understands ({FORMAT_VERSION}); upgrade threadline"
            )
        where = f"checkpoint directory {self.directory!r}"
        steps = migrations_from(version, FORMAT_VERSION, MIGRATIONS, where)
        for migrate in steps:
            migrate(self.directory)
        if steps:
            marker = {"format": _FORMAT_NAME, "version": FORMAT_VERSION}
            write_file(os.path.join(self.directory, "FORMAT.json"), json_bytes(marker))

    def _empty_trash(self) -> None:
        """Finish deletions a crash interrupted, and drop stale temp files at the top."""
        for entry in os.scandir(self.directory):
            if entry.name.startswith(TRASH):
                shutil.rmtree(entry.path, ignore_errors=True)
            elif entry.name.startswith(TMP):
                with suppress(OSError):
                    if time.time() - entry.stat().st_mtime > 3600:
                        os.unlink(entry.path)

    # -- paths ---------------------------------------------------------------------------------

    def _thread_dir(self, thread_id: str) -> str:
        return os.path.join(self._threads, "t-" + encode_name(thread_id))

    @staticmethod
    def _ns_dir(thread_dir: str, checkpoint_ns: str) -> str:
        name = ROOT_NS_DIR if checkpoint_ns == "" else "ns-" + encode_name(checkpoint_ns)
        return os.path.join(thread_dir, name)

    def _dirs(self, thread_id: str, checkpoint_ns: str) -> tuple[str, str]:
        thread_dir = self._thread_dir(thread_id)
        return thread_dir, self._ns_dir(thread_dir, checkpoint_ns)

    @staticmethod
    def _row_path(ns_dir: str, checkpoint_id: str) -> str:
        return os.path.join(ns_dir, "checkpoints", encode_name(checkpoint_id) + ".json")

    @staticmethod
    def _preview_path(ns_dir: str, checkpoint_id: str) -> str:
        return os.path.join(ns_dir, "values", encode_name(checkpoint_id) + ".json")

    @staticmethod
    def _writes_dir(ns_dir: str, checkpoint_id: str) -> str:
        return os.path.join(ns_dir, "writes", encode_name(checkpoint_id))

    @staticmethod
    def _blob_path(ns_dir: str, key: str, version: Any) -> str:
        name = f"{encode_name(key, 100)}@{version_name(version)}.blob"
        return os.path.join(ns_dir, "blobs", name)

    # -- locks ---------------------------------------------------------------------------------

    @staticmethod
    def _acquire(path: str, *, shared: bool, create: bool) -> int | None:
        """flock ``path``; ``None`` if it does not exist and ``create`` is false.

        A lock file can be removed (with its folder) by ``delete_thread`` while we wait for it,
        so after locking we check that the path still names the file we locked, and retry if
        not.
        """
        flags = os.O_RDWR | os.O_CLOEXEC | (os.O_CREAT if create else 0)
        while True:
            if create:
                make_dirs(os.path.dirname(path))
            try:
                fd = os.open(path, flags, 0o666)
            except FileNotFoundError:
                if create:
                    continue  # the folder vanished between mkdir and open: retry
                return None
            try:
                fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                held = os.fstat(fd)
                try:
                    now = os.stat(path)
                except FileNotFoundError:
                    now = None
                if now is not None and (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino):
                    return fd
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def _lock_thread(self, thread_dir: str, *, shared: bool, create: bool) -> int | None:
        """flock a thread's ``.lock``; ``None`` if the thread does not exist and not ``create``.

        flock grants shared locks while others hold theirs, so a steady stream of writers could
        starve ``delete_thread`` forever. Everyone therefore passes ``.gate`` (exclusive, held
        only while waiting for ``.lock``): once a deleter holds the gate, new writers queue
        behind it, and it waits only for the writers already in.
        """
        if not create and not os.path.isdir(thread_dir):
            return None
        gate = self._acquire(os.path.join(thread_dir, ".gate"), shared=False, create=True)
        assert gate is not None
        try:
            return self._acquire(os.path.join(thread_dir, ".lock"), shared=shared, create=True)
        finally:
            os.close(gate)

    @contextmanager
    def _writing(
        self, thread_id: str, checkpoint_ns: str, *, thread_locked: bool = False
    ) -> Iterator[str]:
        """Hold the thread lock (shared) and the namespace lock; yields the namespace folder.

        ``thread_locked``: the caller holds the thread lock already (re-taking it could
        deadlock against a waiting ``delete_thread``).
        """
        thread_dir, ns_dir = self._dirs(thread_id, checkpoint_ns)
        thread_fd = None
        if not thread_locked:
            thread_fd = self._lock_thread(thread_dir, shared=True, create=True)
            assert thread_fd is not None
        try:
            ns_fd = self._acquire(os.path.join(ns_dir, ".lock"), shared=False, create=True)
            assert ns_fd is not None
            try:
                self._init_ns(ns_dir, thread_id, checkpoint_ns)
                yield ns_dir
            finally:
                os.close(ns_fd)
        finally:
            if thread_fd is not None:
                os.close(thread_fd)

    @contextmanager
    def _exclusive(self, thread_id: str, *, create: bool) -> Iterator[str | None]:
        """Hold the thread lock exclusively; yields the thread folder (``None`` if absent)."""
        thread_dir = self._thread_dir(thread_id)
        fd = self._lock_thread(thread_dir, shared=False, create=create)
        if fd is None:
            yield None
            return
        try:
            yield thread_dir
        finally:
            os.close(fd)

    def _init_ns(self, ns_dir: str, thread_id: str, checkpoint_ns: str) -> None:
        """Create a namespace's folders on first use, and sweep up after crashes once."""
        if not os.path.exists(os.path.join(ns_dir, "namespace.json")):
            for sub in ("checkpoints", "values", "blobs", "writes"):
                make_dirs(os.path.join(ns_dir, sub))
            info = {"thread_id": thread_id, "checkpoint_ns": checkpoint_ns}
            write_file(os.path.join(ns_dir, "namespace.json"), json_bytes(info))
        with self._swept_lock:
            first = ns_dir not in self._swept
            self._swept.add(ns_dir)
        if first:
            self._sweep(ns_dir)

    def _sweep(self, ns_dir: str) -> None:
        """Remove stray temp files and files of checkpoints whose row never landed.

        Runs under the namespace lock, when no other writer can have files in flight there.
        """
        rows = {n[: -len(".json")] for n in visible_names(os.path.join(ns_dir, "checkpoints"))}
        for sub in ("", "checkpoints", "values", "blobs", "writes"):
            folder = os.path.join(ns_dir, sub)
            for name in all_names(folder):
                if name.startswith(TMP):
                    remove_file(os.path.join(folder, name))
        for name in visible_names(os.path.join(ns_dir, "values")):
            if name[: -len(".json")] not in rows:
                remove_file(os.path.join(ns_dir, "values", name))
        for name in visible_names(os.path.join(ns_dir, "writes")):
            path = os.path.join(ns_dir, "writes", name)
            if name not in rows:
                shutil.rmtree(path, ignore_errors=True)
            else:
                for tmp in all_names(path):
                    if tmp.startswith(TMP):
                        remove_file(os.path.join(path, tmp))
        if os.path.basename(ns_dir) == ROOT_NS_DIR:
            # thread.json is written under this lock; copies stage folders under the thread
            # lock held exclusively, and we hold it shared: whatever is here is stale.
            thread_dir = os.path.dirname(ns_dir)
            for name in all_names(thread_dir):
                path = os.path.join(thread_dir, name)
                if name.startswith(TMP) and os.path.isdir(path):
                    shutil.rmtree(path, ignore_errors=True)  # a copy's staging folder
                elif name.startswith(TMP):
                    remove_file(path)

    # -- heads ---------------------------------------------------------------------------------

    def _row_ids(self, ns_dir: str) -> dict[str, str]:
        """checkpoint id -> row file path, for every checkpoint of a namespace."""
        folder = os.path.join(ns_dir, "checkpoints")
        out: dict[str, str] = {}
        for name in visible_names(folder):
            if not name.endswith(".json"):
                continue
            path = os.path.join(folder, name)
            cid = decode_name(name[: -len(".json")])
            if cid is None:  # a hashed name: the id is inside
                try:
                    with open(path, "rb") as f:
                        cid = json.loads(f.read())["checkpoint_id"]
                except FileNotFoundError:
                    continue
                except (ValueError, KeyError, TypeError) as exc:
                    raise SerializationError(
                        f"checkpoint file {path!r} is corrupted ({exc}); move it away to "
                        "read the rest of the thread"
                    ) from exc
            out[cid] = path
        return out

    @staticmethod
    def _head_file(ns_dir: str) -> str | None:
        """What ``HEAD`` says (a hint: after a crash it can name a row that never landed)."""
        try:
            with open(os.path.join(ns_dir, "HEAD"), "rb") as f:
                cid = json.loads(f.read())["checkpoint_id"]
            return cid if isinstance(cid, str) else None
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def _head(self, ns_dir: str) -> str | None:
        """The newest checkpoint id of a namespace: ``HEAD`` if its row exists, else a scan."""
        cid = self._head_file(ns_dir)
        if cid is not None and os.path.exists(self._row_path(ns_dir, cid)):
            return cid
        ids = self._row_ids(ns_dir)
        return max(ids) if ids else None

    # -- reading files -------------------------------------------------------------------------

    def _read_row(self, thread_id: str, path: str, checkpoint_id: str) -> _Row | None:
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return None
        try:
            doc = json.loads(raw)
            stored = doc["stored"]
            if "body" in stored:
                body, metadata = unb64(stored["body"]), unb64(stored["metadata"])
            else:
                rebuilt = _rebuilt(doc)
                if rebuilt is None:
                    raise ValueError("its fields do not make a checkpoint")
                body, metadata = rebuilt
            if not _checks(stored, body + metadata):
                raise ValueError("checksum mismatch")
            if doc["checkpoint_id"] != checkpoint_id:
                raise ValueError(f"it holds checkpoint {doc['checkpoint_id']!r}")
            created_at = doc.get("created_at")
        except (ValueError, KeyError, TypeError, binascii.Error) as exc:
            raise SerializationError(
                f"checkpoint {checkpoint_id} of thread {thread_id!r} is corrupted: "
                f"{path!r} cannot be read ({exc})"
            ) from exc
        return _Row(
            checkpoint_id, body, metadata, created_at if isinstance(created_at, str) else ""
        )

    def _read_blob(
        self, ns_dir: str, key: str, version: Any, *, data: bool = True
    ) -> BlobRow | None:
        path = self._blob_path(ns_dir, key, version)
        try:
            with open(path, "rb") as f:
                header_line = f.readline()
                payload = f.read() if data else b""
        except FileNotFoundError:
            return None
        try:
            header = json.loads(header_line)
            if header["key"] != key or header["version"] != version:
                raise ValueError(f"it holds key {header['key']!r} version {header['version']!r}")
            if data:
                if header.get("json") is True:
                    payload = DEFAULT.dumps(json.loads(payload))
                if len(payload) != header["size"]:
                    raise ValueError(f"{len(payload)} bytes instead of {header['size']}")
                if not _checks(header, payload):
                    raise ValueError("checksum mismatch")
            return _blob_row(header, payload)
        except (ValueError, KeyError, TypeError, SerializationError) as exc:
            raise SerializationError(
                f"the stored value of key {key!r} (version {version}) is corrupted: "
                f"{path!r} cannot be read ({exc})"
            ) from exc

    def _pool(self, thread_id: str, ns: str, ns_dir: str, cp: Checkpoint) -> Pool:
        """The rows the blob-backed values of a decoded ``cp`` need.

        Reads each value's rows, following ``base`` to a full blob: down a delta chain, or from
        a prefix row up to the later version it is a prefix of (which may be a delta or a prefix
        row again). A file missing ends the walk; ``checkpoint_values`` names it. The walk stops
        early at the tip of a chain this saver holds whose file still records the CRC-32 held
        (``_recorded_crc``): the rows below come from ``self._chains``, so a long conversation
        reads one header line instead of its whole chain and full blob.

        A compaction racing this read can turn a row of the walk into a prefix row: either
        form of a version holds the same value, so the walk just goes on from what it finds.
        """
        tips = self._chains.tips(thread_id, ns)
        pool: dict[tuple[str, str], BlobRow] = {}
        for key, version in blob_versions(cp).items():
            ref: Any = version
            while ref is not None and (key, ref) not in pool:  # a loop ends at a seen row
                crc = self._recorded_crc(ns_dir, key, ref) if (key, ref) in tips else None
                if crc is not None:  # a chain whose tip records other bytes is let go
                    below = self._chains.rows_below(thread_id, ns, {(key, ref): crc})
                    if (key, ref) in below:  # else not the held bytes: read the files
                        pool.update(below)
                        break
                row = self._read_blob(ns_dir, key, ref)
                if row is None:
                    break
                pool[(key, ref)] = row
                ref = row.base
        return pool

    def _recorded_crc(self, ns_dir: str, key: str, version: str) -> int | None:
        """The CRC-32 the header line of the file of ``version`` records; None if there is no
        such file or header (removed, or written before checksums were kept). A version's
        value never changes, so a held chain whose tip has it is that version's value."""
        try:
            with open(self._blob_path(ns_dir, key, version), "rb") as f:
                header = json.loads(f.readline())
        except (OSError, ValueError):
            return None
        if not isinstance(header, dict) or header.get("key") != key:
            return None
        crc = header.get("crc32")
        return crc if header.get("version") == version and type(crc) is int else None

    def _write_meta(self, ns_dir: str, checkpoint_id: str) -> list[tuple[str, dict[str, Any]]]:
        """``(path, parsed JSON)`` of a checkpoint's write files, in saved order."""
        folder = self._writes_dir(ns_dir, checkpoint_id)
        entries: list[tuple[int, str]] = []
        for name in visible_names(folder):
            seq, _, _ = name.partition("-")
            entries.append((int(seq) if seq.isdigit() else 0, name))
        out: list[tuple[str, dict[str, Any]]] = []
        for _, name in sorted(entries):
            path = os.path.join(folder, name)
            try:
                with open(path, "rb") as f:
                    raw = f.read()
            except FileNotFoundError:
                continue
            try:
                doc = json.loads(raw)
                if not isinstance(doc, dict):
                    raise ValueError("not a JSON object")
                for field in ("task_id", "task_name", "kind", "data"):
                    if not isinstance(doc.get(field), str):
                        raise ValueError(f"{field!r} is missing")
            except ValueError as exc:
                raise SerializationError(
                    f"a pending write of checkpoint {checkpoint_id} is corrupted: "
                    f"{path!r} cannot be read ({exc})"
                ) from exc
            out.append((path, doc))
        return out

    def _writes(self, ns_dir: str, checkpoint_id: str) -> tuple[TaskWrite, ...]:
        writes: list[TaskWrite] = []
        for path, doc in self._write_meta(ns_dir, checkpoint_id):
            try:
                data = unb64(doc["data"])
                if not _checks(doc, data):
                    raise ValueError("checksum mismatch")
            except (ValueError, binascii.Error) as exc:
                raise SerializationError(
                    f"the {doc['kind']!r} write of task {doc['task_name']!r} is corrupted: "
                    f"{path!r} cannot be read ({exc})"
                ) from exc
            row = WriteRow(doc["task_id"], doc["kind"], doc["task_name"], data)
            writes.append(decode_write(row, self.serde))
        return tuple(writes)

    def _load(
        self, thread_id: str, checkpoint_ns: str, ns_dir: str, row: _Row, *, newest: bool = False
    ) -> CheckpointRecord | None:
        """The checkpoint of ``row``; ``newest``: hold its chains, which the next puts extend."""
        try:
            cp, _ = wanted_blobs(row.body, self.serde)
            pool = self._pool(thread_id, checkpoint_ns, ns_dir, cp)
            values = checkpoint_values(cp, pool, self.serde)
            metadata = decode_metadata(row.metadata, self.serde)
            writes = self._writes(ns_dir, row.checkpoint_id)
        except SerializationError as exc:
            if not os.path.exists(self._row_path(ns_dir, row.checkpoint_id)):
                return None  # pruned or deleted while we read it
            raise SerializationError(
                f"thread {thread_id!r}, checkpoint {row.checkpoint_id}: {exc}",
                path=exc.path,
                type_name=exc.type_name,
            ) from exc
        if newest:
            self._chains.loaded(thread_id, checkpoint_ns, blob_versions(cp), pool)
        return CheckpointRecord(
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint=dataclasses.replace(cp, values=values),
            metadata=metadata,
            pending_writes=writes,
        )

    # -- reading -------------------------------------------------------------------------------

    def get_tuple(
        self, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
    ) -> CheckpointRecord | None:
        _, ns_dir = self._dirs(thread_id, checkpoint_ns)
        for _attempt in range(5):
            cid = checkpoint_id if checkpoint_id is not None else self._head(ns_dir)
            if cid is None:
                return None
            row = self._read_row(thread_id, self._row_path(ns_dir, cid), cid)
            newest = checkpoint_id is None
            record = (
                self._load(thread_id, checkpoint_ns, ns_dir, row, newest=newest) if row else None
            )
            if record is not None or checkpoint_id is not None:
                return record
            # the newest checkpoint vanished under us (deleted or pruned): look again
        return None

    def list(
        self,
        thread_id: str,
        checkpoint_ns: str = "",
        *,
        filter: Mapping[str, Any] | None = None,
        before: str | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointRecord]:
        if limit is not None and limit <= 0:
            return
        _, ns_dir = self._dirs(thread_id, checkpoint_ns)
        paths = self._row_ids(ns_dir)
        found = 0
        for cid in sorted(paths, reverse=True):
            if before is not None and cid >= before:
                continue
            row = self._read_row(thread_id, paths[cid], cid)
            if row is None:
                continue
            if filter and not metadata_matches(decode_metadata(row.metadata, self.serde), filter):
                continue
            record = self._load(thread_id, checkpoint_ns, ns_dir, row)
            if record is None:
                continue
            yield record
            found += 1
            if limit is not None and found >= limit:
                return

    def list_threads(
        self, *, status: ThreadStatus | None = None, limit: int | None = None
    ) -> list[ThreadInfo]:
        infos: list[ThreadInfo] = []
        for name in visible_names(self._threads):
            if not name.startswith("t-"):
                continue
            info = self._thread_info(os.path.join(self._threads, name))
            if info is not None and (status is None or info.status == status):
                infos.append(info)
        infos.sort(key=lambda i: (i.updated_at, i.thread_id), reverse=True)
        return infos if limit is None else infos[: max(limit, 0)]

    def _thread_info(self, thread_dir: str) -> ThreadInfo | None:
        ns_dir = os.path.join(thread_dir, ROOT_NS_DIR)
        head = self._head(ns_dir)
        if head is None:
            return None
        try:
            with open(os.path.join(thread_dir, "thread.json"), "rb") as f:
                doc = json.loads(f.read())
            if doc["head"] == head:
                return ThreadInfo(
                    thread_id=doc["thread_id"],
                    status=doc["status"],
                    checkpoint_id=head,
                    updated_at=doc["updated_at"],
                    next=tuple(doc["next"]),
                )
        except (OSError, ValueError, KeyError, TypeError):
            pass
        # thread.json is missing or behind (a crash between the row and it): recompute.
        try:
            with open(os.path.join(ns_dir, "namespace.json"), "rb") as f:
                thread_id = json.loads(f.read())["thread_id"]
            row_path = self._row_path(ns_dir, head)
            updated_at = datetime.fromtimestamp(os.stat(row_path).st_mtime, UTC).isoformat()
            return self._compute_info(thread_id, ns_dir, head, updated_at)
        except (OSError, ValueError, KeyError, TypeError, SerializationError):
            return None

    def _compute_info(
        self,
        thread_id: str,
        ns_dir: str,
        head: str,
        updated_at: str,
        checkpoint: Checkpoint | None = None,
    ) -> ThreadInfo | None:
        if checkpoint is None:
            row = self._read_row(thread_id, self._row_path(ns_dir, head), head)
            if row is None:
                return None
            checkpoint, _ = wanted_blobs(row.body, self.serde)
        writes = [
            TaskWrite(doc["task_id"], doc["task_name"], doc["kind"], None)
            for _, doc in self._write_meta(ns_dir, head)
        ]
        return ThreadInfo(
            thread_id=thread_id,
            status=thread_status(checkpoint, writes),
            checkpoint_id=head,
            updated_at=updated_at,
            next=tuple(t.name for t in checkpoint.next),
        )

    def _refresh_thread_json(
        self, thread_id: str, ns_dir: str, checkpoint: Checkpoint | None = None
    ) -> None:
        """Rewrite ``thread.json`` from the root namespace's head (under the root ns lock)."""
        thread_dir = os.path.dirname(ns_dir)
        path = os.path.join(thread_dir, "thread.json")
        head = self._head(ns_dir)
        if checkpoint is not None and checkpoint.id != head:
            checkpoint = None
        info = self._compute_info(thread_id, ns_dir, head, now_iso(), checkpoint) if head else None
        if info is None:
            remove_file(path)
            return
        doc = {
            "thread_id": info.thread_id,
            "status": info.status,
            "head": info.checkpoint_id,
            "updated_at": info.updated_at,
            "next": list(info.next),
        }
        write_file(path, json_bytes(doc))

    # -- writing -------------------------------------------------------------------------------

    def put(self, record: CheckpointRecord, *, fork: bool = False) -> None:
        cp = record.checkpoint
        thread_id, ns = record.thread_id, record.checkpoint_ns
        with self._writing(thread_id, ns) as ns_dir:
            head_hint = self._head_file(ns_dir)
            head = self._head(ns_dir)
            if head_hint != head:
                self._sweep(ns_dir)  # HEAD names a missing row: a put crashed here
            check_put(record, head, fork=fork)  # the id sorts after the head: it is new
            encoded = self._encode(ns_dir, record)  # fails before anything is written
            texts = {b.key: _json_text(b.data) for b in encoded.blobs} if self.previews else {}
            # 1. values, and the older rows compaction rewrote as prefixes of a new one
            self._store_blobs(ns_dir, encoded, texts)
            # 2. pending writes (a put of this id that crashed may have left some: drop them)
            shutil.rmtree(self._writes_dir(ns_dir, cp.id), ignore_errors=True)
            self._store_writes(ns_dir, cp.id, encoded.writes, record.pending_writes)
            # 3. the preview of what changed and no blob (nor the row: inline values) shows as
            # JSON, for people
            shown = {key for key, text in texts.items() if text is not None} | encoded.inline
            changes = preview_changes(cp.values, hints_of(record), shown) if self.previews else {}
            if changes:
                preview = {"checkpoint_id": cp.id, "step": cp.step, "values": changes}
                write_file(self._preview_path(ns_dir, cp.id), json_bytes(preview))
            # 4. HEAD, then the row: the checkpoint exists from this rename on
            head_doc = json_bytes({"checkpoint_id": cp.id})
            write_file(os.path.join(ns_dir, "HEAD"), head_doc, sync_dir=False)
            write_file(self._row_path(ns_dir, cp.id), self._row_json(record, encoded))
            fsync_dir(ns_dir)
            # 5. after the fact: retention, and the thread summary
            if self.retention is not None:
                self._apply_retention(thread_id, ns_dir)
            if ns == "":
                self._refresh_thread_json(thread_id, ns_dir, cp)
        self._chains.stored(thread_id, ns, encoded.blobs)  # the next load reads tips' headers

    def _encode(self, ns_dir: str, record: CheckpointRecord) -> EncodedCheckpoint:
        """What to write: changed values, any the hints wrongly skip, and prefix rows."""

        def base_of(key: str, version: str) -> BlobRow | None:
            return self._read_blob(ns_dir, key, version, data=False)

        encoded = encode_record(record, base_of, self.serde, inline=True)
        cp = record.checkpoint
        written = {(b.key, b.version) for b in encoded.blobs}
        missing = [
            key
            for key, version in cp.versions.items()
            if key not in encoded.inline  # the row holds it
            and (key, version) not in written
            and not os.path.exists(self._blob_path(ns_dir, key, version))
        ]
        if not missing:
            return encoded
        return dataclasses.replace(
            encoded, blobs=encoded.blobs + full_blobs(record, missing, self.serde)
        )

    def _store_blobs(
        self, ns_dir: str, encoded: EncodedCheckpoint, texts: Mapping[str, bytes | None]
    ) -> None:
        """Write the new blobs, then replace the rows compaction turned into prefix rows.

        A stored version keeps its value whatever its form, so a new blob already on disk (from
        a put that crashed, perhaps since compacted) is skipped. Prefix rows point at the new
        full blob: it is durable before the first of them is renamed into place. They go oldest
        first: a crash midway leaves the newer versions deltas, which the next compaction still
        reaches (it stops at the first prefix row it meets). Renaming, not rewriting, keeps the
        old file intact for a copied thread that hard-linked it.
        """
        new = [
            b
            for b in encoded.blobs
            if not os.path.exists(self._blob_path(ns_dir, b.key, b.version))
        ]
        for rows in (new, encoded.prefixes[::-1]):
            for row in rows:
                path = self._blob_path(ns_dir, row.key, row.version)
                text = texts.get(row.key) if row.data else None
                write_file(path, _blob_file(row, text), sync_dir=False)
            if rows:
                fsync_dir(os.path.join(ns_dir, "blobs"))

    def _readable(self, value: Any) -> Any:
        return "(encrypted)" if self._encrypted else safe_render(value)

    def _row_json(self, record: CheckpointRecord, encoded: EncodedCheckpoint) -> bytes:
        cp, row = record.checkpoint, encoded.row
        source = record.metadata.get("source")
        doc = {
            "checkpoint_id": cp.id,
            "parent_id": cp.parent_id,
            "step": cp.step,
            "created_at": cp.created_at,
            "source": source if isinstance(source, str) else safe_render(source),
            "next": [t.name for t in cp.next],
            "versions": safe_render(cp.versions),
            "updated_by": list(cp.updated_by),
            "barriers": safe_render(cp.barriers),
            "metadata": self._readable(record.metadata),
        }
        if encoded.inline:  # the small scalars the body holds, in its order (no blob has them)
            inline = {k: v for k, v in cp.values.items() if k in encoded.inline}
            doc["values"] = "(encrypted)" if self._encrypted else _shown(inline)
        stored: dict[str, Any] = _checksum(row.body + row.metadata)
        if self._encrypted or _rebuilt(doc) != (row.body, row.metadata):
            stored = {"body": b64(row.body), "metadata": b64(row.metadata), **stored}
        return json_bytes({**doc, "stored": stored})

    def put_writes(
        self,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[TaskWrite],
    ) -> None:
        encoded = encode_writes(writes, self.serde)  # fails before anything is stored
        if not encoded:
            return
        with self._writing(thread_id, checkpoint_ns) as ns_dir:
            self._store_writes(ns_dir, checkpoint_id, encoded, writes)
            if checkpoint_ns == "" and self._head(ns_dir) == checkpoint_id:
                self._refresh_thread_json(thread_id, ns_dir)

    def _store_writes(
        self,
        ns_dir: str,
        checkpoint_id: str,
        rows: Sequence[WriteRow],
        writes: Sequence[TaskWrite],
    ) -> None:
        if not rows:
            return
        folder = self._writes_dir(ns_dir, checkpoint_id)
        make_dirs(folder)
        by_key: dict[str, str] = {}
        last = 0
        for name in visible_names(folder):
            seq, _, rest = name.partition("-")
            if seq.isdigit():
                last = max(last, int(seq))
                by_key[rest.rsplit("-", 1)[-1].removesuffix(".json")] = name
        for row, write in zip(rows, writes, strict=True):
            key = write_key(row.task_id, row.kind)
            name = by_key.get(key)
            if name is None:  # a new write goes last; a replaced one keeps its place
                last += 1
                name = by_key[key] = f"{last:06d}-{encode_name(row.kind, 24)}-{key}.json"
            doc = {
                "task_id": row.task_id,
                "task_name": row.task_name,
                "kind": row.kind,
                "value": self._readable(write.value),
                "data": b64(row.data),
                **_checksum(row.data),
            }
            write_file(os.path.join(folder, name), json_bytes(doc), sync_dir=False)
        fsync_dir(folder)

    # -- deleting ------------------------------------------------------------------------------

    def delete_thread(self, thread_id: str) -> None:
        trash = None
        with self._exclusive(thread_id, create=False) as thread_dir:
            if thread_dir is not None:
                trash = os.path.join(self.directory, f"{TRASH}{secrets.token_hex(8)}")
                os.rename(thread_dir, trash)  # the thread disappears at once, as a whole
                fsync_dir(self._threads)
        # After the rename: a load running meanwhile cannot hold the thread's chains again.
        self._chains.forget_thread(thread_id)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)

    def prune(self, thread_id: str, *, keep_last: int) -> int:
        check_keep_last(keep_last)
        deleted = 0
        for _, ns in self._namespaces(self._thread_dir(thread_id)):
            with self._writing(thread_id, ns) as ns_dir:
                ids = sorted(self._row_ids(ns_dir), reverse=True)
                deleted += self._drop(thread_id, ns_dir, ids[keep_last:], ids[:keep_last])
                self._sweep(ns_dir)
                if ns == "":
                    self._refresh_thread_json(thread_id, ns_dir)
        return deleted

    def _namespaces(self, thread_dir: str) -> list[tuple[str, str]]:
        """``(folder, namespace)`` of every namespace of a thread."""
        out: list[tuple[str, str]] = []
        for name in visible_names(thread_dir):
            path = os.path.join(thread_dir, name)
            if name != ROOT_NS_DIR and not name.startswith("ns-"):
                continue
            try:
                with open(os.path.join(path, "namespace.json"), "rb") as f:
                    out.append((path, json.loads(f.read())["checkpoint_ns"]))
            except (OSError, ValueError, KeyError, TypeError):
                continue  # never initialised: holds nothing
        return out

    def _apply_retention(self, thread_id: str, ns_dir: str) -> None:
        retention = self.retention
        assert retention is not None
        ids = sorted(self._row_ids(ns_dir), reverse=True)
        drop: set[str] = set()
        if retention.max_checkpoints is not None:
            drop.update(ids[retention.max_checkpoints :])
        cutoff = age_cutoff(retention)
        if cutoff is not None:
            for cid in ids[1:]:  # never the newest
                if cid not in drop:
                    created = self._created_ts(thread_id, ns_dir, cid)
                    if created is not None and created < cutoff:
                        drop.add(cid)
        if drop:
            self._drop(thread_id, ns_dir, sorted(drop), [c for c in ids if c not in drop])

    def _created_ts(self, thread_id: str, ns_dir: str, checkpoint_id: str) -> float | None:
        """A checkpoint's ``created_at`` as Unix seconds, cached (rows never change)."""
        path = self._row_path(ns_dir, checkpoint_id)
        try:
            inode = os.stat(path).st_ino
        except FileNotFoundError:
            return None
        with self._swept_lock:
            cached = self._created.get(path)
        if cached is not None and cached[0] == inode:
            return cached[1]
        row = self._read_row(thread_id, path, checkpoint_id)
        created = created_ts(row.created_at) if row is not None else None
        with self._swept_lock:
            if len(self._created) > 100_000:
                self._created.clear()
            self._created[path] = (inode, created)
        return created

    def _drop(self, thread_id: str, ns_dir: str, drop: Sequence[str], keep: Sequence[str]) -> int:
        """Delete checkpoints (rows first) and the values only they used; under the ns lock."""
        if not drop:
            return 0
        for cid in drop:
            remove_file(self._row_path(ns_dir, cid))
        fsync_dir(os.path.join(ns_dir, "checkpoints"))
        for cid in drop:
            shutil.rmtree(self._writes_dir(ns_dir, cid), ignore_errors=True)
            remove_file(self._preview_path(ns_dir, cid))
        if not keep:
            remove_file(os.path.join(ns_dir, "HEAD"))
        # Values: keep every blob a kept checkpoint needs: its chain, and the later version a
        # prefix row is a prefix of (``base`` leads to both).
        kept: list[dict[str, str]] = []
        for cid in keep:
            row = self._read_row(thread_id, self._row_path(ns_dir, cid), cid)
            if row is None:
                continue
            try:
                cp = wanted_blobs(row.body, self.serde)[0]
            except SerializationError:
                return len(drop)  # cannot tell what it needs: keep every value
            kept.append(blob_versions(cp))
        blobs_dir = os.path.join(ns_dir, "blobs")
        headers: dict[tuple[str, str], BlobRow] = {}
        names: dict[tuple[str, str], str] = {}
        for name in visible_names(blobs_dir):
            try:
                with open(os.path.join(blobs_dir, name), "rb") as f:
                    header = json.loads(f.readline())
                row = _blob_row(header, b"")
                headers[(row.key, row.version)] = row
                names[(row.key, row.version)] = name
            except (OSError, ValueError, KeyError, TypeError):
                continue  # unreadable: leave it be
        needed = referenced_blobs(kept, headers)
        for ref, name in names.items():
            if ref not in needed:
                remove_file(os.path.join(blobs_dir, name))
        return len(drop)

    # -- copying -------------------------------------------------------------------------------

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Copy a thread (every namespace, checkpoint and write) to an empty thread id.

        Files are hard-linked where the file system allows (they are never modified in place).
        Raises ``ValueError`` if the target already has checkpoints (including when it is the
        source); copying a thread that has none does nothing.
        """
        source_dir = self._thread_dir(source_thread_id)
        target_dir = self._thread_dir(target_thread_id)
        if source_dir == target_dir:  # one lock cannot be held shared and exclusive at once
            if any(self._row_ids(ns_dir) for ns_dir, _ in self._namespaces(source_dir)):
                raise ValueError(
                    f"cannot copy thread {source_thread_id!r} onto itself: the target already "
                    "has checkpoints"
                )
            return
        # Lock both threads in a fixed order, so two opposite copies cannot deadlock.
        fds: list[int] = []
        have_source = True
        try:
            for path in sorted([source_dir, target_dir]):
                source = path == source_dir
                fd = self._lock_thread(path, shared=source, create=not source)
                if fd is None:
                    have_source = False  # no such thread: nothing to copy
                else:
                    fds.append(fd)
            for ns_dir, _ in self._namespaces(target_dir):
                if self._row_ids(ns_dir):
                    raise ValueError(
                        f"cannot copy thread {source_thread_id!r} to {target_thread_id!r}: "
                        "the target already has checkpoints; delete it first or pick another id"
                    )
            sources = self._namespaces(source_dir) if have_source else []
            if not any(self._row_ids(ns_dir) for ns_dir, _ in sources):
                return
            for name in all_names(target_dir):  # leftovers that hold no checkpoint
                path = os.path.join(target_dir, name)
                if name == ROOT_NS_DIR or name.startswith(("ns-", TMP)):
                    shutil.rmtree(path, ignore_errors=True)
            # The root namespace last: the copy shows in list_threads once it is complete.
            sources.sort(key=lambda source: source[1] == "")
            for ns_dir, ns in sources:
                self._copy_ns(source_thread_id, ns_dir, ns, target_thread_id, target_dir)
            fsync_dir(target_dir)
            root = os.path.join(target_dir, ROOT_NS_DIR)
            if os.path.isdir(root):
                self._refresh_thread_json(target_thread_id, root)
        finally:
            for fd in fds:
                os.close(fd)

    def _copy_ns(
        self, source_id: str, ns_dir: str, ns: str, target_id: str, target_dir: str
    ) -> None:
        # A consistent view of the source namespace (its thread lock is held already).
        with self._writing(source_id, ns, thread_locked=True):
            stage = os.path.join(target_dir, f"{TMP}ns-{secrets.token_hex(6)}")
            os.mkdir(stage)
            for sub in ("checkpoints", "values", "blobs", "writes"):
                os.mkdir(os.path.join(stage, sub))
            for sub in ("checkpoints", "values", "blobs"):
                for name in visible_names(os.path.join(ns_dir, sub)):
                    link_or_copy(os.path.join(ns_dir, sub, name), os.path.join(stage, sub, name))
                fsync_dir(os.path.join(stage, sub))
            for cid_dir in visible_names(os.path.join(ns_dir, "writes")):
                os.mkdir(os.path.join(stage, "writes", cid_dir))
                for name in visible_names(os.path.join(ns_dir, "writes", cid_dir)):
                    link_or_copy(
                        os.path.join(ns_dir, "writes", cid_dir, name),
                        os.path.join(stage, "writes", cid_dir, name),
                    )
                fsync_dir(os.path.join(stage, "writes", cid_dir))
            fsync_dir(os.path.join(stage, "writes"))
            head = self._head(ns_dir)
            if head is not None:
                write_file(os.path.join(stage, "HEAD"), json_bytes({"checkpoint_id": head}))
            info = {"thread_id": target_id, "checkpoint_ns": ns}
            write_file(os.path.join(stage, "namespace.json"), json_bytes(info))
            os.rename(stage, self._ns_dir(target_dir, ns))
