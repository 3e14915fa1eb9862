"""The long values this process holds, so that a load reads and decodes only what is new.

Per (thread, namespace, key), each durable saver holds the newest delta chain it loaded or
stored, from the full blob to the tip, matched by the tip's CRC-32: a load that finds the held
tip unchanged takes the value from here (docs/storage.md, "Reading a long thread again"). A
version's value never changes, so held rows stay right when the database later rewrites them
as prefix rows; a tip found with another checksum under the same version (written again
elsewhere) is not this chain any more: it is dropped, never grown.

Where it can, a chain is held as one joined blob: the items of every row under one msgpack
array header, to which a delta on the tip is appended. When every item is built of dicts, lists
and values that cannot change, as chat messages are, the items are also held decoded, once, and
never handed out: each load gets new dicts and lists around the same immutable values
(``HeldItems``), far cheaper than a decode, and nothing a node does to its copy reaches the next
load.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict
from collections.abc import Callable, Collection, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime, time, timedelta
from decimal import Decimal
from typing import Any, Protocol, TypeVar
from uuid import UUID

from threadline import serde
from threadline.checkpoint.bytecache import ByteCache, HeldBlobs
from threadline.checkpoint.layout import BlobRow
from threadline.checkpoint.seals import blob_crc
from threadline.errors import SerializationError
from threadline.serde import Serializer
from threadline.serde import wire as fmt

#: Bytes held in all, per saver; chains are dropped least recently used first.
MAX_BYTES = 64 * 1024 * 1024
#: Chains smaller than this are not worth holding: their rows come with the load anyway.
MIN_BYTES = 16 * 1024

_Kv = tuple[str, str]  # (key, version)
_PLAIN = fmt.PLAIN_HEADER
_JOINED_HEADER = 7  # a joined value's: _PLAIN, then an array32 header (0xdd and 4 bytes)


#: Types whose values cannot change, so that loads may share them (exact types: subclasses may).
_IMMUTABLE = frozenset(
    {str, bytes, int, float, bool, type(None), datetime, date, time, timedelta, Decimal, UUID}
)

Copier = Callable[[Any], Any] | None  # how a load gets its own copy of an item; None: shared


class _NotPlain(Exception):
    """An item that is not built of dicts, lists and immutable values only."""


def _frozen(value: Any) -> bool:
    """Whether ``value`` can never change: an immutable value, or a tuple of them."""
    kind = type(value)
    if kind is tuple or kind is frozenset:
        return all(map(_frozen, value))
    return kind in _IMMUTABLE


def _plain(value: Any) -> bool:
    """Whether ``value`` is built of dicts, lists and values that cannot change."""
    kind = type(value)
    if kind is dict:
        return all(_frozen(k) and _plain(v) for k, v in value.items())
    if kind is list:
        return all(map(_plain, value))
    return _frozen(value)


def _fresh(value: Any) -> Any:
    """A copy of every dict and list in a plain ``value``, sharing what cannot change."""
    kind = type(value)
    if kind is dict:
        return {k: _fresh(v) for k, v in value.items()}
    if kind is list:
        return [_fresh(v) for v in value]
    return value


def _copier(item: Any) -> Copier:
    """How a load gets its own ``item``: shared (None) if it cannot change, a one-level copy
    for a dict or list of immutable values (a chat message), else a copy of every container;
    ``_NotPlain`` if it holds anything else."""
    if _frozen(item):
        return None
    kind = type(item)
    if kind is dict and all(map(_frozen, item)) and all(map(_frozen, item.values())):
        return dict.copy
    if kind is list and all(map(_frozen, item)):
        return list.copy
    if _plain(item):
        return _fresh
    raise _NotPlain


@dataclass(slots=True)
class HeldItems:
    """A held list decoded once; its objects never leave here, loads get copies."""

    values: list[Any] = field(default_factory=list)
    copiers: list[Copier] = field(default_factory=list)
    kinds: set[Copier] = field(default_factory=set)  # the distinct copiers among ``copiers``

    def extend(self, items: Any) -> bool:
        """Add decoded ``items``; False (and nothing added) if they are not a list of items
        that can be handed out as copies."""
        if type(items) is not list:
            return False
        try:
            copiers = [_copier(item) for item in items]
        except (_NotPlain, RecursionError):
            return False
        self.values += items
        self.copiers += copiers
        self.kinds.update(copiers)
        return True

    def copy(self) -> HeldItems:
        """Another holder of the same items, to grow apart (their objects are never changed)."""
        return HeldItems(list(self.values), list(self.copiers), set(self.kinds))

    def handout(self) -> Callable[[], list[Any]]:
        """What makes a load's own copy of the items held now (later ones are left out)."""
        count = len(self.values)
        if len(self.kinds) == 1:  # all alike (all messages flat dicts): one C-level map
            (copier,) = self.kinds
            return functools.partial(_copied_alike, self.values, copier, count)
        return functools.partial(_copied, self.values, self.copiers, count)


def _copied(values: list[Any], copiers: list[Copier], count: int) -> list[Any]:
    return [v if c is None else c(v) for v, c in zip(values[:count], copiers[:count], strict=True)]


def _copied_alike(values: list[Any], copier: Copier, count: int) -> list[Any]:
    return values[:count] if copier is None else list(map(copier, values[:count]))


@dataclass(slots=True)
class _Chain:
    tip: BlobRow  # the newest row (its bytes are named to the server with its CRC-32)
    crc: int  # of the tip row's data
    rows: dict[_Kv, BlobRow]  # every row down to a full blob; empty when ``joined`` holds it
    joined: bytearray | None = None  # the tip's value as one plain blob
    items: HeldItems | None = None  # ``joined`` decoded, when its items are plain
    whole: BlobRow | None = None  # the tip as one full row, as loads get it (``_whole``)
    decodable: bool = True  # False once ``joined`` proved not plain: not tried again

    @property
    def size(self) -> int:
        """Bytes held: the rows, or the joined value and its copy or decoded items
        (counted as twice its bytes, whether made yet or not)."""
        if self.joined is not None:
            return 3 * len(self.joined) + len(self.tip.data)
        return sum(len(r.data) for r in self.rows.values())


class HeldChains:
    """Per (thread, namespace, key), the value of the newest version held, from a full blob."""

    def __init__(self, max_bytes: int = MAX_BYTES, codec: Serializer = serde.DEFAULT) -> None:
        self._max = max_bytes
        self._codec = codec
        self._size = 0
        self._lock = threading.Lock()
        # (thread, ns) -> key -> chain; namespaces least recently used first
        self._chains: OrderedDict[tuple[str, str], dict[str, _Chain]] = OrderedDict()

    def tips(self, thread_id: str, ns: str) -> dict[_Kv, tuple[int, bytes]]:
        """``(key, tip version) -> (crc32, data)`` of the namespace's chains."""
        with self._lock:
            chains = self._chains.get((thread_id, ns), {})
            return {(key, c.tip.version): (c.crc, c.tip.data) for key, c in chains.items()}

    def rows_below(self, thread_id: str, ns: str, loaded: Mapping[_Kv, int]) -> dict[_Kv, BlobRow]:
        """What holds the values of the chains whose tips a load returned (``loaded``: the
        CRC-32 of each row it returned) unchanged, so the server stopped there: the tip as one
        full blob of its whole value, or the chain's rows."""
        found: dict[_Kv, BlobRow] = {}
        with self._lock:
            chains = self._chains.get((thread_id, ns))
            if chains is None:
                return found
            self._chains.move_to_end((thread_id, ns))
            for (key, version), crc in loaded.items():
                chain = chains.get(key)
                if chain is None or chain.tip.version != version:
                    continue
                if chain.crc != crc:  # the version written again elsewhere: not ours any more
                    self._drop(thread_id, ns, key)
                    continue
                if chain.joined is None:
                    found.update(chain.rows)
                    continue
                found[(key, version)] = self._whole(chain)
        return found

    def _whole(self, chain: _Chain) -> BlobRow:
        """The tip of a joined chain as a full row: its decoded items or, if they are not
        plain, a copy of its bytes; made once per tip."""
        assert chain.joined is not None
        if chain.whole is not None:
            return chain.whole
        key, version = chain.tip.key, chain.tip.version
        count = int.from_bytes(chain.joined[3:7], "big")
        size = len(chain.joined)
        if chain.items is None and chain.decodable:
            items = HeldItems()
            chain.decodable = self._add(items, memoryview(chain.joined))
            chain.items = items if chain.decodable else None
        if chain.items is not None:
            value = chain.items.handout()
            chain.whole = BlobRow(key, version, version, None, 0, size, b"", count, value)
        else:
            data = bytes(chain.joined)  # a copy: ``joined`` grows in place
            chain.whole = BlobRow(key, version, version, None, 0, size, data, count)
        return chain.whole

    def _carried(self, old: _Chain | None, new: _Chain) -> HeldItems | None:
        """The items ``old`` holds decoded and those ``new`` adds, if ``new`` starts with every
        item of ``old`` (byte for byte: its value's first items are the same). So compaction,
        which stores the list again in full, decodes only what it added."""
        if old is None or old.items is None or old.joined is None or new.joined is None:
            return None
        count = int.from_bytes(new.joined[3:7], "big") - len(old.items.values)
        held = memoryview(old.joined)[_JOINED_HEADER:]
        if count < 0 or not new.joined.startswith(held, _JOINED_HEADER):
            return None
        added = new.joined[_JOINED_HEADER + len(held) :]
        items = old.items.copy()
        return items if self._add(items, _array32(count) + added) else None

    def _add(self, items: HeldItems, data: bytes | memoryview) -> bool:
        """Decode ``data`` (a plain list) into ``items``; False if it cannot be held so."""
        try:
            decoded = self._codec.loads(data)
        except SerializationError:
            return False
        return items.extend(decoded)

    def remember(
        self, thread_id: str, ns: str, key: str, version: str, pool: Mapping[_Kv, BlobRow]
    ) -> None:
        """Hold the chain of ``version`` if ``pool`` has every row of it, down to a full blob
        (or to the tip held now: the rows above it extend that chain)."""
        with self._lock:
            chains = self._chains.get((thread_id, ns), {})
            held = chains.get(key)
            if held is not None and not _current(held, pool.get((key, held.tip.version))):
                self._drop(thread_id, ns, key)  # its tip's version was written again elsewhere
                held = None
            if held is not None and held.tip.version == version:
                return
            row = pool.get((key, version))
            if row is not None and row.base is None and len(row.data) < MIN_BYTES:
                if held is not None:  # a small value in full: nothing to hold, the old goes
                    self._drop(thread_id, ns, key)
                return
            tip = held.tip.version if held is not None else None
            newer: list[BlobRow] = []  # newest first
            kv: _Kv | None = (key, version)
            while kv is not None and kv[1] != tip:
                row = pool.get(kv)
                if row is None or len(newer) > len(pool):
                    return  # a row is missing (or the chain loops): nothing to hold
                newer.append(row)
                kv = (key, row.base) if row.base is not None else None
            if kv is not None and held is not None:  # reached the held tip: extend it
                for row in reversed(newer):
                    if not self._grow(thread_id, ns, held, row, blob_crc(row)):
                        break
                return
        rows = {(key, r.version): r for r in newer}
        self._put(thread_id, ns, key, _Chain(newer[0], blob_crc(newer[0]), rows))

    def loaded(
        self, thread_id: str, ns: str, versions: Mapping[str, str], pool: Mapping[_Kv, BlobRow]
    ) -> None:
        """The newest checkpoint's values were rebuilt from ``pool`` (``versions``: of those that
        live in blobs): hold their chains, which the next puts most likely extend."""
        for key, version in versions.items():
            self.remember(thread_id, ns, key, str(version), pool)

    def stored(
        self, thread_id: str, ns: str, blobs: Sequence[BlobRow], crcs: Sequence[int] | None = None
    ) -> None:
        """A put stored ``blobs`` (``crcs``: their CRC-32s, if known): a full blob becomes its
        key's held chain, a delta on a held tip its new tip."""
        for i, b in enumerate(blobs):
            if b.base is None and len(b.data) < MIN_BYTES:  # nothing to hold; the old goes
                with self._lock:
                    self._drop(thread_id, ns, b.key)
                continue
            crc = crcs[i] if crcs is not None else blob_crc(b)
            if b.base is None:
                self._put(thread_id, ns, b.key, _Chain(b, crc, {(b.key, b.version): b}))
            else:
                self.extend(thread_id, ns, b, crc)

    def extend(self, thread_id: str, ns: str, row: BlobRow, crc: int) -> None:
        """A row just stored: a delta on the held tip becomes the new tip."""
        with self._lock:
            chain = self._chains.get((thread_id, ns), {}).get(row.key)
            if chain is not None and row.base == chain.tip.version:
                self._grow(thread_id, ns, chain, row, crc)

    def _drop(self, thread_id: str, ns: str, key: str) -> None:
        """Let go of the key's chain (under the lock); a namespace left with none goes too."""
        chains = self._chains.get((thread_id, ns))
        if chains is None or key not in chains:
            return
        self._size -= chains.pop(key).size
        if not chains:
            del self._chains[(thread_id, ns)]

    def forget_thread(self, thread_id: str) -> None:
        with self._lock:
            for k in [k for k in self._chains if k[0] == thread_id]:
                self._size -= sum(c.size for c in self._chains.pop(k).values())

    def clear(self) -> None:
        with self._lock:
            self._chains.clear()
            self._size = 0

    def _grow(self, thread_id: str, ns: str, chain: _Chain, row: BlobRow, crc: int) -> bool:
        """``row`` (a delta on the tip) becomes the tip; False if the chain is no longer held
        (grown too big, or a delta it cannot join)."""
        before = chain.size
        if chain.joined is not None and not _append(chain.joined, row.data):
            chain.rows, chain.joined = {}, None  # not a plain list: the rows below are gone
        elif chain.joined is None:
            chain.rows[(row.key, row.version)] = row
        elif chain.items is not None and not self._add(chain.items, row.data):
            chain.items, chain.decodable = None, False
        chain.tip, chain.crc, chain.whole = row, crc, None
        self._size += chain.size - before
        if (not chain.rows and chain.joined is None) or chain.size > self._max // 4:
            self._drop(thread_id, ns, row.key)
            return False
        self._chains.move_to_end((thread_id, ns))
        self._evict()
        return self._chains.get((thread_id, ns), {}).get(row.key) is chain

    def _evict(self) -> None:
        """Drop the least recently used namespaces' chains while more than the bound is held."""
        while self._size > self._max and self._chains:
            _, dropped = self._chains.popitem(last=False)
            self._size -= sum(c.size for c in dropped.values())

    def _put(self, thread_id: str, ns: str, key: str, chain: _Chain) -> None:
        """Hold ``chain`` in place of the key's previous one; small or huge ones are not held."""
        chain.joined = _joined(key, chain)
        if chain.joined is not None:
            chain.rows = {}
        keep = MIN_BYTES <= chain.size <= self._max // 4
        with self._lock:
            old = self._chains.get((thread_id, ns), {}).get(key)
            self._drop(thread_id, ns, key)
            if not keep:
                return
            chain.items = self._carried(old, chain)
            self._chains.setdefault((thread_id, ns), {})[key] = chain
            self._size += chain.size
            self._chains.move_to_end((thread_id, ns))
            self._evict()


H = TypeVar("H", bound=Hashable)


class _Forgets(Protocol):
    def forget_thread(self, thread_id: str) -> None: ...
    def clear(self) -> None: ...


class HoldsChains:
    """What a durable backend holds between loads: the chains (``chains``, set by the backend)
    and, if it keeps them, large blobs' bytes (``bytes``: a ``ByteCache`` or ``HeldBlobs``).
    The core tells it each newest checkpoint loaded whose rows all passed their checks
    (``loaded``); its own deletions and copies call ``forget``."""

    chains: HeldChains
    bytes: ByteCache | HeldBlobs[Any] | None = None

    def loaded(
        self, thread_id: str, ns: str, versions: Mapping[str, str], pool: Mapping[_Kv, BlobRow]
    ) -> None:
        self.chains.loaded(thread_id, ns, versions, pool)

    def forget(self, thread_id: str | None = None) -> None:
        """Let go of what is held of a thread (deleted, or replaced by a copy), or of all."""
        held: list[_Forgets] = [self.chains] if self.bytes is None else [self.chains, self.bytes]
        for h in held:
            if thread_id is None:
                h.clear()
            else:
                h.forget_thread(thread_id)


def hold_put(
    held: HeldBlobs[H],
    chains: HeldChains,
    thread_id: str,
    ns: str,
    blobs: Sequence[tuple[H, BlobRow]],
    crcs: Sequence[int] | None,
    gone: Collection[H],
) -> None:
    """What a backend with a server holds once a put committed: the bytes of its large
    ``blobs`` (each with the handle ``held`` names it by; ``crcs``: their CRC-32s, if known) and
    the chains they start or grow; the blobs ``gone`` (deleted by retention, or rewritten as
    prefix rows, which no longer hold those bytes) are named no more."""
    if crcs is None:
        crcs = [blob_crc(b) for _, b in blobs]  # what the backend stored with each
    for (handle, b), crc in zip(blobs, crcs, strict=True):
        held.add(thread_id, ns, handle, b.key, b.version, crc, b.data)
    chains.stored(thread_id, ns, [b for _, b in blobs], crcs)
    if gone:
        held.drop(thread_id, ns, gone)


def _current(held: _Chain, row: BlobRow | None) -> bool:
    """Whether ``row``, the held tip's version as a load found it, still is the held tip: a
    row held here, or one with its bytes. (Another process may have written that version again
    with other values: versions chosen by hand, a thread written again from its records.)"""
    if row is None or row is held.tip or row is held.whole:
        return True
    return blob_crc(row) == held.crc


def _array32(count: int) -> bytes:
    """The ``_JOINED_HEADER`` bytes of a plain blob of a list of ``count`` items."""
    return _PLAIN + b"\xdd" + count.to_bytes(4, "big")


def _array(data: bytes) -> tuple[int, int] | None:
    """(length, offset of the first item) of the list a plain blob holds; None otherwise."""
    if len(data) < 3 or data[:2] != _PLAIN:
        return None
    tag = data[2]
    if 0x90 <= tag <= 0x9F:
        return tag & 0x0F, 3
    if tag == 0xDC and len(data) >= 5:
        return int.from_bytes(data[3:5], "big"), 5
    if tag == 0xDD and len(data) >= 7:
        return int.from_bytes(data[3:7], "big"), 7
    return None


def _joined(key: str, chain: _Chain) -> bytearray | None:
    """The tip's value as one plain blob: the items of each row, oldest first, under one
    array header; None if a row is not a plain list (compressed, sealed) or is a prefix."""
    parts: list[bytes] = []
    count = 0
    row: BlobRow | None = chain.tip
    while True:
        head = _array(row.data) if row is not None and not row.is_prefix else None
        if row is None or head is None:
            return None
        count += head[0]
        parts.append(row.data[head[1] :])
        if row.base is None:
            break
        row = chain.rows.get((key, row.base))
    parts.append(_array32(count))
    parts.reverse()
    return bytearray().join(parts)


def _append(joined: bytearray, delta: bytes) -> bool:
    """Append the items of ``delta`` to ``joined`` in place; False if it is not a plain list."""
    head = _array(delta)
    if head is None or delta[:2] != _PLAIN:
        return False
    count = int.from_bytes(joined[3:7], "big") + head[0]
    joined[3:7] = count.to_bytes(4, "big")
    joined += memoryview(delta)[head[1] :]
    return True
