"""Checkpoint ids that sort by creation time (UUIDv7 layout, monotonic within a process)."""

from __future__ import annotations

import os
import random
import threading
import time

# Ids need uniqueness, not secrecy: a PRNG seeded from the OS is enough and much cheaper than
# os.urandom per id. A forked child reseeds, so parent and child never share a sequence.
_rng = random.Random()
_random_bits = _rng.getrandbits
os.register_at_fork(after_in_child=_rng.seed)

_lock = threading.Lock()
_last = (0, 0)  # (milliseconds, counter) of the last id handed out


def new_checkpoint_id() -> str:
    """A UUIDv7 string; ids made later in this process always compare greater."""
    global _last
    with _lock:
        ms = time.time_ns() // 1_000_000
        last_ms, counter = _last
        if ms <= last_ms:
            ms, counter = last_ms, counter + 1
            if counter >= 1 << 12:
                ms, counter = ms + 1, 0
        else:
            counter = 0
        _last = (ms, counter)
    value = (ms << 80) | (0x7 << 76) | (counter << 64) | (0b10 << 62) | _random_bits(62)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
