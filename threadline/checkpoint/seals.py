"""Checksums that tie a stored checkpoint row or pending write to where it belongs.

A backend that stores rows as opaque bytes a person or a disk can damage (SQLite, PostgreSQL,
Redis: ``Backend.sealed``) gets them *sealed* by the core: a marker byte and CRC-32s in front
of the bytes, checked before anything in them is used. A damaged byte, a truncated or replaced
record, or one copied from another checkpoint or thread then fails as ``CorruptedDataError``
instead of loading a wrong value (or advising an upgrade).

- A checkpoint row's body: ``SEALED, crc(id, body), crc(id, parent, step, time, metadata),
  body``. Two CRCs, so ``list_threads``, which reads only a head's id and body, checks what it
  reads; a load checks both, so the row's own columns are covered too.
- A pending write's data: ``SEALED, crc(checkpoint id, task id, kind, task name, data), data``;
  any other record the same way (``seal``: a cache entry, bound to its namespace and key).

The marker is ``ELIDED`` instead when the bytes start with the plain serde header
(``wire.PLAIN_HEADER``, neither compressed nor sealed: nearly always), which is then left out:
a seal costs 7 bytes a row and 3 a write. The CRCs cover the bytes with their header.

Records written without a seal (storage written before seals, or by a backend that keeps its
own checksums: files, memory) start with the serde format version (``wire.FORMAT_VERSION``);
they are read as they are, but only if their serde header is one this threadline reads: a
record that is neither sealed nor such cannot be a newer threadline's (that one seals), so it
is damaged. A blob row stores its CRC-32 (``blob_crc``) in its own column or header, where
the server can compare it with what the saver holds; it too covers where the row belongs.
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from threadline.errors import CorruptedDataError
from threadline.serde import wire

if TYPE_CHECKING:  # layout imports bodies, which opens bodies here
    from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow

SEALED = 0xC1
"""First byte of a sealed record: msgpack's "never used" byte, never a serde format version."""
ELIDED = 0xC2
"""First byte of a sealed record whose bytes had the plain serde header, left out."""
BODY_SEAL = 9  # marker + two CRC-32s
SEAL = 5  # marker + one CRC-32: a write, a cache entry
_MARKS = (SEALED, ELIDED)


def crc_of(data: bytes, *fields: object) -> int:
    """CRC-32 of ``fields`` (text, NUL-separated) then ``data``."""
    head = "\0".join("" if f is None else str(f) for f in fields) + "\0"
    return zlib.crc32(data, zlib.crc32(head.encode("utf-8", "surrogatepass")))


def _crc(data: bytes, *fields: object) -> bytes:
    return crc_of(data, *fields).to_bytes(4, "big")


def blob_crc(row: BlobRow) -> int:
    """The CRC-32 a blob row with data stores (each backend in its own column or header): of
    its key, version and chain fields, then its data. A row moved to another version, key or
    thread, or with a changed field (``base``, ``items``...), fails it as well as changed
    data. Prefix rows hold no data and store no CRC."""
    r = row
    return crc_of(r.data, r.key, r.version, r.start, r.base, r.chain_bytes, r.full_bytes, r.items)


def blob_intact(row: BlobRow, crc: int) -> bool:
    """Whether a stored blob ``row`` matches the ``crc`` stored with it. A CRC-32 of the data
    alone is the one rows written before ``blob_crc`` covered their fields store."""
    return crc == blob_crc(row) or crc == zlib.crc32(row.data)


def _row_crc(row: CheckpointRow) -> bytes:
    return _crc(row.metadata, row.checkpoint_id, row.parent_id, row.step, row.created_at)


def _wrap(data: bytes, crcs: bytes) -> bytes:
    if data[:2] == wire.PLAIN_HEADER:
        return bytes((ELIDED,)) + crcs + data[2:]
    return bytes((SEALED,)) + crcs + data


def _inner(data: bytes, seal: int) -> bytes:
    """The bytes a sealed record wraps (its header put back if it was left out)."""
    return wire.PLAIN_HEADER + data[seal:] if data[0] == ELIDED else data[seal:]


def seal_row(row: CheckpointRow) -> CheckpointRow:
    """``row`` with its body sealed (in place: rows are built fresh for each put)."""
    body = row.body
    row.body = _wrap(body, _crc(body, row.checkpoint_id) + _row_crc(row))
    return row


def write_crc(checkpoint_id: str, write: WriteRow) -> int:
    """The CRC-32 of a pending write: of the checkpoint, task, kind and name, then its data."""
    return crc_of(write.data, checkpoint_id, write.task_id, write.kind, write.task_name)


def seal(data: bytes, *fields: object) -> bytes:
    """``data`` sealed to ``fields`` (what says where it belongs): a marker and one CRC-32."""
    return _wrap(data, _crc(data, *fields))


def unseal(data: bytes, what: str, *fields: object) -> bytes:
    """The bytes inside what ``seal(data, *fields)`` made, checked; ``what`` names the record
    in the error. Bytes without a seal are returned as they are if they can be serde data."""
    if not data or data[0] not in _MARKS:
        return _unsealed(data, what)
    inner = _inner(data, SEAL)
    if len(data) < SEAL or data[1:5] != _crc(inner, *fields):
        raise _damaged(what)
    return inner


def seal_write(checkpoint_id: str, write: WriteRow) -> WriteRow:
    """``write`` with its data sealed to the checkpoint it belongs to (in place, as rows)."""
    write.data = seal(write.data, checkpoint_id, write.task_id, write.kind, write.task_name)
    return write


def open_body(checkpoint_id: str, body: bytes, what: str) -> bytes:
    """The body inside a stored ``body`` whose row is ``checkpoint_id``, its first CRC checked
    (``list_threads`` has no more of the row); ``what`` names the row in the error."""
    if not body or body[0] not in _MARKS:
        return _unsealed(body, what)
    inner = _inner(body, BODY_SEAL)
    if len(body) < BODY_SEAL or body[1:5] != _crc(inner, checkpoint_id):
        raise _damaged(what)
    return inner


def open_row(row: CheckpointRow, what: str) -> bytes:
    """The body inside a stored ``row``, both CRCs checked (columns and metadata too)."""
    body = open_body(row.checkpoint_id, row.body, what)
    if row.body[0] in _MARKS and row.body[5:9] != _row_crc(row):
        raise _damaged(what)
    return body


def open_write(checkpoint_id: str, write: WriteRow, what: str) -> bytes:
    """The value bytes inside a stored ``write`` of ``checkpoint_id``, checked."""
    w = write
    return unseal(w.data, what, checkpoint_id, w.task_id, w.kind, w.task_name)


def unsealed_body(body: bytes) -> bytes:
    """The body inside ``body``, unchecked: for reads that only pick fields out of it (pruning
    decides which blobs a checkpoint uses; a damaged body reads as unreadable there)."""
    return _inner(body, BODY_SEAL) if body[:1] and body[0] in _MARKS else body


def unsealed_write(data: bytes) -> bytes:
    """The value bytes inside a write's ``data``, unchecked: for finding a blob's bytes in a
    write (PostgreSQL stores a run's input once), which the blob's own CRC-32 then checks."""
    return _inner(data, SEAL) if data[:1] and data[0] in _MARKS else data


def _unsealed(data: bytes, what: str) -> bytes:
    """A record without a seal: readable only with a serde header this threadline writes."""
    if len(data) < wire.HEADER_SIZE or data[0] != wire.FORMAT_VERSION:
        raise _damaged(what)
    if data[1] & ~wire.KNOWN_FLAGS:
        raise _damaged(what)
    return data


def _damaged(what: str) -> CorruptedDataError:
    return CorruptedDataError(
        f"{what} is corrupted: its checksum does not match (or it is not a record threadline "
        "wrote). Nothing was changed; restore the storage from a backup, or delete the thread "
        "or continue from an earlier checkpoint"
    )
