"""A thread's folders: safe names, paths, atomic and durable writes, the thread lock, heads and
crash sweeps.

A thread is a folder ``threads/t-<encoded id>``; each namespace a folder in it (``root`` or
``ns-<encoded>``) holding ``checkpoints/``, ``values/``, ``blobs/``, ``writes/`` and ``HEAD``.
Every file is written to a ``.tmp-*`` file in its own folder, fsynced, renamed into place and
its folder fsynced (the few whose loss its readers notice skip the fsyncs: ``write_file``);
nothing is modified in place.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import json
import os
import re
import secrets
import shutil
from contextlib import suppress
from typing import Any
from urllib.parse import unquote

from threadline.errors import CorruptedDataError

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_NAME_LIMIT = 120  # characters of an encoded id in a file name (file names max out at 255)
TMP = ".tmp-"
TRASH = ".trash-"
ROOT_NS_DIR = "root"
SUBFOLDERS = ("checkpoints", "values", "blobs", "writes")

# -- names and paths -----------------------------------------------------------------------------


def encode_name(text: str, limit: int = _NAME_LIMIT) -> str:
    """``text`` as one safe path component: percent-encoded UTF-8, hashed when too long."""
    if _PLAIN.fullmatch(text) and len(text) <= limit:
        return text  # the common case (UUIDs, plain names): nothing to escape
    raw = text.encode("utf-8", "surrogatepass")
    out = "".join(chr(b) if chr(b) in _SAFE else f"%{b:02X}" for b in raw)
    if len(out) > limit:
        digest = hashlib.sha256(raw).hexdigest()[:32]
        out = f"{out[: limit - 33]}~{digest}"
    return out


def write_key(task_id: str, kind: str) -> str:
    """A short name for a write's ``(task id, kind)``, whatever characters they hold."""
    key = json.dumps([task_id, kind]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:20]


def ns_dir(thread_dir: str, ns: str) -> str:
    return os.path.join(thread_dir, ROOT_NS_DIR if ns == "" else "ns-" + encode_name(ns))


def row_path(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "checkpoints", encode_name(checkpoint_id) + ".json")


def preview_path(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "values", encode_name(checkpoint_id) + ".json")


def writes_dir(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "writes", encode_name(checkpoint_id))


def blob_path(ns_dir: str, key: str, version: Any) -> str:
    # Versions are strings (checkpoint ids); anything else is named by its JSON, marked "=".
    if isinstance(version, str):
        name = encode_name(version, 100)
    else:
        name = "=" + encode_name(json.dumps(version, sort_keys=True, default=repr), 99)
    return os.path.join(ns_dir, "blobs", f"{encode_name(key, 100)}@{name}.blob")


# -- writing and listing -------------------------------------------------------------------------


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(
    path: str, data: bytes, *, sync_dir: bool = True, replace: bool = True, durable: bool = True
) -> None:
    """Write ``data`` to ``path`` atomically and durably (temp file, fsync, rename, fsync dir).

    ``replace=False`` leaves a file already at ``path`` as it is (it is linked, not renamed).
    ``durable=False`` skips both fsyncs, for a file whose loss or garbling in a power failure
    its readers notice (the file appears whole to other processes all the same).
    """
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f"{TMP}{os.getpid()}-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            if durable:
                f.flush()
                os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)
        else:
            with suppress(FileExistsError):
                os.link(tmp, path)
            os.unlink(tmp)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir and durable:
        fsync_dir(folder)


def write_json(
    path: str, obj: Any, *, sync_dir: bool = True, replace: bool = True, durable: bool = True
) -> None:
    """``write_file`` of ``obj`` as JSON text (``json_bytes``)."""
    write_file(path, json_bytes(obj), sync_dir=sync_dir, replace=replace, durable=durable)


def make_dirs(path: str) -> None:
    """Create ``path`` and missing parents, fsyncing each parent that gained an entry."""
    missing: list[str] = []
    p = path
    while not os.path.isdir(p):
        missing.append(p)
        p = os.path.dirname(p)
    for d in reversed(missing):
        with suppress(FileExistsError):
            os.mkdir(d)
        fsync_dir(os.path.dirname(d))


def json_bytes(obj: Any) -> bytes:
    text = json.dumps(obj, ensure_ascii=False, indent=1)
    try:
        return (text + "\n").encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: fall back to \u escapes
        return (json.dumps(obj, ensure_ascii=True, indent=1) + "\n").encode("ascii")


def read_json(path: str) -> Any:
    """A small JSON file's value (``OSError`` if there is none, ``ValueError`` if damaged)."""
    with open(path, "rb") as f:
        return json.loads(f.read())


def all_names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def visible_names(folder: str) -> list[str]:
    """Entries of a folder but dot files (locks, temp files); empty if it is missing."""
    return [n for n in all_names(folder) if not n.startswith(".")]


def remove_file(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def link_all(source: str, target: str) -> None:
    """Hard-link (or copy, where links are refused) the visible files of ``source``."""
    for name in visible_names(source):
        try:
            os.link(os.path.join(source, name), os.path.join(target, name))
        except OSError as exc:
            if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
                raise
            shutil.copyfile(os.path.join(source, name), os.path.join(target, name))
    fsync_dir(target)


# -- locks ---------------------------------------------------------------------------------------


def lock(thread_dir: str) -> int:
    """flock a thread's ``.lock`` exclusively (created if missing, with its folder)."""
    while True:
        make_dirs(thread_dir)
        fd = _flock(thread_dir, os.O_RDWR | os.O_CREAT, fcntl.LOCK_EX)
        if fd is not None:
            return fd


def share(thread_dir: str) -> int | None:
    """flock a thread's ``.lock`` shared, so no writer changes the thread while it is held.

    ``None`` if there is no ``.lock``: no thread, or a folder no writer has locked yet (a read
    never writes a file).
    """
    while True:
        fd = _flock(thread_dir, os.O_RDONLY, fcntl.LOCK_SH)
        if fd is not None or not os.path.exists(os.path.join(thread_dir, ".lock")):
            return fd


def _flock(thread_dir: str, flags: int, operation: int) -> int | None:
    """The locked ``.lock`` of ``thread_dir``; ``None`` if it is missing or was moved away.

    ``delete_thread`` renames the folder (lock file included) away while others wait for it,
    so once locked we check that the path still names the file we locked.
    """
    path = os.path.join(thread_dir, ".lock")
    try:
        fd = os.open(path, flags | os.O_CLOEXEC, 0o666)
    except FileNotFoundError:
        return None
    try:
        fcntl.flock(fd, operation)
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
    return None


# -- heads, namespaces and crash sweeps ----------------------------------------------------------


def row_ids(ns_dir: str) -> dict[str, str]:
    """checkpoint id -> row file path, for every checkpoint of a namespace."""
    folder = os.path.join(ns_dir, "checkpoints")
    out: dict[str, str] = {}
    for name in visible_names(folder):
        if not name.endswith(".json"):
            continue
        path = os.path.join(folder, name)
        cid = name[: -len(".json")]
        if "~" not in cid:
            cid = unquote(cid, errors="surrogatepass")
        else:  # a hashed name: the id is inside
            try:
                cid = read_json(path)["checkpoint_id"]
            except FileNotFoundError:
                continue
            except (ValueError, KeyError, TypeError) as exc:
                raise CorruptedDataError(
                    f"checkpoint file {path!r} is corrupted ({exc}); move it away to read "
                    "the rest of the thread"
                ) from exc
        out[str(cid)] = path
    return out


def head(ns_dir: str) -> str | None:
    """The newest checkpoint id of a namespace: ``HEAD`` if its row exists, else a scan."""
    return newest(ns_dir)[0]


def newest(ns_dir: str) -> tuple[str | None, bool]:
    """The newest checkpoint id, and whether ``HEAD`` (a hint) agrees: if not, a put crashed
    after writing ``HEAD`` and before its row."""
    try:
        cid = read_json(os.path.join(ns_dir, "HEAD"))["checkpoint_id"]
    except (OSError, ValueError, KeyError, TypeError):
        cid = None
    if not isinstance(cid, str):
        cid = None
    elif os.path.exists(row_path(ns_dir, cid)):
        return cid, True
    ids = row_ids(ns_dir)
    found = max(ids) if ids else None
    return found, found == cid


def namespaces(thread_dir: str) -> dict[str, str]:
    """namespace -> folder, for every namespace of a thread that was ever written."""
    out: dict[str, str] = {}
    for name in visible_names(thread_dir):
        if name != ROOT_NS_DIR and not name.startswith("ns-"):
            continue
        path = os.path.join(thread_dir, name)
        try:
            out[read_json(os.path.join(path, "namespace.json"))["checkpoint_ns"]] = path
        except (OSError, ValueError, KeyError, TypeError):
            continue  # never initialised: holds nothing
    return out


def sweep(ns_dir: str) -> None:
    """Remove stray temp files and files of checkpoints whose row never landed (a crash).

    Runs under the thread lock, when no other writer can have files in flight there.
    """
    rows = {n[: -len(".json")] for n in visible_names(os.path.join(ns_dir, "checkpoints"))}
    for sub in ("", *SUBFOLDERS):
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
    if os.path.basename(ns_dir) == ROOT_NS_DIR:  # thread.json's and copies' leftovers
        thread_dir = os.path.dirname(ns_dir)
        for name in all_names(thread_dir):
            path = os.path.join(thread_dir, name)
            if name.startswith(TMP) and os.path.isdir(path):
                shutil.rmtree(path, ignore_errors=True)  # a copy's staging folder
            elif name.startswith(TMP):
                remove_file(path)
