"""The files of a namespace: each backend row as bytes on disk, written and read back.

A row file shows its checkpoint as JSON (``row_file``) and keeps the exact bytes only when
those fields do not make them again (``_rebuilt``); a blob file is a JSON header line and the
value (``blob_file``), and so is a write file (``write_record``). Each keeps a CRC-32 of its
bytes, checked when read: a damaged file raises ``SerializationError`` naming it (and the key,
for values).
"""

from __future__ import annotations

import base64
import functools
import json
import os
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from datetime import UTC, datetime
from typing import Any

from threadline.checkpoint.backend import ThreadRow
from threadline.checkpoint.base import Checkpoint, PlannedTask
from threadline.checkpoint.bodies import (
    decode_checkpoint,
    decode_metadata,
    encode_body,
    encode_metadata,
)
from threadline.checkpoint.files import disk
from threadline.checkpoint.files.disk import ROOT_NS_DIR
from threadline.checkpoint.files.preview import safe_render
from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow
from threadline.checkpoint.seals import blob_crc, blob_intact, write_crc
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import DEFAULT, Serializer
from threadline.serde import wire as fmt

_ROW_FIELDS = ("checkpoint_id", "parent_id", "step", "created_at")  # a row file's first fields
_BLOB_FIELDS = ("key", "version", "start", "base", "chain_bytes", "full_bytes", "items")
ENCRYPTED = "(encrypted)"  # what a readable field shows when the codec seals values
_READ_ERRORS = (ValueError, KeyError, TypeError, ArithmeticError, SerializationError)


@contextmanager
def _reading(what: str, path: str) -> Iterator[None]:
    """Name the file (and what it holds) in the error a damaged one raises."""
    try:
        yield
    except _READ_ERRORS as exc:
        raise CorruptedDataError(f"{what} is corrupted: {path!r} cannot be read ({exc})") from exc


def read_all(path: str) -> bytes:
    """A small file's bytes (``OSError`` if there is none)."""
    with open(path, "rb") as f:
        return f.read()


# -- checkpoint rows -----------------------------------------------------------------------------


def _row_bytes(row: CheckpointRow) -> bytes:
    """What a row file's checksum covers: the fields a compact body leaves to the row, then
    the body and metadata bytes."""
    fields = [getattr(row, name) for name in _ROW_FIELDS]
    return json.dumps(fields).encode("utf-8", "surrogatepass") + row.body + row.metadata


def row_file(row: CheckpointRow, codec: Serializer, encrypted: bool) -> bytes:
    """A row file: the checkpoint's fields as JSON, its exact bytes too (base64) unless
    ``_rebuilt`` makes them again from those fields."""
    doc: dict[str, Any] = {name: getattr(row, name) for name in _ROW_FIELDS}
    with suppress(SerializationError):  # not readable with this codec: the bytes alone
        doc.update(_readable(row, codec, encrypted))
    stored: dict[str, Any] = {"crc32": zlib.crc32(_row_bytes(row))}
    if encrypted or _rebuilt(doc) != (row.body, row.metadata):
        stored = {"body": _b64(row.body), "metadata": _b64(row.metadata), **stored}
    return disk.json_bytes({**doc, "stored": stored})


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _readable(row: CheckpointRow, codec: Serializer, encrypted: bool) -> dict[str, Any]:
    fields = (row.checkpoint_id, row.parent_id, row.step, row.created_at)
    cp = decode_checkpoint(row.body, {}, codec, fields)
    metadata = decode_metadata(row.metadata, codec, row.step)
    source = metadata.get("source")
    doc: dict[str, Any] = {
        "source": source if isinstance(source, str) else safe_render(source),
        "next": [t.name for t in cp.next],
        "versions": safe_render(cp.versions),
        "updated_by": list(cp.updated_by),
        "barriers": safe_render(cp.barriers),
        "metadata": ENCRYPTED if encrypted else safe_render(metadata),
    }
    # The small scalars the body holds (no blob has them): as they are where JSON shows them
    # exactly, else a rendering (``"<3 bytes>"``, ``"nan"``) that ``_rebuilt`` does not turn
    # back into the body, so the row keeps its bytes too.
    if cp.values:
        doc["values"] = ENCRYPTED if encrypted else safe_render(cp.values)
    return doc


def _rebuilt(doc: dict[str, Any]) -> tuple[bytes, bytes] | None:
    """The body and metadata bytes of a row, made again from its readable fields.

    A row keeps its exact bytes only when this does not give them back: planned tasks with
    arguments, values JSON cannot show exactly, a codec that compresses or seals. Always
    encoded with the plain default codec, so any saver rebuilds the same bytes; the row's
    checksum says whether they are right.
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
        body = encode_body(cp, DEFAULT, inline, compact=True)
        return body, encode_metadata(doc["metadata"], cp.id, DEFAULT, cp.step)
    except (KeyError, TypeError, AttributeError, ValueError, SerializationError):
        return None


def read_row(thread_id: str, path: str, checkpoint_id: str) -> CheckpointRow | None:
    """A row file's row; ``None`` if there is none."""
    try:
        raw = read_all(path)
    except FileNotFoundError:
        return None
    with _reading(f"checkpoint {checkpoint_id} of thread {thread_id!r}", path):
        doc = json.loads(raw)
        stored = doc["stored"]
        if "body" in stored:
            body, metadata = _unb64(stored["body"]), _unb64(stored["metadata"])
        elif (rebuilt := _rebuilt(doc)) is not None:
            body, metadata = rebuilt
        else:
            raise ValueError("its fields do not make a checkpoint")
        if doc["checkpoint_id"] != checkpoint_id:
            raise ValueError(f"it holds checkpoint {doc['checkpoint_id']!r}")
        parent, step, created_at = doc["parent_id"], doc["step"], doc["created_at"]
        if not (parent is None or type(parent) is str) or type(step) is not int:
            raise ValueError("its parent or step is malformed")
        row = CheckpointRow(checkpoint_id, parent, step, str(created_at), body, metadata)
        if stored.get("crc32") != zlib.crc32(_row_bytes(row)):
            raise ValueError("checksum mismatch")
        return row


def _unb64(text: Any) -> bytes:
    if not isinstance(text, str):
        raise ValueError("expected base64 text")
    return base64.b64decode(text, validate=True)


def read_thread_doc(thread_dir: str) -> dict[str, Any] | None:
    """A thread's ``thread.json`` (status, head, updated_at, next); ``None`` if unreadable."""
    try:
        doc = disk.read_json(os.path.join(thread_dir, "thread.json"))
    except (OSError, ValueError):
        return None
    return doc if isinstance(doc, dict) and isinstance(doc.get("head"), str) else None


# -- blobs and pending writes: a JSON header line, then the value --------------------------------


def json_text(data: bytes) -> bytes | None:
    """The value of plain blob bytes as JSON text, if that text encodes back to those bytes
    (with the plain default codec, as any saver reading it would); None otherwise."""
    if data[:2] != fmt.PLAIN_HEADER:
        return None
    try:
        text = json.dumps(DEFAULT.loads(data), ensure_ascii=False, allow_nan=False)
        return text.encode() if DEFAULT.dumps(json.loads(text)) == data else None
    except (TypeError, ValueError, RecursionError, SerializationError):
        return None


def _value(
    header: Mapping[str, Any], payload: bytes, intact: Callable[[bytes, Any], bool]
) -> bytes:
    """The bytes of the value after a header line, checked against its size and CRC-32
    (``intact(bytes, recorded CRC-32)``: ``seals.blob_intact`` or ``_write_intact``)."""
    if header.get("json") is True:
        payload = DEFAULT.dumps(json.loads(payload))
    if len(payload) != header["size"]:
        raise ValueError(f"{len(payload)} bytes instead of {header['size']}")
    if not intact(payload, header.get("crc32")):
        raise ValueError("checksum mismatch")
    return payload


def blob_file(blob: BlobRow, text: bytes | None = None) -> bytes:
    """A blob file: one JSON line with the row's fields, size and CRC-32, then the bytes, or
    (``"json": true``) the value as JSON text that encodes back to them (``json_text``).

    A prefix row is the header line alone (``base`` names the version it is a prefix of).
    """
    header: dict[str, Any] = {name: getattr(blob, name) for name in _BLOB_FIELDS}
    header.update(size=len(blob.data), crc32=blob_crc(blob))
    if text is not None:
        header["json"] = True
    line = json.dumps(header, ensure_ascii=True).encode("ascii")
    return line + b"\n" + (blob.data if text is None else text)


def blob_row(header: dict[str, Any], data: bytes) -> BlobRow:
    """The row a blob file's header describes."""
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


def read_blob(ns_dir: str, key: str, version: str, *, data: bool = True) -> BlobRow | None:
    """A blob file's row (``data`` false: its header only); ``None`` if there is none."""
    path = disk.blob_path(ns_dir, key, version)
    try:
        with open(path, "rb") as f:
            line = f.readline()
            payload = f.read() if data else b""
    except FileNotFoundError:
        return None
    with _reading(f"the stored value of key {key!r} (version {version})", path):
        header = json.loads(line)
        if header["key"] != key or header["version"] != version:
            raise ValueError(f"it holds key {header['key']!r} version {header['version']!r}")
        if not data:
            return blob_row(header, b"")

        def intact(value: bytes, crc: Any) -> bool:
            return blob_intact(blob_row(header, value), crc)

        return blob_row(header, _value(header, payload, intact))


def blob_header(path: str) -> Any:
    """The header line of a blob file, as JSON; ``OSError`` or ``ValueError`` if unreadable."""
    with open(path, "rb") as f:
        return json.loads(f.readline())


def recorded_crc(ns_dir: str, key: str, version: str) -> int | None:
    """The CRC-32 the header line of the file of ``version`` records; None if there is no such
    file or header. A version's value never changes, so a held chain whose tip has it is that
    version's value."""
    try:
        header = blob_header(disk.blob_path(ns_dir, key, version))
    except (OSError, ValueError):
        return None
    if not isinstance(header, dict) or header.get("key") != key:
        return None
    crc = header.get("crc32")
    return crc if header.get("version") == version and type(crc) is int else None


def store_blobs(
    ns_dir: str, blobs: Sequence[BlobRow], prefixes: Sequence[BlobRow], texts: Mapping[str, Any]
) -> None:
    """Write the new blobs (``texts``: their values as JSON, by key), then replace the rows
    compaction turned into prefix rows.

    A stored version keeps its value whatever its form, so a new blob already on disk (from a
    put that crashed, perhaps since compacted) is skipped. Prefix rows point at the new full
    blob: it is durable before the first of them is renamed into place. They go oldest first:
    a crash midway leaves the newer versions deltas, which the next compaction still reaches.
    Renaming, not rewriting, keeps the old file intact for a copy that hard-linked it.
    """
    new = [b for b in blobs if not os.path.exists(disk.blob_path(ns_dir, b.key, b.version))]
    for batch in (new, prefixes[::-1]):
        for row in batch:
            data = blob_file(row, texts.get(row.key) if row.data else None)
            disk.write_file(disk.blob_path(ns_dir, row.key, row.version), data, sync_dir=False)
        if batch:
            disk.fsync_dir(os.path.join(ns_dir, "blobs"))


def write_record(
    checkpoint_id: str, row: WriteRow, codec: Serializer, encrypted: bool, as_json: bool
) -> bytes:
    """A write file, laid out as a blob file: one JSON line (task, kind, a readable rendering
    of the value, size, CRC-32 of the write's checkpoint, task, kind and name and its value:
    ``seals.write_crc``), then the value's bytes, or (``"json": true``, ``as_json``) the value
    as JSON text that encodes back to them."""
    text = json_text(row.data) if as_json and not encrypted else None
    header: dict[str, Any] = {"task_id": row.task_id, "task_name": row.task_name, "kind": row.kind}
    if text is not None:
        header["json"] = True
    elif encrypted:
        header["value"] = ENCRYPTED
    else:
        try:
            header["value"] = safe_render(codec.loads(row.data))
        except SerializationError:
            header["value"] = {"$error": "cannot render"}
    header.update(size=len(row.data), crc32=write_crc(checkpoint_id, row))
    line = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return line + b"\n" + (row.data if text is None else text)


def store_writes(
    ns_dir: str,
    checkpoint_id: str,
    writes: Sequence[WriteRow],
    codec: Serializer,
    formats: tuple[bool, bool],
) -> None:
    """Write files of a checkpoint's pending writes: a new one goes last; one with the key of
    a stored one replaces it in its place. ``formats``: (encrypted, values as JSON)."""
    folder = disk.writes_dir(ns_dir, checkpoint_id)
    disk.make_dirs(folder)
    by_key: dict[str, str] = {}
    last = 0
    for name in disk.visible_names(folder):
        seq, _, rest = name.partition("-")
        if seq.isdigit():
            last = max(last, int(seq))
            by_key[rest.rsplit("-", 1)[-1].partition(".")[0]] = name
    for w in writes:
        key = disk.write_key(w.task_id, w.kind)
        found = by_key.get(key)
        if found is None:
            last += 1
            found = by_key[key] = f"{last:06d}-{disk.encode_name(w.kind, 24)}-{key}.write"
        data = write_record(checkpoint_id, w, codec, *formats)
        disk.write_file(os.path.join(folder, found), data, sync_dir=False)
    disk.fsync_dir(folder)


def read_writes(ns_dir: str, checkpoint_id: str, *, data: bool = True) -> list[WriteRow]:
    """A checkpoint's pending writes, in saved order (``data`` false: without their values)."""
    folder = disk.writes_dir(ns_dir, checkpoint_id)
    out: list[WriteRow] = []
    for name in sorted(disk.visible_names(folder), key=_seq):
        path = os.path.join(folder, name)
        try:
            raw = read_all(path)
        except FileNotFoundError:
            continue
        with _reading(f"a pending write of checkpoint {checkpoint_id}", path):
            line, _, payload = raw.partition(b"\n")
            header = json.loads(line)
            if not isinstance(header, dict):
                raise ValueError("the header is not a JSON object")
            for field in ("task_id", "task_name", "kind"):
                if not isinstance(header.get(field), str):
                    raise ValueError(f"{field!r} is missing")
            row = WriteRow(header["task_id"], header["kind"], header["task_name"], b"")
            if data:
                intact = functools.partial(_write_intact, checkpoint_id, row)
                row.data = _value(header, payload, intact)
            out.append(row)
    return out


def _write_intact(checkpoint_id: str, row: WriteRow, value: bytes, crc: Any) -> bool:
    """Whether a write file's recorded ``crc`` is its ``value``'s (``seals.write_crc``; a
    CRC-32 of the value alone in files written before writes were tied to their checkpoint)."""
    found = WriteRow(row.task_id, row.kind, row.task_name, value)
    return crc in (write_crc(checkpoint_id, found), zlib.crc32(value))


def _seq(name: str) -> tuple[int, str]:
    """A write file's place: its name starts with its sequence number."""
    seq = name.partition("-")[0]
    return int(seq) if seq.isdigit() else 0, name


def damaged_head(thread_dir: str, head: str) -> ThreadRow | None:
    """A thread whose head row file is damaged, listed with no body: the core lists it as
    ``damaged`` (``None`` if even its namespace file cannot say which thread it is)."""
    try:
        info = disk.read_json(os.path.join(thread_dir, ROOT_NS_DIR, "namespace.json"))
        at = datetime.fromtimestamp(os.stat(thread_dir).st_mtime, UTC).isoformat()
        return ThreadRow(str(info["thread_id"]), "running", head, at, b"")
    except (OSError, ValueError, KeyError, TypeError):
        return None
