"""Reading the blob rows of a namespace inside a transaction: the rows checkpoints' values
need, with their delta chains and large data (the statements are in ``schema``)."""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from threadline.checkpoint.backend import Check, Pair
from threadline.checkpoint.bytecache import ByteCache
from threadline.checkpoint.chains import HeldChains
from threadline.checkpoint.layout import BlobRow, corrupted, missing_rows
from threadline.checkpoint.seals import blob_intact
from threadline.checkpoint.sqlite import schema as sql


@dataclasses.dataclass(frozen=True, slots=True)
class Blobs:
    """The blob rows of one namespace, read through ``conn``."""

    conn: sqlite3.Connection
    thread_id: str
    ns: str

    def values(
        self, wanted: Sequence[Mapping[str, str]], chains: HeldChains, cache: ByteCache
    ) -> tuple[dict[Pair, BlobRow], Check]:
        """Usually two blob queries: the rows, then the chains of the deltas among them; prefix
        rows of compacted chains lead to later versions, fetched the same way until nothing is
        missing. A row that is the tip of a chain ``chains`` holds (same CRC-32) needs no chain:
        it comes back as its whole value, or with the held rows below it (checked already).
        Large rows come without their data, then get it (``_fill_large``)."""
        crcs: dict[Pair, int] = {}
        pool: dict[Pair, BlobRow] = {}
        held: set[Pair] = set()
        pairs = {kv for versions in wanted for kv in versions.items()}
        while pairs:
            found = self.rows(sorted(pairs), sql.BY_PAIR, crcs)
            below = chains.rows_below(self.thread_id, self.ns, {kv: crcs[kv] for kv in found})
            held.update(below)
            found.update(below)
            pool.update(found)
            deltas = [
                row
                for kv, row in found.items()
                if row.base is not None and not row.is_prefix and kv not in held
            ]
            pool.update(self._chains(deltas, crcs))
            if not found:
                break  # assemble_values names what is missing
            pairs = set().union(*(missing_rows(versions, pool) for versions in wanted))
        verified = self._fill_large(pool, crcs, cache) | held

        def check(row: BlobRow) -> None:
            """The CRC-32 of every blob a value is rebuilt from must match."""
            kv = (row.key, row.version)
            crc = crcs.get(kv)
            if crc is not None and kv not in verified and not blob_intact(row, crc):
                raise corrupted(row)

        return pool, check

    def _chains(self, heads: Iterable[BlobRow], crcs: dict[Pair, int]) -> dict[Pair, BlobRow]:
        """The rows (with data) of the chains that delta rows ``heads`` end.

        There is no index by chain: a chain's rows are the key's versions from its start to its
        head that name that start, a range of the primary key when versions grow along the chain
        (checkpoint ids do). When they do not (versions chosen by hand), the walk from a head
        misses a base, and that chain is read again from every version of its key.
        """
        spans: dict[Pair, list[str]] = {}
        for head in heads:
            spans.setdefault((head.key, head.start), []).append(head.version)
        bounded = [(key, start, max(ends)) for (key, start), ends in sorted(spans.items())]
        where = "b.key = w.k AND b.version BETWEEN w.v AND w.last AND b.start = w.v"
        found = self.rows(bounded, where, crcs)
        broken = [
            span
            for span, ends in spans.items()
            if not all(_complete(found, span[0], end) for end in ends)
        ]
        found.update(self.rows(broken, "b.key = w.k AND b.start = w.v", crcs))
        return found

    def rows(
        self, wanted: Sequence[tuple[str, ...]], where: str, crcs: dict[Pair, int] | None = None
    ) -> dict[Pair, BlobRow]:
        """Blob rows matching ``where`` for each tuple of ``wanted``: with ``crcs``, with their
        data if small (``schema.JOINED_DATA``) and their CRC-32s put in ``crcs``; else without."""
        found: dict[Pair, BlobRow] = {}
        columns = sql.JOINED_DATA if crcs is not None else sql.JOINED_META
        for r in self._join(wanted, columns, where):
            if crcs is None:
                found[(r[0], r[1])] = blob_row(r)
            else:
                found[(r[0], r[1])] = blob_row(r, r[7] or b"")
                crcs[(r[0], r[1])] = r[8]
        return found

    def _join(self, wanted: Sequence[tuple[str, ...]], columns: str, where: str) -> Iterator[Any]:
        """``schema.join_blobs`` over ``wanted``, in chunks under the parameter limit."""
        step = sql.CHUNK * 2 // len(wanted[0]) if wanted else 1
        for i in range(0, len(wanted), step):
            chunk = wanted[i : i + step]
            params = [*(part for item in chunk for part in item), self.thread_id, self.ns]
            yield from self.conn.execute(
                sql.join_blobs(len(chunk[0]), len(chunk), columns, where), params
            )

    def _fill_large(
        self, pool: dict[Pair, BlobRow], crcs: Mapping[Pair, int], cache: ByteCache
    ) -> set[Pair]:
        """Give large rows their data, from the cache or one query; returns the rows verified.
        Only they, prefix rows and rows held decoded came without data."""
        verified: set[Pair] = set()
        missing: list[Pair] = []
        for kv, row in pool.items():
            if row.data or row.is_prefix or row.value is not None:
                continue
            data = cache.get((self.thread_id, self.ns, *kv, crcs[kv]))
            if data is None:
                missing.append(kv)
            else:
                pool[kv] = dataclasses.replace(row, data=data)
                verified.add(kv)
        for key, version, data in self._join(missing, "b.key, b.version, b.data", sql.BY_PAIR):
            kv = (key, version)
            pool[kv] = row = dataclasses.replace(pool[kv], data=data)
            if blob_intact(row, crcs[kv]):
                cache.add((self.thread_id, self.ns, key, version, crcs[kv]), data)
                verified.add(kv)
        return verified


def blob_row(r: Sequence[Any], data: bytes = b"") -> BlobRow:
    """A blob row from the ``schema.BLOB_META`` columns, with ``data`` if it was read too."""
    return BlobRow(r[0], r[1], r[2], r[3], r[4], r[5], data, r[6])


def _complete(rows: Mapping[Pair, BlobRow], key: str, version: str) -> bool:
    """Whether ``rows`` hold every row from ``version`` of ``key`` back to its full blob."""
    row = rows.get((key, version))
    while row is not None and row.base is not None:
        row = rows.get((key, row.base))
    return row is not None
