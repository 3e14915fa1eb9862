"""How savers lay a checkpoint out: one small row, plus one blob per changed value.

The checkpoint row holds everything but the values; its ``versions`` name, for each key, the
blob that holds the key's value. A value that did not change keeps its version and is not
written again. A list that grew by appending is stored as a **delta** (the new items, pointing
at the blob it extends); once a chain's deltas outweigh ``Compaction``'s share of its full blob,
the next version is written in full and the older versions of the chain become *prefix rows*
of it ("the first ``items`` items of version X"), so every item is stored about once. That is
safe because a version's value never changes. Small scalars (``inlined``) may instead live in
every checkpoint's row. The functions here do all encoding, decoding and compaction decisions,
so every backend stores the same bytes (docs/storage.md, "What a checkpoint stores").
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Set
from dataclasses import dataclass, field
from typing import Any

from threadline import serde
from threadline.checkpoint.base import Checkpoint, CheckpointRecord, TaskWrite
from threadline.checkpoint.bodies import (
    blob_versions,
    dumps_named,
    encode_body,
    encode_metadata,
    loads_named,
)
from threadline.checkpoint.changes import Append, changes_of
from threadline.errors import CorruptedDataError, SerializationError
from threadline.serde import Serializer


@dataclass(frozen=True, slots=True)
class Compaction:
    """When a chain gets a new full blob, and what becomes of the versions it grew from.

    A new full blob is written once the chain's deltas would exceed ``ratio`` times its full
    blob and ``min_chain_bytes``. ``rewrite_full``: the chain's old full blob becomes a prefix
    row too. A database that keeps deleted bytes until a vacuum (PostgreSQL: an updated row's
    TOAST stays dead until then) does better keeping old full blobs and rewriting only the
    small deltas, with fewer, larger steps between full blobs.
    """

    ratio: float = 0.1
    min_chain_bytes: int = 16 * 1024
    rewrite_full: bool = True


#: What SQLite, Redis and files do: each item stored about once.
REPLACE = Compaction()
#: Hops a value may take through prefix rows and deltas before the data is called corrupted
#: (a loop). Far above any real chain: PostgreSQL writes a full copy only after 1 MiB of deltas,
#: which a list growing by a few bytes a step takes a few hundred thousand steps to reach.
_MAX_HOPS = 10_000_000


@dataclass(slots=True)
class BlobRow:
    """One stored value, in one of three forms.

    - full: ``base is None``; ``data`` is the value.
    - delta: ``data`` holds the items appended to the value of version ``base``.
    - prefix: ``base`` names a later version and the value is its first ``items`` items;
      no data of its own (``chain_bytes == 0``). Written by compaction, see ``is_prefix``.

    A full row a saver holds decoded (``chains.HeldChains``) has ``value`` instead of data: it
    makes a new copy of the value at each call.
    """

    key: str
    version: str
    start: str  # version of the full blob this chain starts at (itself, for a full blob)
    base: str | None
    chain_bytes: int  # bytes of the chain's deltas up to and including this one
    full_bytes: int  # bytes of the chain's full blob
    data: bytes
    items: int | None = None  # length of the value, for a list (None: not a list, or unknown)
    value: Callable[[], Any] | None = None  # held rows only: the value, decoded

    @property
    def is_prefix(self) -> bool:
        """A delta always holds bytes (``chain_bytes > 0``); a prefix row holds none."""
        return self.base is not None and self.chain_bytes == 0

    def without_data(self) -> BlobRow:
        """This row's metadata only (what savers remember of stored blobs)."""
        if not self.data:
            return self
        b = self
        return BlobRow(b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, b"", b.items)

    def prefix_of(self, target: BlobRow) -> BlobRow:
        """This version rewritten as the first ``self.items`` items of ``target``."""
        return BlobRow(
            self.key,
            self.version,
            target.version,
            target.version,
            0,
            target.full_bytes,
            b"",
            self.items,
        )


@dataclass(slots=True)
class WriteRow:
    """A pending write ready to store: its key and task name in the clear, its value as bytes."""

    task_id: str
    kind: str
    task_name: str
    data: bytes


@dataclass(slots=True)
class CheckpointRow:
    """The checkpoint without its values, plus what backends index on."""

    checkpoint_id: str
    parent_id: str | None
    step: int
    created_at: str
    body: bytes
    metadata: bytes


@dataclass(slots=True)
class EncodedCheckpoint:
    """What a put stores: the row, new blobs, writes, and stored blobs to overwrite.

    ``prefixes`` replace existing rows of the same ``(key, version)`` (compaction); a backend
    writes them in the put's transaction, after ``blobs``.
    """

    row: CheckpointRow
    blobs: tuple[BlobRow, ...]
    writes: tuple[WriteRow, ...]
    prefixes: tuple[BlobRow, ...] = ()
    refs: dict[str, str] = field(default_factory=dict)  # versions of the values kept in blobs


BaseLookup = Callable[[str, str], BlobRow | None]
"""``(key, version) -> BlobRow`` (``data`` may be empty) of an already stored blob, or None."""


# ----------------------------------------------------------------------------------- encoding
def encode_record(
    record: CheckpointRecord,
    base_of: BaseLookup,
    codec: Serializer = serde.DEFAULT,
    compaction: Compaction = REPLACE,
    inline: bool = False,
    compact: bool = False,
) -> EncodedCheckpoint:
    """Encode a record; raises ``SerializationError`` before anything is stored.

    The metadata the loop gives most steps is no bytes: the row's ``step`` gives it back
    (``decode_metadata``). With ``compact``, the body also leaves out what the row stores in
    its own columns (id, parent, step, created_at: ``COMPACT_TAG``); only a backend that gives
    those fields back to ``decode_checkpoint`` may use it.

    With ``inline``, small scalar values (``inlined``) go into the body, changed or not,
    instead of blobs: a step that only bumps a counter then writes one row, not two.
    """
    cp = record.checkpoint
    changes = changes_of(record)
    small = inlined(cp.values) if inline else {}
    keys: Set[str] = (changes.keys() if changes is not None else cp.values.keys()) - small.keys()
    if not cp.values.keys() <= cp.versions.keys():
        unversioned = sorted(k for k in cp.values if k not in cp.versions)
        raise SerializationError(
            f"checkpoint {cp.id} has a value but no version for key {unversioned[0]!r}: "
            "values are stored under their versions, so every key needs one"
        )
    for key, version in cp.versions.items():  # a loop: a generator's frame costs more here
        if type(version) is not str:
            raise SerializationError(
                f"checkpoint {cp.id} gives key {key!r} the version {version!r} "
                f"({type(version).__name__}); versions are strings (the engine uses checkpoint "
                "ids). Nothing was written"
            )
    blobs: list[BlobRow] = []
    prefixes: list[BlobRow] = []
    for key in sorted(keys) if len(keys) > 1 else keys:
        if key in cp.values:
            change = changes.get(key) if changes is not None else None
            extends = change if isinstance(change, Append) else None
            value, version = cp.values[key], cp.versions[key]
            blob, outgrown = _blob(key, value, version, extends, base_of, codec, compaction)
            blobs.append(blob)
            if outgrown is not None:
                prefixes += _compacted(blob, outgrown, base_of, compaction.rewrite_full)
    row = CheckpointRow(
        cp.id,
        cp.parent_id,
        cp.step,
        cp.created_at,
        encode_body(cp, codec, small, compact),
        encode_metadata(record.metadata, cp.id, codec, cp.step),
    )
    writes = encode_writes(record.pending_writes, codec) if record.pending_writes else ()
    refs = {k: v for k, v in cp.versions.items() if k not in small} if small else dict(cp.versions)
    return EncodedCheckpoint(row, tuple(blobs), writes, tuple(prefixes), refs)


#: Values a body may hold itself: scalars of these exact types (subclasses such as enums go to
#: blobs as ever), strings and bytes up to ``INLINE_LEN``. Small enough to repeat in every
#: checkpoint's body, and told apart without encoding anything.
INLINE_TYPES = (int, float, bool, type(None))
INLINE_LEN = 64


def inlined(values: Mapping[str, Any]) -> dict[str, Any]:
    """The values ``encode_record(inline=True)`` keeps in the body."""
    small = {}
    for key, value in values.items():  # a loop: a comprehension's frame costs more here
        kind = type(value)
        if kind in INLINE_TYPES or (kind in (str, bytes) and len(value) <= INLINE_LEN):
            small[key] = value
    return small


def _blob(
    key: str,
    value: Any,
    version: str,
    extends: Append | None,
    base_of: BaseLookup,
    codec: Serializer,
    compaction: Compaction,
) -> tuple[BlobRow, BlobRow | None]:
    """The blob of a changed value, and the stored base it outgrew (to compact), if any."""
    base = None
    if extends is not None:
        base_len = extends.base_length
        base = base_of(key, extends.base_version)
        if base is not None and isinstance(value, list) and 0 <= base_len <= len(value):
            delta = _delta(key, value, base_len, version, base, codec, compaction)
            if delta is not None:
                return delta, None
    data = codec.dumps(value, path_prefix=key)
    items = len(value) if isinstance(value, list) else None
    return BlobRow(key, version, version, None, 0, len(data), data, items), base


def _delta(
    key: str,
    value: list[Any],
    base_len: int,
    version: str,
    base: BlobRow,
    codec: Serializer,
    compaction: Compaction,
) -> BlobRow | None:
    try:
        data = codec.dumps(value[base_len:])
    except SerializationError:
        codec.dumps(value, path_prefix=key)  # raises with the path inside the whole list
        raise
    chain_bytes = base.chain_bytes + len(data)
    if chain_bytes > max(compaction.ratio * base.full_bytes, compaction.min_chain_bytes):
        return None  # time for a new full blob
    return BlobRow(
        key, version, base.start, base.version, chain_bytes, base.full_bytes, data, len(value)
    )


def _compacted(
    full: BlobRow, base: BlobRow, base_of: BaseLookup, rewrite_full: bool
) -> list[BlobRow]:
    """The chain ending at ``base``, rewritten as prefixes of the new ``full`` blob.

    Walks base pointers down to the chain's full blob. It stops at a prefix row (its own chain
    was compacted already).
    """
    rewritten: list[BlobRow] = []
    row: BlobRow | None = base
    for _ in range(_MAX_HOPS):
        if row is None or row.is_prefix:
            break
        fits = row.items is not None and row.items <= (full.items or 0)
        if fits and row.version != full.version and (rewrite_full or row.base is not None):
            rewritten.append(row.prefix_of(full))
        if row.base is None:
            break
        row = base_of(full.key, row.base)
    return rewritten


def encode_writes(
    writes: Iterable[TaskWrite], codec: Serializer = serde.DEFAULT
) -> tuple[WriteRow, ...]:
    if not writes:  # most checkpoints carry none
        return ()
    return tuple(
        WriteRow(
            w.task_id,
            w.kind,
            w.task_name,
            dumps_named(w.value, codec, "the {!r} write of task {!r}", w.kind, w.task_name),
        )
        for w in writes
    )


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
    full = [_blob(k, cp.values[k], cp.versions[k], None, _none, codec, REPLACE) for k in keys]
    return tuple(blob for blob, _ in full)


def _none(key: str, version: str) -> None:
    """A ``BaseLookup`` that finds nothing."""


# ----------------------------------------------------------------------------------- decoding
def decode_write(row: WriteRow, codec: Serializer = serde.DEFAULT) -> TaskWrite:
    value = loads_named(row.data, f"the {row.kind!r} write of task {row.task_name!r}", codec)
    return TaskWrite(row.task_id, row.task_name, row.kind, value)  # type: ignore[arg-type]


Pool = Mapping[tuple[str, str], BlobRow]
"""Blob rows with their data by ``(key, version)``: the rows a checkpoint's values need, and any
others (rows of other branches of a chain are ignored: values are rebuilt through ``base``)."""


def assemble_values(
    versions: Mapping[str, str],
    pool: Pool,
    codec: Serializer = serde.DEFAULT,
    check: Callable[[BlobRow], None] | None = None,
) -> dict[str, Any]:
    """Rebuild the values from their blobs; ``check`` sees every row used (checksums)."""
    return {key: _value(key, version, pool, codec, check) for key, version in versions.items()}


def checkpoint_values(
    cp: Checkpoint,
    pool: Pool,
    codec: Serializer = serde.DEFAULT,
    check: Callable[[BlobRow], None] | None = None,
) -> dict[str, Any]:
    """The values of a decoded ``cp``: its inline ones and the rest rebuilt from ``pool``, in
    the order of its versions."""
    stored = assemble_values(blob_versions(cp), pool, codec, check)
    if not cp.values:
        return stored
    return {key: cp.values[key] if key in cp.values else stored[key] for key in cp.versions}


def missing_rows(versions: Mapping[str, str], pool: Pool) -> set[tuple[str, str]]:
    """``(key, version)`` of rows that rebuilding ``versions`` needs next and ``pool`` lacks.

    Backends fetch these and ask again until nothing is missing (or nothing more is found):
    a prefix row leads to a later version, which may be a delta with its own chain.
    """
    return {pair for pair in referenced_blobs([versions], pool) if pair not in pool}


def _value(
    key: str, version: str, pool: Pool, codec: Serializer, check: Callable[[BlobRow], None] | None
) -> Any:
    """Walk from the version down to a full blob, then replay the deltas and prefixes upwards."""
    row = pool.get((key, version))
    if row is None:
        raise SerializationError(f"the stored value of key {key!r} (version {version}) is missing")
    steps: list[BlobRow] = []  # deltas and prefix rows, newest first
    for _ in range(_MAX_HOPS):
        if check is not None:
            check(row)
        if row.base is None:
            break
        steps.append(row)
        below = pool.get((key, row.base))
        if below is None:
            raise SerializationError(
                f"the stored history of key {key!r} is incomplete (a delta lost its base)"
            )
        row = below
    else:
        raise CorruptedDataError(f"the stored history of key {key!r} loops: corrupted?")
    if row.value is not None:
        value = row.value()
    else:
        value = loads_named(row.data, f"the value of key {key!r}", codec)
    if steps and not isinstance(value, list):
        raise CorruptedDataError(f"the stored value of key {key!r} is not a list: corrupted?")
    for step in reversed(steps):
        if step.is_prefix:
            if step.items is None or step.items > len(value):
                raise CorruptedDataError(
                    f"a stored prefix of key {key!r} is longer than its value: corrupted?"
                )
            del value[step.items :]
            continue
        delta = loads_named(step.data, f"a delta of key {key!r}", codec)
        if not isinstance(delta, list):
            raise CorruptedDataError(f"a stored delta of key {key!r} is not a list: corrupted?")
        value.extend(delta)
    return value


def corrupted(row: BlobRow) -> CorruptedDataError:
    """The error for a stored row whose bytes fail their checksum."""
    return CorruptedDataError(
        f"the stored value of key {row.key!r} (version {row.version}) is corrupted: its "
        "checksum does not match. Nothing was changed; restore the storage from a backup, or "
        "continue from an earlier checkpoint that does not use this version"
    )


def named(
    exc: SerializationError, thread_id: str, ns: str, checkpoint_id: str, backend: str = ""
) -> Exception:
    """``exc`` naming the checkpoint it was raised loading (and the ``backend``, if given),
    of the same class (a ``CorruptedDataError`` stays one, and one that names its checkpoint
    already gets only the backend)."""
    where = f"{backend}: " if backend else ""
    message = f"{where}thread {thread_id!r} (namespace {ns!r}), checkpoint {checkpoint_id}: {exc}"
    if isinstance(exc, CorruptedDataError) and exc.thread_id is not None:  # named already
        thread_id, ns = exc.thread_id, exc.checkpoint_ns or ""
        checkpoint_id, message = exc.checkpoint_id or checkpoint_id, f"{where}{exc}"
    if isinstance(exc, CorruptedDataError):
        return CorruptedDataError(
            message,
            path=exc.path,
            type_name=exc.type_name,
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=checkpoint_id,
        )
    return SerializationError(message, path=exc.path, type_name=exc.type_name)


def referenced_blobs(
    versions: Iterable[Mapping[str, str]], rows: Mapping[tuple[str, str], BlobRow]
) -> set[tuple[str, str]]:
    """Every ``(key, version)`` that checkpoints naming these blob ``versions`` (each a
    checkpoint's ``blob_versions``) need, chains included: what pruning keeps."""
    needed: set[tuple[str, str]] = set()
    for named in versions:
        for key, version in named.items():
            ref: str | None = version
            while ref is not None and (key, ref) not in needed:
                needed.add((key, ref))
                row = rows.get((key, ref))
                ref = row.base if row is not None else None
    return needed
