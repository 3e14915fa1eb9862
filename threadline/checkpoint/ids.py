"""Checkpoint ids that sort by creation time (UUIDv7 layout, monotonic within a process).

An id is the millisecond, a counter within it, and 62 random bits. The random bits keep ids of
different processes apart, so they are drawn once per process (again in a forked child), not
per id: within a process the millisecond and counter already differ. Ids need uniqueness, not
secrecy, and one is made at every step, so the text of the millisecond is reused too.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import time
from collections.abc import Callable


def _new_tail() -> str:
    bits = secrets.randbits(62)
    return f"-{0x8000 | bits >> 48:04x}-{bits & 0xFFFF_FFFF_FFFF:012x}"


_tail = _new_tail()
# An id's counter group, ``-7`` and the counter's three hex digits, from two small tables:
# formatting it (``f"-{0x7000 | counter:04x}"``) costs a quarter of making an id.
_HIGH = [f"-7{n:x}" for n in range(16)]
_LOW = [f"{n:02x}" for n in range(256)]
_lock = threading.Lock()
_last = (0, 0, "00000000-0000")  # (millisecond, counter, text of the millisecond) of the last id


def _reseed() -> None:
    global _tail
    _tail = _new_tail()


os.register_at_fork(after_in_child=_reseed)


def new_checkpoint_id() -> str:
    """A UUIDv7 string; ids made later in this process always compare greater."""
    global _last
    ms = time.time_ns() // 1_000_000
    with _lock:
        last_ms, counter, head = _last
        if ms > last_ms:
            counter, head = 0, _head(ms)
        elif counter < 0xFFF:
            ms, counter = last_ms, counter + 1
        else:  # 4,096 ids in one millisecond: borrow the next one
            ms, counter = last_ms + 1, 0
            head = _head(ms)
        _last = (ms, counter, head)
    return head + _HIGH[counter >> 8] + _LOW[counter & 0xFF] + _tail


def _head(ms: int) -> str:
    return f"{ms >> 16:08x}-{ms & 0xFFFF:04x}"


def run_local_ids(ns: str) -> Callable[[], str]:
    """Ids for the checkpoints of a run without a saver: unique within the run (task ids are
    derived from them), made without the lock and clock of ``new_checkpoint_id``.

    A subgraph run gets the same ids whenever its parent's task runs again (its namespace is
    stable), so the interrupt ids of a checkpointer=False subgraph match their answers.
    """
    prefix = f"{ns}-" if ns else f"run-{secrets.token_hex(8)}-"
    counter = itertools.count()
    return lambda: f"{prefix}{next(counter):08x}"


_HEX = frozenset("0123456789abcdef")
_read = ("-", 0)  # the text of the millisecond of the last id ``id_millis`` parsed, and its value


def id_millis(checkpoint_id: str) -> int | None:
    """The Unix millisecond of a UUIDv7 id (lowercase, as ``new_checkpoint_id`` spells it),
    or ``None`` for any other id. An id of the millisecond of the last one made here (most
    ids saved) or of the last one parsed (neighbours in a listing) is read without a parse."""
    global _read
    if len(checkpoint_id) != 36 or checkpoint_id[14] != "7" or checkpoint_id[13] != "-":
        return None
    last, read = _last, _read  # one read each: another thread may replace them meanwhile
    if checkpoint_id.startswith(last[2]):
        return last[0]
    if checkpoint_id.startswith(read[0]):
        return read[1]
    digits = checkpoint_id[:8] + checkpoint_id[9:13]
    if checkpoint_id[8] != "-" or not _HEX.issuperset(digits):
        return None
    ms = int(digits, 16)
    _read = (checkpoint_id[:13], ms)
    return ms
