"""Timestamps as checkpoints and thread rows store them: UTC ISO 8601 with microseconds.

Made several times per step, so the date part is formatted once a second and reused.
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime

_second: tuple[int, str] = (-1, "")  # the last whole second formatted or read, and its text
_made = ("1970-01-01T00:00:00.000000+00:00", 0)  # the last text ``iso_at`` made, its micros
_lock = threading.Lock()
_last = 0  # microseconds of the last ``increasing_iso``


def iso_at(micros: int) -> str:
    """``micros`` (Unix time in microseconds) as ``YYYY-MM-DDTHH:MM:SS.ffffff+00:00``."""
    global _second, _made
    seconds, fraction = divmod(micros, 1_000_000)
    cached = _second  # one read: another thread may replace it meanwhile
    if seconds != cached[0]:
        cached = (seconds, _spell(seconds))
        _second = cached
    text = f"{cached[1]}.{fraction:06d}+00:00"
    _made = (text, micros)
    return text


def micros_of(text: str) -> int | None:
    """The Unix microseconds ``text`` spells if ``iso_at`` spells them exactly so, else
    ``None``. Read at every put: the last text made needs no parse, nor does a date and time
    of the second last formatted or read."""
    global _second
    made = _made  # one read: another thread may replace it meanwhile
    if text == made[0]:
        return made[1]
    if type(text) is not str or len(text) != 32 or text[19] != "." or text[26:] != "+00:00":
        return None
    fraction = text[20:26]
    if not (fraction.isdigit() and fraction.isascii()):
        return None
    cached = _second
    if text[:19] != cached[1]:
        parsed = _second_of(text[:19])
        if parsed is None:
            return None
        cached = _second = parsed
    return cached[0] * 1_000_000 + int(fraction)


def _second_of(text: str) -> tuple[int, str] | None:
    """``(Unix seconds, text)`` of a UTC ``YYYY-MM-DDTHH:MM:SS`` spelled as ``iso_at`` spells
    it, else ``None``."""
    try:
        when = datetime.fromisoformat(text + "+00:00")
    except ValueError:
        return None
    seconds = int(when.timestamp())
    return (seconds, text) if _spell(seconds) == text else None


def _spell(seconds: int) -> str:
    """``YYYY-MM-DDTHH:MM:SS`` in UTC, the year in four digits (``strftime`` leaves years before
    1000 short on some platforms)."""
    return datetime.fromtimestamp(seconds, UTC).isoformat()[:19]


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
