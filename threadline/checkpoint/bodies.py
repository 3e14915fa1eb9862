"""A checkpoint's row body and metadata: encoding, decoding, and reading a few fields raw.

The body is everything of a checkpoint but the values its blobs hold: a plain msgpack list
(``BODY_TAG``), or in a compact form (``COMPACT_TAG``) without what the row keeps in its own
columns, for backends that give those back when decoding. ``body_versions`` and ``body_next``
read the versions and planned task names of a stored body at the msgpack level, leaving typed
values as opaque bytes, so pruning and listing threads never need the classes inside values
registered (and never decode what they do not need).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import ormsgpack

from threadline import serde
from threadline.checkpoint.base import Checkpoint, PlannedTask
from threadline.checkpoint.seals import open_body, unsealed_body
from threadline.errors import SerializationError
from threadline.serde import Serializer

BODY_TAG = "cp2"
"""First item of a body: ``[BODY_TAG, id, parent_id, step, created_at, versions, next,
barriers, updated_by, (inline)]``. Plain lists in a fixed order: about 120 bytes smaller than
the typed record (no class or field names) and faster to encode and decode."""

COMPACT_TAG = 3
"""First item of a compact body: ``[COMPACT_TAG, versions, next, barriers, updated_by,
(inline)]``, where a version equal to the checkpoint's own id (a value it changed) is nil and
a planned task without argument that is not a ``Send`` is its name alone."""

RowFields = tuple[str, str | None, int, str]
"""What a compact body leaves to its row: ``(id, parent_id, step, created_at)``."""


def encode_body(
    cp: Checkpoint,
    codec: Serializer = serde.DEFAULT,
    inline: Mapping[str, Any] | None = None,
    compact: bool = False,
) -> bytes:
    """A checkpoint's row body: everything but its values (they live in blobs), except the
    ``inline`` ones, which come last."""
    planned: list[Any] = []
    if compact:
        own = cp.id
        for t in cp.next:  # a loop: a comprehension's frame costs more here
            planned.append(t.name if t.arg is None and not t.send else [t.name, t.arg, t.send])
        versions = {key: None if v == own else v for key, v in cp.versions.items()}
        body: list[Any] = [COMPACT_TAG, versions, planned]
    else:
        for t in cp.next:
            planned.append([t.name, t.arg, t.send])
        body = [BODY_TAG, cp.id, cp.parent_id, cp.step, cp.created_at, cp.versions, planned]
    body.append({key: list(names) for key, names in cp.barriers.items()} if cp.barriers else {})
    body.append(list(cp.updated_by))
    if inline:
        body.append(plain(inline))
    return dumps_named(body, codec, "checkpoint {}", cp.id)


def encode_metadata(
    metadata: Mapping[str, Any],
    checkpoint_id: str,
    codec: Serializer = serde.DEFAULT,
    step: int | None = None,
) -> bytes:
    """The stored metadata. Given the ``step`` its row keeps, the metadata the loop gives most
    checkpoints (``loop_metadata(step)``, keys in that order) is stored as no bytes."""
    if step is not None and _is_loop_metadata(metadata, step):
        return b""
    return dumps_named(plain(metadata), codec, "the metadata of checkpoint {}", checkpoint_id)


def loop_metadata(step: int) -> dict[str, Any]:
    """The metadata of a step the loop ran, in a root graph with no metadata of its own."""
    return {"source": "loop", "step": step, "parents": {}}


def _is_loop_metadata(metadata: Mapping[str, Any], step: int) -> bool:
    """Exactly ``loop_metadata(step)``: same keys in the same order, values of the same types
    (``True`` equals ``1``, but would not come back as ``True``)."""
    if type(metadata) is not dict or tuple(metadata) != ("source", "step", "parents"):
        return False
    source, at, parents = metadata.values()
    return (
        type(source) is str
        and source == "loop"
        and type(at) is int
        and at == step
        and type(parents) is dict
        and not parents
    )


def _from_body(body: list[Any], row: RowFields | None) -> Checkpoint:
    """The checkpoint of a body (a compact one given its ``row``); ``values``: the inline ones."""
    if body[0] == BODY_TAG:
        own, parent_id, step, created_at = body[1:5]
        at, versions = 5, body[5]
    elif row is not None:
        own, parent_id, step, created_at = row
        at, versions = 1, {key: own if v is None else v for key, v in body[1].items()}
    else:
        raise ValueError("a compact body needs its row")
    next_, barriers, updated_by = body[at + 1 : at + 4]
    inline = body[at + 4] if len(body) > at + 4 else {}
    if type(inline) is not dict or not inline.keys() <= versions.keys():
        raise ValueError("its inline values are not a dict of versioned keys")
    return Checkpoint(
        own,
        parent_id,
        step,
        inline,
        versions,
        tuple(PlannedTask(t) if type(t) is str else PlannedTask(t[0], t[1], t[2]) for t in next_),
        created_at,
        {key: tuple(names) for key, names in barriers.items()} if barriers else {},
        tuple(updated_by),
    )


def plain(mapping: Mapping[str, Any]) -> dict[str, Any]:
    return mapping if type(mapping) is dict else dict(mapping)


def dumps_named(obj: Any, codec: Serializer, what: str, *args: Any) -> bytes:
    """Encode ``obj``; a failure's message says what failed (``what`` formatted with ``args``,
    only then), its path stays relative to it."""
    try:
        return codec.dumps(obj)
    except SerializationError as exc:
        message = f"{what.format(*args)}: {exc}"
        raise SerializationError(message, path=exc.path, type_name=exc.type_name) from exc


def loads_named(data: bytes, what: str, codec: Serializer) -> Any:
    try:
        return codec.loads(data)
    except SerializationError as exc:
        raise SerializationError(
            f"cannot load {what}: {exc}", path=exc.path, type_name=exc.type_name
        ) from exc


def decode_checkpoint(
    body: bytes,
    values: dict[str, Any],
    codec: Serializer = serde.DEFAULT,
    row: RowFields | None = None,
) -> Checkpoint:
    """The checkpoint of a body; a compact one needs its ``row``'s fields."""
    stored = loads_named(body, "a checkpoint", codec)
    tag = stored[0] if isinstance(stored, list) and stored else None
    if tag != BODY_TAG and (tag != COMPACT_TAG or row is None):
        raise SerializationError(f"stored checkpoint decoded to {type(stored).__name__}")
    try:
        cp = _from_body(stored, row)
    except (TypeError, ValueError, AttributeError) as exc:
        raise SerializationError(f"a stored checkpoint is malformed: {exc}") from exc
    return dataclasses.replace(cp, values={**cp.values, **values})


def decode_metadata(
    data: bytes, codec: Serializer = serde.DEFAULT, step: int | None = None
) -> dict[str, Any]:
    """Stored metadata; given its row's ``step`` it may be no bytes (see ``encode_metadata``)."""
    if not data and step is not None:
        return loop_metadata(step)
    value = loads_named(data, "checkpoint metadata", codec)
    return dict(value) if value is not None else {}


def blob_versions(cp: Checkpoint) -> dict[str, str]:
    """The versions of the values of a decoded ``cp`` that live in blobs (not inline)."""
    if not cp.values:
        return cp.versions
    return {key: version for key, version in cp.versions.items() if key not in cp.values}


# ------------------------------------------------------------------- raw msgpack

_PLAIN_HEADER = b"\x01\x00"  # serde format version 1, no flags (no compression, no encryption)


def _raw_body(body: bytes) -> tuple[Any, Any, Any] | None:
    """``(versions, planned tasks, inline values)`` of a plain body, typed values left as opaque
    bytes; ``None`` if the body is compressed, sealed or not a body. A compact body's own
    versions are still nil."""
    if body[:2] != _PLAIN_HEADER:
        return None
    stored = ormsgpack.unpackb(body[2:], ext_hook=lambda code, data: data)
    if type(stored) is not list or not stored:
        return None
    at = 5 if stored[0] == BODY_TAG else 1 if stored[0] == COMPACT_TAG else 0
    if not at or len(stored) < at + 4:
        return None
    return stored[at], stored[at + 1], stored[at + 4] if len(stored) > at + 4 else None


def body_versions(
    body: bytes, checkpoint_id: str | None = None, codec: serde.Serializer = serde.DEFAULT
) -> dict[str, str] | None:
    """The versions of the values a stored checkpoint body keeps in blobs (not those it holds
    inline), or ``None`` if it cannot be read. A compact body needs its ``checkpoint_id``; a
    compressed or sealed one the ``codec`` that wrote it. Given the ``checkpoint_id``, a body
    that fails its seal (``seals``) cannot be read: pruning then keeps every blob."""
    try:
        body = open_body(checkpoint_id, body, "") if checkpoint_id else unsealed_body(body)
    except SerializationError:
        return None
    try:
        stored = _raw_body(body)
        if stored is not None:
            versions, _, inline = stored
            held = inline if type(inline) is dict else {}
            versions = {
                k: checkpoint_id if v is None else v for k, v in versions.items() if k not in held
            }
            if all(type(v) is str for v in versions.values()):
                return versions
    except Exception:
        pass
    row = (checkpoint_id, None, 0, "") if checkpoint_id is not None else None
    try:
        return blob_versions(decode_checkpoint(body, {}, codec, row))
    except SerializationError:
        return None


def body_next(body: bytes, codec: serde.Serializer = serde.DEFAULT) -> tuple[str, ...]:
    """The names of the tasks a stored checkpoint body plans (their arguments left undecoded,
    so a ``Send`` payload of an unregistered class does not keep a thread out of a listing).
    A sealed body (``seals``) should be opened, and so checked, first."""
    body = unsealed_body(body)
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
