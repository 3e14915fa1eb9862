"""The key layout (version 2) and how values are packed into it.

``P`` is the prefix; ``T`` = ``P:{t:<thread>}``, whose hash tag puts every key of one thread in
one slot. Thread ids, namespaces, state keys and versions are percent-encoded in key names
(``q``), so a component never holds ``:``, ``{``, ``}``, ``|``, spaces or newlines; the real
ids are kept in the data::

    P:schema_version             string: the layout version of everything under P
    P:threads                    zset: thread id -> last update (µs), for list_threads
    T:meta                       hash: root-namespace head, status, has_next, updated_at
    T:keys                       set: the suffix (after T) of the thread's other keys, but
                                 checkpoints and their writes (each index lists those)
    T:ns                         set: the thread's namespaces
    T:idx:<ns>                   zset: checkpoint ids, all scored 0, so ordered by id
    T:c:<ns>:<id>                string: one checkpoint (``pack_checkpoint``)
    T:w:<ns>:<id>                string: its pending writes, if any (``write_rows``)
    T:b:<ns>:<key>:<version>     string: one value blob (``pack_blob``)

Redis spends some 60-100 bytes on every key, and a hash holding a value longer than 64 bytes
becomes a real hash table with an allocation per field name and value, so a checkpoint is one
string, and so are a blob and a checkpoint's pending writes.
Nothing is stored twice: a checkpoint's id lives only in its key name, its parent, step and
creation time only in its header (its body is the compact one).

Small scalar values (``layout.inlined``) live in the checkpoint's body, changed or not, and
have no blob key: a step that only moves a counter writes one checkpoint key. The header of a
checkpoint names only the blobs of its other values.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, unquote

from threadline.checkpoint.layout import BlobRow, CheckpointRow, WriteRow
from threadline.checkpoint.redis.connection import Call, Op, Pipe
from threadline.checkpoint.seals import blob_crc
from threadline.checkpoint.stamps import created_text, stored_created
from threadline.clock import increasing_micros, iso_at
from threadline.errors import CorruptedDataError

#: The version of the key layout; a store written by a newer layout is refused.
SCHEMA_VERSION = 2

HEADER_READ = 512  # bytes read to get a blob's header (all of it, if the header is longer)


@functools.lru_cache(maxsize=4096)
def q(text: str) -> str:
    """A component of a key name: percent-encoded, so never ``:``, ``{``, ``}`` or ``|``."""
    return quote(text, safe="")


class Keys:
    """Key names of one thread; see the module docstring."""

    __slots__ = ("registry", "tag", "threads")

    def __init__(self, prefix: str, thread_id: str) -> None:
        self.tag = f"{prefix}:{{t:{q(thread_id)}}}"
        self.registry = self.tag + ":keys"
        self.threads = f"{prefix}:threads"

    def idx(self, qns: str) -> str:
        return f"{self.tag}:idx:{qns}"

    def checkpoint(self, qns: str, checkpoint_id: str) -> str:
        return f"{self.tag}:c:{qns}:{checkpoint_id}"

    def writes(self, qns: str, checkpoint_id: str) -> str:
        return f"{self.tag}:w:{qns}:{checkpoint_id}"

    @property
    def meta(self) -> str:
        return self.tag + ":meta"

    @property
    def namespaces(self) -> str:
        return self.tag + ":ns"


def blob_suffix(qns: str, key: str, version: Any) -> str:
    return f":b:{qns}:{q(key)}:{q(str(version))}"


# -------------------------------------------------------------------------------- blobs
# A blob is "<kind>|<start>|<chain_bytes>|<full_bytes>|<base>|<items>|<crc>\n<data>": kind ``f``
# (full), ``d`` (delta) or ``p`` (prefix row, no data: the first <items> items of version <base>),
# versions quoted, <items> empty when unknown, <crc> the CRC-32 of <data> (empty for a prefix
# row). The scripts read ``<base>``, to follow a delta or a prefix row, and ``read`` compares
# ``<crc>`` with the blobs whose bytes the saver holds already.
_KINDS = {"f", "d", "p"}


def pack_blob(blob: BlobRow) -> bytes:
    """The stored form of ``blob``: its header line, then its data."""
    if blob.base is None:
        kind, base = "f", ""
    else:
        kind, base = ("p" if blob.is_prefix else "d"), q(str(blob.base))
    items = "" if blob.items is None else str(blob.items)
    crc = str(blob_crc(blob)) if blob.data else ""
    header = (
        f"{kind}|{q(str(blob.start))}|{blob.chain_bytes}|{blob.full_bytes}|{base}|{items}|{crc}\n"
    )
    return header.encode() + blob.data


def unpack_blob(suffix: str, stored: bytes) -> tuple[BlobRow, int | None]:
    """The blob stored under ``suffix`` (``:b:<ns>:<key>:<version>``), its data whatever follows
    the header (none if only the header was read), and the CRC-32 its header records for its
    data (None for a prefix row); ValueError if damaged."""
    header, sep, data = stored.partition(b"\n")
    fields = header.decode().split("|")
    if not sep or fields[0] not in _KINDS or len(fields) != 7:
        raise ValueError("the blob's header is damaged")
    kind, start, chain_bytes, full_bytes, base, items, crc = fields
    _, _, _, key, version = suffix.split(":")
    row = BlobRow(
        key=unquote(key),
        version=unquote(version),
        start=unquote(start),
        base=unquote(base) if kind != "f" else None,
        chain_bytes=int(chain_bytes),
        full_bytes=int(full_bytes),
        data=data,
        items=int(items) if items else None,
    )
    return row, int(crc) if crc else None


def blob_heads(keys: Keys, suffixes: Sequence[str]) -> Op[list[BlobRow | None]]:
    """The metadata of the blobs ``suffixes`` (None: missing or damaged), read without their
    data: the first bytes of each, then all of any whose header is longer than that."""
    heads = yield Pipe([Call("getrange", (keys.tag + s, 0, HEADER_READ - 1)) for s in suffixes])
    long = [i for i, head in enumerate(heads) if len(head) == HEADER_READ and b"\n" not in head]
    if long:
        whole = yield Pipe([Call("get", (keys.tag + suffixes[i],)) for i in long])
        for i, value in zip(long, whole, strict=True):
            heads[i] = value or b""
    rows: list[BlobRow | None] = []
    for suffix, head in zip(suffixes, heads, strict=True):
        try:
            rows.append(unpack_blob(suffix, head)[0].without_data())
        except ValueError:
            rows.append(None)
    return rows


# --------------------------------------------------------------------------- checkpoints
# A checkpoint is "<created>,<parent>,<step> <metadata length> <blob suffix>...\n<metadata>
# <body>", parent quoted (empty for none), naming the blobs of the values the body does not
# hold (small scalars are inline). ``created`` is "@" and the microseconds from the id's
# millisecond (``stamps.stored_created``), or ``created_at`` quoted (never an "@"). The body is
# compact (``COMPACT_TAG``): the id is the key's, the rest of the row is the header's; the
# metadata is empty when it is the loop's (``bodies.encode_metadata``). The scripts read the
# blob suffixes (``read``) and the first word (retention).


def pack_checkpoint(row: CheckpointRow, blob_suffixes: Sequence[str]) -> bytes:
    """The stored form of a checkpoint row naming the blobs its values live in."""
    created = stored_created(row.checkpoint_id, row.created_at)
    spelled = f"@{created}" if type(created) is int else q(row.created_at)
    first = f"{spelled},{q(row.parent_id or '')},{row.step}"
    header = " ".join([first, str(len(row.metadata)), *blob_suffixes])
    return header.encode() + b"\n" + row.metadata + row.body


def unpack_checkpoint(checkpoint_id: str, stored: bytes) -> CheckpointRow:
    """The row stored for ``checkpoint_id``; ValueError if damaged."""
    header, sep, rest = stored.partition(b"\n")
    first, size, *_ = header.decode().split(" ")
    created_at, parent, step = first.split(",")
    if not sep or int(size) > len(rest):
        raise ValueError("the checkpoint's header is damaged")
    metadata, body = rest[: int(size)], rest[int(size) :]
    created = _created(checkpoint_id, created_at)
    return CheckpointRow(checkpoint_id, unquote(parent) or None, int(step), created, body, metadata)


def created_at_of(checkpoint_id: str, token: bytes) -> str:
    """The creation time from the first word of a checkpoint's header, as scripts return it."""
    return _created(checkpoint_id, token.decode().partition(",")[0])


def _created(checkpoint_id: str, spelled: str) -> str:
    if spelled.startswith("@"):
        return created_text(checkpoint_id, int(spelled[1:]))
    return unquote(spelled)


# --------------------------------------------------------------------------------- writes
# A checkpoint's writes are one string of entries "<kind>:<task> <length>\n<value>", task id
# quoted, in the order they were first saved; a value is "<quoted task name>\n<data>". (A
# hash would cost Redis some 300 bytes more a checkpoint: a field longer than 64 bytes makes
# it a real hash table.) The scripts add writes (one with the field of a stored one replaces
# it in place) and read their fields for the thread's status.


def write_args(writes: Sequence[WriteRow]) -> list[Any]:
    """Script arguments for ``writes``: field name, then value."""
    args: list[Any] = []
    for w in writes:
        args += [f"{w.kind}:{q(w.task_id)}", f"{q(w.task_name)}\n".encode() + w.data]
    return args


def write_rows(stored: bytes | None) -> list[WriteRow]:
    """The pending writes in a writes string, in the order they were saved."""
    found: list[WriteRow] = []
    at, stored = 0, stored or b""
    while at < len(stored):
        end = stored.index(b"\n", at)  # ValueError if there is none
        field, _, size = stored[at:end].decode().partition(" ")
        kind, _, task_id = field.partition(":")
        value = stored[end + 1 : end + 1 + int(size)]
        name, named, data = value.partition(b"\n")
        if not named or len(value) != int(size):
            raise ValueError(f"write entry {field!r} is damaged")
        found.append(WriteRow(unquote(task_id), kind, unquote(name.decode()), data))
        at = end + 1 + int(size)
    return found


# --------------------------------------------------------------------------------- errors, time


def checkpoint_row(
    key: str, thread_id: str, ns: str, checkpoint_id: str, stored: bytes
) -> CheckpointRow:
    try:
        return unpack_checkpoint(checkpoint_id, stored)
    except ValueError as exc:
        raise malformed(key, thread_id, ns, checkpoint_id, exc) from exc


def malformed(
    key: str, thread_id: str, ns: str, checkpoint_id: str, exc: Exception
) -> CorruptedDataError:
    return CorruptedDataError(
        f"thread {thread_id!r}, namespace {ns!r}, checkpoint {checkpoint_id!r}: "
        f"Redis key {key!r} is malformed ({type(exc).__name__}: {exc}); "
        "it was not written by this threadline or was damaged"
    )


def now() -> tuple[int, str]:
    """(microseconds since the epoch, ISO timestamp) of now, increasing within a process: a
    thread's score in ``P:threads`` and its ``updated_at``."""
    micros = increasing_micros()
    return micros, iso_at(micros)
