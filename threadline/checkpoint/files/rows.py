"""What the files of a thread's folder hold: a backend row as bytes on disk, and back.

A row file shows its checkpoint as JSON (``row_file``) and keeps the exact bytes only when
those fields do not make them again (``_rebuilt``); a blob file is a JSON header line and the
value (``blob_file``), and so is a write file (``write_file``). Each keeps a CRC-32 of its
bytes, checked when read (``ValueError`` on a mismatch: the caller names the file).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from contextlib import suppress
from typing import Any

from threadline.checkpoint.base import Checkpoint, PlannedTask
from threadline.checkpoint.bodies import (
    decode_checkpoint,
    decode_metadata,
    encode_body,
    encode_metadata,
)
from threadline.checkpoint.files.disk import b64, json_bytes, unb64
from threadline.checkpoint.files.preview import safe_render
from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow
from threadline.errors import SerializationError
from threadline.serde import DEFAULT, Serializer
from threadline.serde import _format as fmt

ENCRYPTED = "(encrypted)"  # what a readable field shows when the codec seals values


def checksum(data: bytes) -> dict[str, int]:
    """The checksum a file keeps of its bytes: a CRC-32, as the other savers keep."""
    return {"crc32": zlib.crc32(data)}


def checks(fields: Mapping[str, Any], data: bytes) -> bool:
    return fields.get("crc32") == zlib.crc32(data)


def _row_bytes(row: CheckpointRow) -> bytes:
    """What a row file's checksum covers: the fields a compact body leaves to the row, then
    the body and metadata bytes."""
    fields = [row.checkpoint_id, row.parent_id, row.step, row.created_at]
    return json.dumps(fields).encode("utf-8", "surrogatepass") + row.body + row.metadata


# -- checkpoint rows -----------------------------------------------------------------------------


def row_file(row: CheckpointRow, codec: Serializer, encrypted: bool) -> bytes:
    """A row file: the checkpoint's fields as JSON, its exact bytes too unless ``_rebuilt``
    makes them again from those fields."""
    doc: dict[str, Any] = {
        "checkpoint_id": row.checkpoint_id,
        "parent_id": row.parent_id,
        "step": row.step,
        "created_at": row.created_at,
    }
    with suppress(SerializationError):  # not readable with this codec: the bytes alone
        doc.update(_readable(row, codec, encrypted))
    stored: dict[str, Any] = checksum(_row_bytes(row))
    if encrypted or _rebuilt(doc) != (row.body, row.metadata):
        stored = {"body": b64(row.body), "metadata": b64(row.metadata), **stored}
    return json_bytes({**doc, "stored": stored})


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
    if cp.values:  # the small scalars the body holds (no blob has them)
        doc["values"] = ENCRYPTED if encrypted else _shown(cp.values)
    return doc


def _shown(inline: Mapping[str, Any]) -> dict[str, Any]:
    """Inline values as they are where JSON shows them exactly (numbers, booleans, None, text),
    else a rendering (``"<3 bytes>"``, ``"nan"``) ``_rebuilt`` does not turn back into the body,
    so the row keeps its bytes too."""
    return {key: safe_render(value) for key, value in inline.items()}


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


def read_row(raw: bytes, checkpoint_id: str) -> CheckpointRow:
    """The row a row file holds; ``ValueError`` (or ``KeyError``, ``TypeError``) if damaged."""
    doc = json.loads(raw)
    stored = doc["stored"]
    if "body" in stored:
        body, metadata = unb64(stored["body"]), unb64(stored["metadata"])
    else:
        rebuilt = _rebuilt(doc)
        if rebuilt is None:
            raise ValueError("its fields do not make a checkpoint")
        body, metadata = rebuilt
    if doc["checkpoint_id"] != checkpoint_id:
        raise ValueError(f"it holds checkpoint {doc['checkpoint_id']!r}")
    parent, step, created_at = doc["parent_id"], doc["step"], doc["created_at"]
    if not (parent is None or type(parent) is str) or type(step) is not int:
        raise ValueError("its parent or step is malformed")
    row = CheckpointRow(checkpoint_id, parent, step, str(created_at), body, metadata)
    if not checks(stored, _row_bytes(row)):
        raise ValueError("checksum mismatch")
    return row


# -- blobs ---------------------------------------------------------------------------------------


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


def blob_file(blob: BlobRow, text: bytes | None = None) -> bytes:
    """A blob file: one JSON line with the row's fields, size and CRC-32, then the bytes, or
    (``"json": true``) the value as JSON text that encodes back to them (``json_text``).

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
        **checksum(blob.data),
    }
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


def read_blob(header_line: bytes, payload: bytes | None, key: str, version: str) -> BlobRow:
    """The row of a blob file (``payload`` ``None``: its header only); ``ValueError`` (or
    ``KeyError``, ``TypeError``, ``SerializationError``) if damaged."""
    header = json.loads(header_line)
    if header["key"] != key or header["version"] != version:
        raise ValueError(f"it holds key {header['key']!r} version {header['version']!r}")
    if payload is None:
        return blob_row(header, b"")
    if header.get("json") is True:
        payload = DEFAULT.dumps(json.loads(payload))
    if len(payload) != header["size"]:
        raise ValueError(f"{len(payload)} bytes instead of {header['size']}")
    if not checks(header, payload):
        raise ValueError("checksum mismatch")
    return blob_row(header, payload)


# -- pending writes ------------------------------------------------------------------------------


def write_file(row: WriteRow, codec: Serializer, encrypted: bool, as_json: bool) -> bytes:
    """A write file, laid out as a blob file: one JSON line (task, kind, a readable rendering
    of the value, size, CRC-32), then the value's bytes, or (``"json": true``, ``as_json``) the
    value as JSON text that encodes back to them."""
    text = json_text(row.data) if as_json and not encrypted else None
    header: dict[str, Any] = {"task_id": row.task_id, "task_name": row.task_name, "kind": row.kind}
    if text is not None:
        header["json"] = True
    else:
        header["value"] = ENCRYPTED if encrypted else _rendered(row.data, codec)
    header.update(size=len(row.data), **checksum(row.data))
    line = json.dumps(header, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return line + b"\n" + (row.data if text is None else text)


def _rendered(data: bytes, codec: Serializer) -> Any:
    try:
        return safe_render(codec.loads(data))
    except SerializationError:
        return {"$error": "cannot render"}


def read_write(raw: bytes, *, data: bool = True) -> WriteRow:
    """The row of a write file (``data`` false: its value's bytes left out)."""
    line, _, payload = raw.partition(b"\n")
    header = json.loads(line)
    if not isinstance(header, dict):
        raise ValueError("the header is not a JSON object")
    for field in ("task_id", "task_name", "kind"):
        if not isinstance(header.get(field), str):
            raise ValueError(f"{field!r} is missing")
    if data:
        if header.get("json") is True:
            payload = DEFAULT.dumps(json.loads(payload))
        if len(payload) != header["size"] or not checks(header, payload):
            raise ValueError("checksum mismatch")
    return WriteRow(
        header["task_id"], header["kind"], header["task_name"], payload if data else b""
    )
