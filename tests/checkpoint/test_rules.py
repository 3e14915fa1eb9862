"""The rules every saver shares: here, reading a checkpoint's ``created_at`` as Unix time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from threadline.checkpoint.rules import created_ts
from threadline.clock import iso_at


@given(st.integers(min_value=0, max_value=4_102_444_800 * 1_000_000))
def test_the_form_the_clock_writes_reads_back_to_the_microsecond(micros: int) -> None:
    text = iso_at(micros)
    read = created_ts(text)
    assert read is not None and round(read * 1_000_000) == micros
    assert read == datetime.fromisoformat(text).timestamp()


def test_other_forms_are_read_by_a_full_parse() -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, 600_000, tzinfo=UTC)
    assert created_ts("2026-01-02T03:04:05.6+00:00") == when.timestamp()
    assert created_ts("2026-01-02T03:04:05.600000") == when.timestamp()  # naive is UTC
    east = when.astimezone(UTC).replace(tzinfo=None).isoformat() + "+02:00"
    assert created_ts(east) == (when - timedelta(hours=2)).timestamp()
    assert created_ts("2026-13-02T03:04:05.600000+00:00") is None  # no month 13
    assert created_ts("2026-01-02T03:04:05.6000x0+00:00") is None
    assert created_ts("not a time") is None
