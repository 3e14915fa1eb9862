"""Where a thread's files live, how writers lock a thread, and what finds its heads.

A thread is a folder ``threads/t-<encoded id>``; each namespace a folder in it (``root`` or
``ns-<encoded>``) holding ``checkpoints/``, ``values/``, ``blobs/``, ``writes/`` and ``HEAD``.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil

from threadline.checkpoint.files.disk import (
    ROOT_NS_DIR,
    TMP,
    all_names,
    decode_name,
    encode_name,
    make_dirs,
    remove_file,
    version_name,
    visible_names,
)
from threadline.errors import SerializationError

SUBFOLDERS = ("checkpoints", "values", "blobs", "writes")


def ns_dir(thread_dir: str, ns: str) -> str:
    return os.path.join(thread_dir, ROOT_NS_DIR if ns == "" else "ns-" + encode_name(ns))


def row_path(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "checkpoints", encode_name(checkpoint_id) + ".json")


def preview_path(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "values", encode_name(checkpoint_id) + ".json")


def writes_dir(ns_dir: str, checkpoint_id: str) -> str:
    return os.path.join(ns_dir, "writes", encode_name(checkpoint_id))


def blob_path(ns_dir: str, key: str, version: str) -> str:
    return os.path.join(ns_dir, "blobs", f"{encode_name(key, 100)}@{version_name(version)}.blob")


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


def row_ids(ns_dir: str) -> dict[str, str]:
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
                    f"checkpoint file {path!r} is corrupted ({exc}); move it away to read "
                    "the rest of the thread"
                ) from exc
        out[str(cid)] = path
    return out


def head_file(ns_dir: str) -> str | None:
    """What ``HEAD`` says (a hint: after a crash it can name a row that never landed)."""
    try:
        with open(os.path.join(ns_dir, "HEAD"), "rb") as f:
            cid = json.loads(f.read())["checkpoint_id"]
        return cid if isinstance(cid, str) else None
    except (OSError, ValueError, KeyError, TypeError):
        return None


def head(ns_dir: str) -> str | None:
    """The newest checkpoint id of a namespace: ``HEAD`` if its row exists, else a scan."""
    return newest(ns_dir)[0]


def newest(ns_dir: str) -> tuple[str | None, bool]:
    """The newest checkpoint id, and whether ``HEAD`` agrees (if not, a put crashed here)."""
    cid = head_file(ns_dir)
    if cid is not None and os.path.exists(row_path(ns_dir, cid)):
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
            with open(os.path.join(path, "namespace.json"), "rb") as f:
                out[json.loads(f.read())["checkpoint_ns"]] = path
        except (OSError, ValueError, KeyError, TypeError):
            continue  # never initialised: holds nothing
    return out
