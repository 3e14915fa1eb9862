"""Reading a thread's files back into backend rows; a damaged file raises
``SerializationError`` naming it (and the key, for values)."""

from __future__ import annotations

import json
import os
from typing import Any

from threadline.checkpoint.files import folders, rows
from threadline.checkpoint.files.disk import visible_names
from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow
from threadline.errors import SerializationError

_READ_ERRORS = (ValueError, KeyError, TypeError, ArithmeticError, SerializationError)


def read_row(thread_id: str, path: str, checkpoint_id: str) -> CheckpointRow | None:
    """A row file's row; ``None`` if there is none."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    try:
        return rows.read_row(raw, checkpoint_id)
    except _READ_ERRORS as exc:
        raise SerializationError(
            f"checkpoint {checkpoint_id} of thread {thread_id!r} is corrupted: "
            f"{path!r} cannot be read ({exc})"
        ) from exc


def read_blob(ns_dir: str, key: str, version: str, *, data: bool = True) -> BlobRow | None:
    """A blob file's row (``data`` false: its header only); ``None`` if there is none."""
    path = folders.blob_path(ns_dir, key, version)
    try:
        with open(path, "rb") as f:
            header = f.readline()
            payload = f.read() if data else None
    except FileNotFoundError:
        return None
    try:
        return rows.read_blob(header, payload, key, version)
    except _READ_ERRORS as exc:
        raise SerializationError(
            f"the stored value of key {key!r} (version {version}) is corrupted: "
            f"{path!r} cannot be read ({exc})"
        ) from exc


def recorded_crc(ns_dir: str, key: str, version: str) -> int | None:
    """The CRC-32 the header line of the file of ``version`` records; None if there is no such
    file or header. A version's value never changes, so a held chain whose tip has it is that
    version's value."""
    try:
        with open(folders.blob_path(ns_dir, key, version), "rb") as f:
            header = json.loads(f.readline())
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("key") != key:
        return None
    crc = header.get("crc32")
    return crc if header.get("version") == version and type(crc) is int else None


def read_writes(ns_dir: str, checkpoint_id: str, *, data: bool = True) -> list[WriteRow]:
    """A checkpoint's pending writes, in saved order."""
    folder = folders.writes_dir(ns_dir, checkpoint_id)
    names = sorted(visible_names(folder), key=_seq)
    out: list[WriteRow] = []
    for name in names:
        path = os.path.join(folder, name)
        try:
            with open(path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            continue
        try:
            out.append(rows.read_write(raw, data=data))
        except _READ_ERRORS as exc:
            raise SerializationError(
                f"a pending write of checkpoint {checkpoint_id} is corrupted: "
                f"{path!r} cannot be read ({exc})"
            ) from exc
    return out


def _seq(name: str) -> tuple[int, str]:
    """A write file's place: its name starts with its sequence number."""
    seq = name.partition("-")[0]
    return int(seq) if seq.isdigit() else 0, name


def read_thread_doc(thread_dir: str) -> dict[str, Any] | None:
    """A thread's ``thread.json`` (status, head, updated_at, next); ``None`` if unreadable."""
    try:
        doc = json.loads(read_all(os.path.join(thread_dir, "thread.json")))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("head"), str) else None


def read_all(path: str) -> bytes:
    """A small file's bytes (``OSError`` if there is none)."""
    with open(path, "rb") as f:
        return f.read()
