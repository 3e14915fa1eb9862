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
from threadline.checkpoint.layout import BODY_TAG, wanted_blobs
from threadline.errors import SerializationError

_PLAIN_HEADER = b"\x01\x00"  # serde format version 1, no flags (no compression, no encryption)


def _raw_body(body: bytes) -> list[Any] | None:
    """The items of a plain body, typed values left as opaque ext objects; ``None`` if the body
    is compressed, sealed or not a body."""
    if body[:2] != _PLAIN_HEADER:
        return None
    stored = ormsgpack.unpackb(body[2:], ext_hook=lambda code, data: data)
    if type(stored) is list and len(stored) >= 9 and stored[0] == BODY_TAG:
        return stored
    return None


def body_versions(body: bytes) -> dict[str, str] | None:
    """The versions of the values a stored checkpoint body keeps in blobs (not those it holds
    inline), or ``None`` if it cannot be read."""
    try:
        stored = _raw_body(body)
        if stored is not None:
            versions = stored[5]  # see layout._body
            if len(stored) > 9 and type(stored[9]) is dict:
                versions = {k: v for k, v in versions.items() if k not in stored[9]}
            if type(versions) is dict and all(type(v) is str for v in versions.values()):
                return versions
    except Exception:
        pass
    try:
        _, refs = wanted_blobs(body)
    except SerializationError:
        return None
    return dict(refs)


def body_next(body: bytes, codec: serde.Serializer = serde.DEFAULT) -> tuple[str, ...]:
    """The names of the tasks a stored checkpoint body plans (their arguments left undecoded,
    so a ``Send`` payload of an unregistered class does not keep a thread out of a listing)."""
    try:
        stored = _raw_body(body)
        if stored is not None:
            names = tuple(task[0] for task in stored[6])  # see layout._body
            if all(type(n) is str for n in names):
                return names
    except Exception:
        pass
    cp, _ = wanted_blobs(body, codec)
    return tuple(t.name for t in cp.next)
