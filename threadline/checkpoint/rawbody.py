"""Reading a few fields of a stored checkpoint body without decoding its values.

Collecting unused blobs and listing threads read the versions and planned task names of stored
bodies. Doing it at the msgpack level, leaving typed ext values as opaque bytes, means it never
needs the classes inside the values registered (and never decodes what it does not need). A
plain body is serde's format version 1: a 2-byte header, then msgpack (``layout._body``).
"""

from __future__ import annotations

from typing import Any

import ormsgpack

from threadline import serde
from threadline.checkpoint.layout import (
    BODY_TAG,
    COMPACT_TAG,
    blob_versions,
    decode_checkpoint,
)
from threadline.errors import SerializationError

_PLAIN_HEADER = b"\x01\x00"  # serde format version 1, no flags (no compression, no encryption)


def _raw_body(body: bytes) -> tuple[Any, Any, Any] | None:
    """``(versions, planned tasks, inline values)`` of a plain body, typed values left as opaque
    bytes; ``None`` if the body is compressed, sealed or not a body. A compact body's own
    versions are still nil (``layout.COMPACT_TAG``)."""
    if body[:2] != _PLAIN_HEADER:
        return None
    stored = ormsgpack.unpackb(body[2:], ext_hook=lambda code, data: data)
    if type(stored) is not list or not stored:
        return None
    if stored[0] == BODY_TAG and len(stored) >= 9:  # see layout._body
        return stored[5], stored[6], stored[9] if len(stored) > 9 else None
    if stored[0] == COMPACT_TAG and len(stored) >= 5:  # see layout._compact_body
        return stored[1], stored[2], stored[5] if len(stored) > 5 else None
    return None


def body_versions(body: bytes, checkpoint_id: str | None = None) -> dict[str, str] | None:
    """The versions of the values a stored checkpoint body keeps in blobs (not those it holds
    inline), or ``None`` if it cannot be read. A compact body needs its ``checkpoint_id``."""
    try:
        stored = _raw_body(body)
        if stored is not None:
            versions, _, inline = stored
            if type(inline) is dict:
                versions = {k: v for k, v in versions.items() if k not in inline}
            versions = {k: checkpoint_id if v is None else v for k, v in versions.items()}
            if type(versions) is dict and all(type(v) is str for v in versions.values()):
                return versions
    except Exception:
        pass
    row = (checkpoint_id, None, 0, "") if checkpoint_id is not None else None
    try:
        return blob_versions(decode_checkpoint(body, {}, serde.DEFAULT, row))
    except SerializationError:
        return None


def body_next(body: bytes, codec: serde.Serializer = serde.DEFAULT) -> tuple[str, ...]:
    """The names of the tasks a stored checkpoint body plans (their arguments left undecoded,
    so a ``Send`` payload of an unregistered class does not keep a thread out of a listing)."""
    try:
        stored = _raw_body(body)
        if stored is not None:
            names = tuple(t if type(t) is str else t[0] for t in stored[1])
            if all(type(n) is str for n in names):
                return names
    except Exception:
        pass
    cp = decode_checkpoint(body, {}, codec, ("", None, 0, ""))
    return tuple(t.name for t in cp.next)
