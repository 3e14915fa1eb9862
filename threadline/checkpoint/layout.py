"""How durable savers lay a checkpoint out: one small row, plus one blob per changed value.

The checkpoint row holds everything but the values; its ``versions`` name, for each key, the
blob that holds the key's value. A value that did not change keeps its version, so it is not
written again: a 10 MB value set once is stored once.

A list that grew by appending (a conversation) is stored as a **delta**: only the new items,
pointing at the blob it extends. Deltas form a chain that starts at a full blob; a new full blob
is written when the chain's deltas outweigh ``COMPACT_RATIO`` times that full blob. For a list
that grows steadily this bounds storage to about 2.5x the list's final size (each item once in a
delta, plus full blobs of geometrically growing size), against O(n^2) when every step rewrites
the list. Loading a chained value reads its chain in one query and concatenates.

Backends (SQLite, PostgreSQL, Redis, files) store these rows as they are; the functions here do
all encoding, decoding and compaction decisions, so every backend stores the same bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from threadline import serde
from threadline.checkpoint.base import Checkpoint, CheckpointRecord, StorageHints, TaskWrite
from threadline.errors import SerializationError
from threadline.serde import Serializer

#: A chain gets a new full blob once its deltas would exceed this many times the last full one.
COMPACT_RATIO = 2.0


@dataclass(frozen=True, slots=True)
class BlobRow:
    """One stored value: full (``base is None``) or the items appended since ``base``."""

    key: str
    version: str
    start: str  # version of the full blob this chain starts at (itself, for a full blob)
    base: str | None
    chain_bytes: int  # bytes of the chain's deltas up to and including this one
    full_bytes: int  # bytes of the chain's full blob
    data: bytes


@dataclass(frozen=True, slots=True)
class WriteRow:
    """A pending write ready to store: its key and task name in the clear, its value as bytes."""

    task_id: str
    kind: str
    task_name: str
    data: bytes


@dataclass(frozen=True, slots=True)
class CheckpointRow:
    """The checkpoint without its values, plus what backends index on."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    created_at: str
    body: bytes
    metadata: bytes


@dataclass(frozen=True, slots=True)
class EncodedCheckpoint:
    row: CheckpointRow
    blobs: tuple[BlobRow, ...]
    writes: tuple[WriteRow, ...]


BaseLookup = Callable[[str, str], BlobRow | None]
"""``(key, version) -> BlobRow`` (``data`` may be empty) of an already stored blob, or None."""


# ----------------------------------------------------------------------------------- encoding
def encode_record(
    record: CheckpointRecord, base_of: BaseLookup, codec: Serializer = serde.DEFAULT
) -> EncodedCheckpoint:
    """Encode a record; raises ``SerializationError`` before anything is stored."""
    cp = record.checkpoint
    hints = record.hints
    keys = hints.changed if hints is not None else cp.values.keys()
    extends = hints.extends if hints is not None else {}
    unversioned = sorted(k for k in cp.values if k not in cp.versions)
    if unversioned:
        raise SerializationError(
            f"checkpoint {cp.id} has a value but no version for key {unversioned[0]!r}: "
            "values are stored under their versions, so every key needs one"
        )
    blobs = tuple(
        _blob(key, cp.values[key], cp.versions[key], extends.get(key), base_of, codec)
        for key in sorted(keys)
        if key in cp.values
    )
    body = _dumps(_without_values(cp), f"checkpoint {cp.id}", codec)
    row = CheckpointRow(
        checkpoint_id=cp.id,
        parent_id=cp.parent_id,
        step=cp.step,
        created_at=cp.created_at,
        body=body,
        metadata=_dumps(dict(record.metadata), f"the metadata of checkpoint {cp.id}", codec),
    )
    return EncodedCheckpoint(row, blobs, encode_writes(record.pending_writes, codec))


def _without_values(cp: Checkpoint) -> Checkpoint:
    """The checkpoint as its row stores it: values live in blobs (built directly: hot path)."""
    return Checkpoint(
        cp.id,
        cp.parent_id,
        cp.step,
        {},
        cp.versions,
        cp.next,
        cp.created_at,
        cp.barriers,
        cp.updated_by,
    )


def _blob(
    key: str,
    value: Any,
    version: str,
    extends: tuple[str, int] | None,
    base_of: BaseLookup,
    codec: Serializer,
) -> BlobRow:
    if extends is not None:
        base_version, base_len = extends
        base = base_of(key, base_version)
        if base is not None and isinstance(value, list) and 0 <= base_len <= len(value):
            delta = _delta(key, value, base_len, version, base, codec)
            if delta is not None:
                return delta
    data = codec.dumps(value, path_prefix=key)
    return BlobRow(key, version, version, None, 0, len(data), data)


def _delta(
    key: str, value: list[Any], base_len: int, version: str, base: BlobRow, codec: Serializer
) -> BlobRow | None:
    try:
        data = codec.dumps(value[base_len:])
    except SerializationError:
        codec.dumps(value, path_prefix=key)  # raises with the path inside the whole list
        raise
    chain_bytes = base.chain_bytes + len(data)
    if chain_bytes > COMPACT_RATIO * base.full_bytes:
        return None  # time for a new full blob
    return BlobRow(key, version, base.start, base.version, chain_bytes, base.full_bytes, data)


def encode_writes(
    writes: Iterable[TaskWrite], codec: Serializer = serde.DEFAULT
) -> tuple[WriteRow, ...]:
    return tuple(
        WriteRow(
            w.task_id,
            w.kind,
            w.task_name,
            _dumps(w.value, f"the {w.kind!r} write of task {w.task_name!r}", codec),
        )
        for w in writes
    )


def _dumps(obj: Any, what: str, codec: Serializer) -> bytes:
    """Encode ``obj``; a failure's message says what failed, its path stays relative to it."""
    try:
        return codec.dumps(obj)
    except SerializationError as exc:
        raise SerializationError(f"{what}: {exc}", path=exc.path, type_name=exc.type_name) from exc


def full_blobs(
    record: CheckpointRecord, keys: Iterable[str], codec: Serializer = serde.DEFAULT
) -> tuple[BlobRow, ...]:
    """Full blobs of ``keys``' values, for values whose hinted blob turned out not to exist.

    Raises ``SerializationError`` when the checkpoint names a version it has no value for.
    """
    cp = record.checkpoint
    keys = sorted(set(keys))
    for key in keys:
        if key not in cp.values:
            raise SerializationError(
                f"checkpoint {cp.id} names version {cp.versions.get(key)!r} of key {key!r}, "
                "which is not stored, and carries no value for it; nothing was written"
            )
    sub = dataclasses.replace(record, pending_writes=(), hints=StorageHints(frozenset(keys)))
    return encode_record(sub, lambda key, version: None, codec).blobs


# ----------------------------------------------------------------------------------- decoding
def decode_checkpoint(
    body: bytes, values: dict[str, Any], codec: Serializer = serde.DEFAULT
) -> Checkpoint:
    cp = _loads(body, "a checkpoint", codec)
    if not isinstance(cp, Checkpoint):
        raise SerializationError(f"stored checkpoint decoded to {type(cp).__name__}")
    return dataclasses.replace(cp, values=values)


def decode_metadata(data: bytes, codec: Serializer = serde.DEFAULT) -> dict[str, Any]:
    value = _loads(data, "checkpoint metadata", codec)
    return dict(value) if value is not None else {}


def decode_write(row: WriteRow, codec: Serializer = serde.DEFAULT) -> TaskWrite:
    value = _loads(row.data, f"the {row.kind!r} write of task {row.task_name!r}", codec)
    return TaskWrite(row.task_id, row.task_name, row.kind, value)  # type: ignore[arg-type]


def wanted_blobs(
    body: bytes, codec: Serializer = serde.DEFAULT
) -> tuple[Checkpoint, list[tuple[str, str]]]:
    """The checkpoint (without values) and the ``(key, version)`` blobs its values live in."""
    cp = decode_checkpoint(body, {}, codec)
    return cp, list(cp.versions.items())


def assemble_values(
    versions: Mapping[str, str],
    rows: Mapping[tuple[str, str], BlobRow],
    chains: Mapping[tuple[str, str], Sequence[BlobRow]],
    codec: Serializer = serde.DEFAULT,
) -> dict[str, Any]:
    """Rebuild the values from their blobs; ``chains[(key, start)]`` holds the rows of a chain.

    Chains are walked through ``base`` pointers, so rows of other branches sharing the chain
    (after a fork) are ignored.
    """
    values: dict[str, Any] = {}
    for key, version in versions.items():
        row = rows.get((key, version))
        if row is None:
            raise SerializationError(
                f"the stored value of key {key!r} (version {version}) is missing"
            )
        if row.base is None:
            values[key] = _loads(row.data, f"the value of key {key!r}", codec)
        else:
            values[key] = _walk_chain(key, row, chains.get((key, row.start), ()), codec)
    return values


def chains_needed(rows: Iterable[BlobRow]) -> list[tuple[str, str]]:
    """``(key, start)`` of the chains that the delta rows among ``rows`` belong to."""
    return sorted({(r.key, r.start) for r in rows if r.base is not None})


def _walk_chain(key: str, head: BlobRow, chain: Sequence[BlobRow], codec: Serializer) -> list[Any]:
    by_version = {r.version: r for r in chain}
    by_version[head.version] = head
    parts: list[BlobRow] = []
    row: BlobRow | None = head
    while row is not None and row.base is not None:
        parts.append(row)
        row = by_version.get(row.base)
    if row is None:
        raise SerializationError(
            f"the stored history of key {key!r} is incomplete (a delta lost its base)"
        )
    items = _loads(row.data, f"the value of key {key!r}", codec)
    if not isinstance(items, list):
        raise SerializationError(f"the stored value of key {key!r} is not a list: corrupted?")
    for part in reversed(parts):
        delta = _loads(part.data, f"a delta of key {key!r}", codec)
        if not isinstance(delta, list):
            raise SerializationError(f"a stored delta of key {key!r} is not a list: corrupted?")
        items.extend(delta)
    return items


def _loads(data: bytes, what: str, codec: Serializer) -> Any:
    try:
        return codec.loads(data)
    except SerializationError as exc:
        raise SerializationError(
            f"cannot load {what}: {exc}", path=exc.path, type_name=exc.type_name
        ) from exc


def referenced_blobs(
    checkpoints: Iterable[Checkpoint], rows: Mapping[tuple[str, str], BlobRow]
) -> set[tuple[str, str]]:
    """Every ``(key, version)`` the given checkpoints need, chains included (for pruning)."""
    needed: set[tuple[str, str]] = set()
    for cp in checkpoints:
        for key, version in cp.versions.items():
            ref: str | None = version
            while ref is not None and (key, ref) not in needed:
                needed.add((key, ref))
                row = rows.get((key, ref))
                ref = row.base if row is not None else None
    return needed
