"""Files on disk: names made safe for any id, and writes that are atomic and durable.

Every file is written to a ``.tmp-*`` file in its own folder, flushed, fsynced, renamed into
place with ``os.replace``, and its folder fsynced; nothing is modified in place.
"""

from __future__ import annotations

import base64
import errno
import hashlib
import json
import os
import re
import secrets
import shutil
from contextlib import suppress
from typing import Any
from urllib.parse import unquote

_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
_PLAIN = re.compile(r"[A-Za-z0-9_-]+")
_NAME_LIMIT = 120  # characters of an encoded id in a file name (file names max out at 255)
TMP = ".tmp-"
TRASH = ".trash-"
ROOT_NS_DIR = "root"


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


def decode_name(name: str) -> str | None:
    """The text behind an encoded name, or ``None`` for a hashed (too long) one."""
    if "~" in name:
        return None
    return unquote(name, errors="surrogatepass")


def version_name(version: Any) -> str:
    # Versions are strings (checkpoint ids); anything else is named by its JSON, marked "=".
    if isinstance(version, str):
        return encode_name(version, 100)
    return "=" + encode_name(json.dumps(version, sort_keys=True, default=repr), 99)


def write_key(task_id: str, kind: str) -> str:
    """A short name for a write's ``(task id, kind)``, whatever characters they hold."""
    key = json.dumps([task_id, kind]).encode("utf-8", "surrogatepass")
    return hashlib.sha256(key).hexdigest()[:20]


def fsync_dir(path: str) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path: str, data: bytes, *, sync_dir: bool = True) -> None:
    """Write ``data`` to ``path`` atomically and durably (temp file, fsync, rename, fsync dir)."""
    folder = os.path.dirname(path)
    tmp = os.path.join(folder, f"{TMP}{os.getpid()}-{secrets.token_hex(6)}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with suppress(OSError):
            os.unlink(tmp)
        raise
    if sync_dir:
        fsync_dir(folder)


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


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(text, validate=True)


def is_visible(name: str) -> bool:
    return not name.startswith(".")


def visible_names(folder: str) -> list[str]:
    """Visible entries of a folder (no dot files: locks, temp files); empty if it is missing."""
    return [n for n in all_names(folder) if is_visible(n)]


def all_names(folder: str) -> list[str]:
    try:
        return os.listdir(folder)
    except (FileNotFoundError, NotADirectoryError):
        return []


def remove_file(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def link_or_copy(source: str, target: str) -> None:
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP):
            raise
        shutil.copyfile(source, target)
