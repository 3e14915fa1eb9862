"""Rows as the PostgreSQL saver stores and loads them: a put's parameters, creation times, the
listing of threads, and the values stored inside the input's write.

A run's input is saved as the ``__start__`` task's write of the input checkpoint, and the next
checkpoint stores the values that input set: the same bytes again (a message appended to a
list is that list's delta, a key set outright its full blob). The saver remembers the writes of
the checkpoint it just stored (``RecentWrites``); a put on top of it stores such a value as its
header and where the rest is inside the write (``blobs.src_*``, see ``schema``), so the input is
stored once.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from types import NoneType
from typing import Any

from threadline.checkpoint.backend import Prepared, ThreadRow
from threadline.checkpoint.base import ThreadStatus
from threadline.checkpoint.bytecache import bounded_set
from threadline.checkpoint.layout import BlobRow, WriteRow
from threadline.checkpoint.postgres.connections import BEGIN_READ, COMMIT, Batch, Hot, Op, Stmt
from threadline.checkpoint.rules import status_of
from threadline.checkpoint.seals import blob_crc, unsealed_write
from threadline.clock import iso_at, micros_of
from threadline.serde import wire as fmt

_THREADS_PAGE = 256
MIN_BYTES = 64  # a shorter value is stored as it is: the reference would cost about as much
_PLAIN = fmt.PLAIN_HEADER


def created_fields(created_at: str) -> tuple[str | None, str | None]:
    """``created_at`` as the put stores it: ``(time, None)`` when the ``timestamptz`` column
    spells it back exactly (``created_text``), else ``(time or None, the text as given)``."""
    if micros_of(created_at) is not None:
        return created_at, None
    try:
        parsed = datetime.fromisoformat(created_at)
    except (TypeError, ValueError):
        return None, created_at
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)  # naive means UTC (``rules.created_ts``)
    return parsed.isoformat(timespec="microseconds"), created_at


def created_text(micros: int | None, raw: str | None) -> str:
    """A checkpoint's ``created_at`` from its stored columns (see ``created_fields``)."""
    if raw is not None:
        return raw
    return "" if micros is None else iso_at(micros)


def put_params(put: Prepared, recent: RecentWrites) -> tuple[PutParams, list[int]]:
    """``put`` as ``threadline_put`` takes it, and each new blob's CRC-32."""
    row, thread_id, ns = put.row, put.thread_id, put.ns
    blobs = [normalized(b) for b in put.blobs]
    writes = dedupe_writes(put.writes) if put.writes else ()
    sources = recent.sources(thread_id, ns, row.parent_id, blobs) if blobs else ()
    crcs = [blob_crc(b) for b in blobs]
    ts, raw = created_fields(row.created_at)
    params = PutParams()
    params.fields = {
        "thread": thread_id,
        "ns": ns,
        "cid": row.checkpoint_id,
        "parent": row.parent_id,
        "fork": put.fork,
        "step": row.step,
        "ts": ts,
        "raw": raw,
        "body": params.add(row.body),
        "meta": params.add(row.metadata),
        "next": put.next_names if ns == "" else [],
        "refs": sorted(put.refs.items()),
        # All of ``put.check``, not fewer for a head this process saved (``Prepared.trusted``):
        # another process may have deleted rows under it.
        "check": sorted(set(put.check)),
        "blobs": [
            [
                *(b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, crc, b.items),
                *(_NO_SOURCE if src is None else dataclasses.astuple(src)),
                *params.add(b.data if src is None else b.data[:2]),
            ]
            for b, crc, src in zip(blobs, crcs, sources or [None] * len(blobs), strict=True)
        ],
        "writes": [[r.task_id, r.kind, r.task_name, *params.add(r.data)] for r in writes],
        "prefixes": [
            [p.key, p.version, p.base, p.full_bytes, p.items] for p in map(normalized, put.prefixes)
        ],
    }
    return params, crcs


_NO_SOURCE = (None, None, None, None)  # src_id, src_task, src_at, src_len (``Source``)


@dataclasses.dataclass(slots=True)
class PutParams:
    """One put as ``threadline_put`` takes it (``schema.py``): everything but bytes as JSON
    ``fields``, and the bytes laid end to end (``parts``, joined once with those of the puts sent
    in the same statement), each piece named in ``fields`` by its [offset, length] (``add``)."""

    fields: dict[str, Any] = dataclasses.field(default_factory=dict)
    parts: list[bytes] = dataclasses.field(default_factory=list)
    size: int = 0

    def add(self, data: bytes) -> list[int]:
        at = self.size
        self.parts.append(data)
        self.size += len(data)
        return [at, len(data)]

    def alone(self) -> dict[str, Any]:
        """The statement's parameters for this put sent on its own."""
        self.fields["o"] = 0
        return {"put": to_json(self.fields), "data": b"".join(self.parts)}

    def hot(self, name: bytes, sql: bytes) -> Hot:
        """This put sent on its own as a ``connections.Hot`` statement of ``sql``."""
        self.fields["o"] = 0
        data = [to_json(self.fields).encode(), b"".join(self.parts)]
        return Hot(name, sql, data, _TEXT_BINARY)


_TEXT_BINARY = (0, 1)


_JSON = json.JSONEncoder(separators=(",", ":"))  # ``json.dumps`` with options makes one a call


def to_json(value: Any) -> str:
    return _JSON.encode(value)


def dedupe_writes(rows: Iterable[WriteRow]) -> list[WriteRow]:
    """One row per (task_id, kind): the last value, at the first one's position."""
    return list({(row.task_id, row.kind): row for row in rows}.values())


def writes_params(
    thread_id: str, checkpoint_ns: str, checkpoint_id: str, rows: Sequence[WriteRow]
) -> dict[str, Any]:
    return {
        "thread": thread_id,
        "ns": checkpoint_ns,
        "cid": checkpoint_id,
        "task_ids": [r.task_id for r in rows],
        "kinds": [r.kind for r in rows],
        "task_names": [r.task_name for r in rows],
        "data": [r.data for r in rows],
    }


def normalized(row: BlobRow) -> BlobRow:
    """The row with its versions as strings, as the database holds them."""
    if type(row.version) is str and type(row.start) is str and type(row.base) in (str, NoneType):
        return row
    return dataclasses.replace(
        row,
        version=str(row.version),
        start=str(row.start),
        base=None if row.base is None else str(row.base),
    )


@dataclasses.dataclass(frozen=True, slots=True)
class Source:
    """Where a value's bytes (after its header) are: a slice of a ``result`` write."""

    checkpoint_id: str
    task_id: str
    at: int
    length: int


class RecentWrites:
    """The plain ``result`` writes of the newest checkpoint each (thread, namespace) stored."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._writes: OrderedDict[tuple[str, str], tuple[str, list[tuple[str, bytes]]]] = (
            OrderedDict()
        )

    def remember(
        self, thread_id: str, ns: str, checkpoint_id: str, writes: Sequence[WriteRow]
    ) -> None:
        """Called after each put: a put without such writes forgets the thread's."""
        plain = [
            (w.task_id, w.data)
            for w in writes
            if w.kind == "result" and unsealed_write(w.data)[:2] == _PLAIN
        ]
        with self._lock:
            if not plain:
                self._writes.pop((thread_id, ns), None)
                return
            bounded_set(self._writes, (thread_id, ns), (checkpoint_id, plain), self._size)

    def sources(
        self, thread_id: str, ns: str, parent_id: str | None, blobs: Sequence[BlobRow]
    ) -> list[Source | None]:
        """For each blob, where a write of ``parent_id`` holds its bytes, if one does."""
        with self._lock:
            entry = self._writes.get((thread_id, ns))
        if entry is None or entry[0] != parent_id:
            return [None] * len(blobs)
        return [_find(entry[0], entry[1], blob.data) for blob in blobs]


def _find(checkpoint_id: str, writes: Sequence[tuple[str, bytes]], data: bytes) -> Source | None:
    if len(data) < 2 + MIN_BYTES or data[:2] != _PLAIN:
        return None
    body = data[2:]
    for task_id, write in writes:
        at = write.find(body, 2)
        if at >= 0:
            return Source(checkpoint_id, task_id, at, len(body))
    return None


def threads_op(
    queries: Mapping[str, str], status: ThreadStatus | None, limit: int | None
) -> Op[list[ThreadRow]]:
    """Root heads, newest update first, a page a statement; status is worked out here. The
    first page is a statement alone; a transaction begins only if a second one is needed."""
    found: list[ThreadRow] = []
    params: dict[str, Any] = {}
    name, begun = "threads", False
    while limit is None or len(found) < limit:
        n = _THREADS_PAGE if limit is None or status is not None else limit - len(found)
        stmts = [Stmt(queries[name], {**params, "n": n})]
        if name != "threads" and not begun:
            stmts.insert(0, BEGIN_READ)
            begun = True
        rows = (yield Batch(stmts))[-1]
        for thread_id, head, updated_at, body, task_ids, kinds, next_ in rows:
            state = status_of(next_, zip(task_ids, kinds, strict=True))
            if status is None or state == status:
                at = updated_at.astimezone(UTC).isoformat(timespec="microseconds")
                found.append(ThreadRow(thread_id, state, head, at, body))
        if len(rows) < n:
            break
        name, params["at"], params["tid"] = "threads_after", rows[-1][2], rows[-1][0]
    if begun:
        yield Batch([COMMIT])
    return found if limit is None else found[:limit]
