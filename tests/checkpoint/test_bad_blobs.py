"""Stored values a saver cannot read fail that one thread, clearly, on every durable backend.

A value written by a newer threadline (its serde header names a newer format version) must say
to upgrade rather than report damage, and neither it nor a damaged value may stop the saver
from loading other threads. The bytes are changed in storage itself (``storage.py``) and read
back through a fresh saver, so no cached copy hides the change.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from builders import step
from factories import SAVER_FACTORIES
from storage import Change, reopened, rewrite_value

from threadline.checkpoint import BaseSaver, Checkpoint
from threadline.errors import SerializationError
from threadline.serde import wire as fmt

DURABLE = ["files", "postgres", "redis", "sqlite"]


@pytest.fixture(params=DURABLE)
def saver(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BaseSaver]:
    with SAVER_FACTORIES[request.param](tmp_path) as instance:
        yield instance


def two_threads(saver: BaseSaver) -> tuple[Checkpoint, Checkpoint]:
    """Thread "bad" and bystander "good", each one checkpoint holding a plain value ``k``."""
    bad, good = step("bad", {"k": ["bad value"]}, None), step("good", {"k": ["good value"]}, None)
    saver.put(bad)
    saver.put(good)
    return bad.checkpoint, good.checkpoint


def newer_format(data: bytes) -> bytes:
    """The same value, its header naming the format version after this threadline's."""
    assert data[0] == fmt.FORMAT_VERSION
    return bytes([fmt.FORMAT_VERSION + 1]) + data[1:]


def flip_last_byte(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


async def assert_only_bad_fails(saver: BaseSaver, good: Checkpoint, match: str) -> None:
    with reopened(saver) as fresh:
        with pytest.raises(SerializationError, match=match) as info:
            fresh.get_tuple("bad")
        assert "thread 'bad'" in str(info.value)  # which thread failed, on every backend
        with pytest.raises(SerializationError, match=match):
            await fresh.aget_tuple("bad")
        with pytest.raises(SerializationError, match=match):
            list(fresh.list("bad"))
        got = fresh.get_tuple("good")
        assert got is not None and got.checkpoint == good
        got = await fresh.aget_tuple("good")
        assert got is not None and got.checkpoint == good


def tamper(saver: BaseSaver, cp: Checkpoint, change: Change, *, crc: bool) -> None:
    rewrite_value(saver, "bad", "k", cp.versions["k"], change, crc=crc)


async def test_a_value_from_a_newer_threadline_says_to_upgrade(saver: BaseSaver) -> None:
    """The checksum matches (the newer version wrote it whole): only the header can tell, and
    the message must point at the fix (upgrading), not at damage."""
    bad, good = two_threads(saver)
    tamper(saver, bad, newer_format, crc=True)
    await assert_only_bad_fails(saver, good, r"(?s)'k'.*newer threadline.*upgrade threadline")


async def test_a_damaged_value_fails_its_thread_alone(saver: BaseSaver) -> None:
    """One byte changed behind the checksum's back: the thread fails naming the key; the other
    thread, stored in the same tables, files or key space, still loads."""
    bad, good = two_threads(saver)
    tamper(saver, bad, flip_last_byte, crc=False)
    await assert_only_bad_fails(saver, good, "'k'")
