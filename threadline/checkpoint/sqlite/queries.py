"""Reading and writing rows inside a transaction: blobs and their chains, writes."""

from __future__ import annotations

import dataclasses
import functools
import json
import sqlite3
import zlib
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from threadline.checkpoint import bytecache
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.chains import HeldChains
from threadline.checkpoint.layout import BlobRow, WriteRow, missing_rows
from threadline.checkpoint.sqlite.schema import UPSERT_WRITE

CHUNK = 400  # pairs per query: 802 parameters, under the 999 of older SQLite builds


@functools.lru_cache(maxsize=1024)
def names_json(names: tuple[str, ...]) -> str:
    """The ``next`` column of a thread row; cached, as a run plans the same few names again."""
    return json.dumps(list(names))


def meta_row(r: Sequence[Any], data: bytes = b"") -> BlobRow:
    """A blob row from the ``BLOB_META`` columns, with ``data`` if it was read too."""
    return BlobRow(r[0], r[1], r[2], r[3], r[4], r[5], data, r[6])


_META_COLUMNS = "b.key, b.version, b.start, b.base, b.chain_bytes, b.full_bytes, b.items"
# Large data comes in a second query, unless the process has it already (``ByteCache``).
_DATA_COLUMNS = (
    _META_COLUMNS + f", CASE WHEN length(b.data) < {bytecache.MIN_BYTES} THEN b.data END, b.crc32"
)


def blob_rows(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    pairs: Iterable[tuple[str, str]],
    *,
    crcs: dict[tuple[str, str], int] | None = None,
) -> dict[tuple[str, str], BlobRow]:
    """Blob rows of ``(key, version)`` pairs.

    The pairs are a ``VALUES`` list joined (in that order: ``CROSS JOIN``) to the table, so
    SQLite probes the primary key once per pair whatever its statistics say; in chunks, to stay
    under the parameter limit. Without ``crcs`` the rows come without their data; with it, with
    their data, and ``crcs`` receives the stored CRC-32 of each.
    """
    columns = _DATA_COLUMNS if crcs is not None else _META_COLUMNS
    where = "b.key = w.k AND b.version = w.v"
    return _rows(conn, thread_id, ns, sorted(set(pairs)), columns, where, crcs)


def chain_rows(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    heads: Iterable[BlobRow],
    crcs: dict[tuple[str, str], int],
) -> dict[tuple[str, str], list[BlobRow]]:
    """The rows (with data) of the chains that delta rows ``heads`` end, by ``(key, start)``.

    There is no index by chain: a chain's rows are the key's versions from its start to its
    head that name that start, a range of the primary key when versions grow along the chain
    (checkpoint ids do). When they do not (versions chosen by hand), the walk from a head
    misses a base, and that chain is read again from every version of its key.
    """
    spans: dict[tuple[str, str], list[str]] = {}
    for head in heads:
        spans.setdefault((head.key, head.start), []).append(head.version)
    chains: dict[tuple[str, str], list[BlobRow]] = {}
    bounded = [(key, start, max(ends)) for (key, start), ends in sorted(spans.items())]
    where = "b.key = w.k AND b.version BETWEEN w.v AND w.last AND b.start = w.v"
    for row in _rows(conn, thread_id, ns, bounded, _DATA_COLUMNS, where, crcs).values():
        chains.setdefault((row.key, row.start), []).append(row)
    broken = [
        span
        for span, ends in spans.items()
        if not all(_complete(chains.get(span, []), end) for end in ends)
    ]
    if broken:
        where = "b.key = w.k AND b.start = w.v"
        for span in broken:
            chains[span] = []
        for row in _rows(conn, thread_id, ns, broken, _DATA_COLUMNS, where, crcs).values():
            chains[(row.key, row.start)].append(row)
    return chains


def _complete(chain: list[BlobRow], head: str) -> bool:
    """Whether ``chain`` holds every row from version ``head`` back to its full blob."""
    by_version = {row.version: row for row in chain}
    row = by_version.get(head)
    while row is not None and row.base is not None:
        row = by_version.get(row.base)
    return row is not None


def _rows(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    wanted: Sequence[tuple[str, ...]],
    columns: str,
    where: str,
    crcs: dict[tuple[str, str], int] | None,
) -> dict[tuple[str, str], BlobRow]:
    """Blob rows matching ``where`` for each tuple of ``wanted`` (as ``w.k, w.v[, w.last]``)."""
    found: dict[tuple[str, str], BlobRow] = {}
    if not wanted:
        return found
    width = len(wanted[0])
    names = ("k", "v", "last")[:width]
    marks = "(" + ", ".join("?" * width) + ")"
    step = CHUNK * 2 // width
    for i in range(0, len(wanted), step):
        chunk = wanted[i : i + step]
        params: list[Any] = [part for item in chunk for part in item]
        rows = conn.execute(
            f"WITH w ({', '.join(names)}) AS (VALUES {', '.join([marks] * len(chunk))}) "
            f"SELECT {columns} FROM w CROSS JOIN blobs AS b "
            f"WHERE b.thread_id = ? AND b.checkpoint_ns = ? AND {where}",
            [*params, thread_id, ns],
        )
        for r in rows:
            if crcs is None:
                found[(r[0], r[1])] = meta_row(r)
            else:
                found[(r[0], r[1])] = meta_row(r, r[7] or b"")
                crcs[(r[0], r[1])] = r[8]
    return found


def _deferred(pool: dict[tuple[str, str], BlobRow]) -> list[tuple[str, str]]:
    """Rows whose (large) data was left out: only prefix rows and rows held decoded have no
    data."""
    return [
        kv for kv, row in pool.items() if not row.data and not row.is_prefix and row.value is None
    ]


def fill_large(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    pool: dict[tuple[str, str], BlobRow],
    crcs: dict[tuple[str, str], int],
    cache: ByteCache,
) -> set[tuple[str, str]]:
    """Give large rows their data, from the cache or one query; returns the rows verified."""
    verified: set[tuple[str, str]] = set()
    missing: list[tuple[str, str]] = []
    for kv in _deferred(pool):
        data = cache.get((thread_id, ns, *kv, crcs[kv]))
        if data is None:
            missing.append(kv)
        else:
            pool[kv] = dataclasses.replace(pool[kv], data=data)
            verified.add(kv)
    for i in range(0, len(missing), CHUNK):
        chunk = missing[i : i + CHUNK]
        marks = ", ".join(["(?, ?)"] * len(chunk))
        for key, version, data in conn.execute(
            f"WITH w (k, v) AS (VALUES {marks}) SELECT b.key, b.version, b.data FROM w "
            "CROSS JOIN blobs AS b WHERE b.thread_id = ? AND b.checkpoint_ns = ? "
            "AND b.key = w.k AND b.version = w.v",
            [*(part for kv in chunk for part in kv), thread_id, ns],
        ):
            pool[(key, version)] = dataclasses.replace(pool[(key, version)], data=data)
            if zlib.crc32(data) == crcs[(key, version)]:
                cache.add((thread_id, ns, key, version, crcs[(key, version)]), data)
                verified.add((key, version))
    return verified


def values_of(
    conn: sqlite3.Connection,
    thread_id: str,
    ns: str,
    wanted: Sequence[Mapping[str, str]],
    chains: HeldChains,
) -> tuple[dict[tuple[str, str], BlobRow], dict[tuple[str, str], int], set[tuple[str, str]]]:
    """The blob rows ``wanted`` (versions of checkpoints) need, their stored CRC-32s, and the
    rows that came from ``chains`` (held, so checked already).

    Usually two blob queries (the rows, then the chains of the deltas among them); prefix rows
    of compacted chains lead to later versions, fetched the same way until nothing is missing.
    A row that is the tip of a chain ``chains`` holds (same CRC-32) needs no chain: it comes
    back as its whole value, or with the held rows below it. Large rows come without their
    data (``fill_large``).
    """
    crcs: dict[tuple[str, str], int] = {}
    pool: dict[tuple[str, str], BlobRow] = {}
    held: dict[tuple[str, str], BlobRow] = {}
    pairs = {kv for versions in wanted for kv in versions.items()}
    while pairs:
        found = blob_rows(conn, thread_id, ns, pairs, crcs=crcs)
        below = chains.rows_below(thread_id, ns, {kv: crcs[kv] for kv in found})
        held.update(below)
        found.update(below)
        pool.update(found)
        deltas = [
            row
            for kv, row in found.items()
            if row.base is not None and not row.is_prefix and kv not in held
        ]
        for chain in chain_rows(conn, thread_id, ns, deltas, crcs).values():
            pool.update({(r.key, r.version): r for r in chain})
        if not found:
            break  # assemble_values names what is missing
        pairs = set().union(*(missing_rows(versions, pool) for versions in wanted))
    return pool, crcs, set(held)


def insert_writes(
    conn: sqlite3.Connection,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    writes: Sequence[WriteRow],
) -> None:
    for w in writes:
        conn.execute(
            UPSERT_WRITE,
            (
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.task_id,
                w.kind,
                w.task_name,
                thread_id,
                checkpoint_ns,
                checkpoint_id,
                w.data,
            ),
        )
