"""How long the client waits before a retry: what the server asks for, else a backoff."""

from __future__ import annotations

import email.utils
import time

import httpx
import pytest

from threadline.models.transport import MAX_RETRY_AFTER, backoff, retry_after


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({}, None),
        ({"Retry-After": "3"}, 3.0),
        ({"Retry-After": "0.25"}, 0.25),
        ({"retry-after-ms": "1500", "Retry-After": "9"}, 1.5),  # the finer one wins
        ({"Retry-After": "3600"}, MAX_RETRY_AFTER),  # capped: never hang for an hour
        ({"Retry-After": "-5"}, 0.0),
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "nan"}, None),
    ],
)
def test_retry_after_reads_the_servers_wish(headers: dict[str, str], expected: float) -> None:
    assert retry_after(httpx.Headers(headers)) == expected


def test_retry_after_as_an_http_date() -> None:
    in_ten = email.utils.formatdate(time.time() + 10, usegmt=True)
    wait = retry_after(httpx.Headers({"Retry-After": in_ten}))
    assert wait is not None and 8 <= wait <= 10


def test_backoff_doubles_with_jitter_up_to_a_cap() -> None:
    for attempt, full in [(0, 0.5), (1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (9, 8.0)]:
        waits = [backoff(attempt) for _ in range(50)]
        assert all(0.75 * full <= w <= full for w in waits)
        assert len(set(waits)) > 1  # jittered, so that clients retrying together spread out
