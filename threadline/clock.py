"""Timestamps as checkpoints and thread rows store them: UTC ISO 8601 with microseconds.

Made several times per step, so the date part is formatted once a second and reused.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

_second: tuple[int, str] = (-1, "")  # the last whole second formatted
_made: tuple[str, int] = ("", 0)  # the last text ``iso_at`` made, and its microseconds
_lock = threading.Lock()
_last = 0  # microseconds of the last ``increasing_iso``


def iso_at(micros: int) -> str:
    """``micros`` (Unix time in microseconds) as ``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``."""
    global _second, _made
    seconds, fraction = divmod(micros, 1_000_000)
    cached = _second  # one read: another thread may replace it meanwhile
    if seconds != cached[0]:
        cached = (seconds, datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S"))
        _second = cached
    text = f"{cached[1]}.{fraction:06d}+00:00"
    _made = (text, micros)
    return text


def made_micros(text: str) -> int | None:
    """The microseconds ``iso_at`` made ``text`` of, if it is the last text it made (a
    checkpoint's ``created_at`` when it is saved, most often); else ``None``. No parse."""
    made = _made  # one read: another thread may replace it meanwhile
    return made[1] if text == made[0] else None


def now_iso() -> str:
    return iso_at(time.time_ns() // 1000)


def increasing_micros() -> int:
    """Unix time in microseconds, strictly increasing within the process."""
    global _last
    micros = time.time_ns() // 1000
    with _lock:
        micros = _last = max(micros, _last + 1)
    return micros


def increasing_iso() -> str:
    """Like ``now_iso``, but strictly increasing within the process (orders thread rows)."""
    return iso_at(increasing_micros())
