"""Keys and failures of the Redis saver: one slot per thread, clear errors for damaged data,
dead servers, closed savers, other layouts and bad prefixes.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import pytest
import redis
from redis.crc import key_slot
from redis_fixtures import (
    REDIS_URL,
    SESSION_PREFIX,
    _session_keys_are_removed,
    blob_keys,
    client,
    conversation,
    keys_of,
    record,
    redis_saver,
    saver,
    step,
    unlink_prefix,
)
from services import require_redis

from threadline.checkpoint.base import (
    TaskWrite,
)
from threadline.checkpoint.redis import SCHEMA_VERSION, RedisSaver, mask_url
from threadline.checkpoint.redis import connection as redis_requests
from threadline.checkpoint.redis import saver as saver_module
from threadline.errors import SaverUnavailableError, SerializationError

__all__ = ["_session_keys_are_removed", "client", "saver"]  # fixtures used here


# -- isolation of odd ids -------------------------------------------------------------------------


@pytest.mark.parametrize("thread_id", ["{braces}", "a:b", "*?[x]", "", "tab\tnew\nline", "線程"])
def test_a_threads_keys_share_one_slot_and_stay_apart(
    saver: RedisSaver, client: redis.Redis, thread_id: str
) -> None:
    cps = conversation(saver, thread_id, 3)
    saver.put(record(thread_id, step(None, {"c": 1}), ns="child:{x}"))
    saver.put_writes(thread_id, "", cps[-1].id, [TaskWrite("t:{1}", "n", "result", 1)])
    conversation(saver, thread_id + "x", 2)  # a neighbour whose id extends this one
    keys = [k for k in keys_of(client, saver) if not k.startswith(saver.prefix + ":threads")]
    mine = [k for k in keys if k.startswith(saver.prefix + ":{t:" + _quoted(thread_id) + "}")]
    assert len({key_slot(k.encode()) for k in mine}) == 1
    assert len(mine) > 10
    got = saver.get_tuple(thread_id)
    assert got is not None and got.thread_id == thread_id and got.checkpoint == cps[-1]
    assert [t.thread_id for t in saver.list_threads()] == [thread_id + "x", thread_id]
    saver.delete_thread(thread_id)
    assert [k for k in keys_of(client, saver) if k in mine] == []
    assert saver.get_tuple(thread_id + "x") is not None


def _quoted(text: str) -> str:
    return quote(text, safe="")


# -- bad data and dead servers ------------------------------------------------------------------


def test_a_corrupted_blob_is_a_clear_error_and_harms_no_other_thread(
    saver: RedisSaver, client: redis.Redis
) -> None:
    cps = conversation(saver, "bad", 2)
    good = conversation(saver, "good", 2)
    (key,) = [k for k in blob_keys(client, saver, "bad") if ":b::big:" in k]
    stored = client.get(key)
    assert stored is not None
    client.set(key, stored[: len(stored) // 2])  # truncated
    with pytest.raises(SerializationError) as info:
        saver.get_tuple("bad")
    message = str(info.value)
    assert "'big'" in message and "'bad'" in message and cps[-1].id in message
    with pytest.raises(SerializationError):
        list(saver.list("bad"))
    got = saver.get_tuple("good")
    assert got is not None and got.checkpoint == good[-1]
    assert [r.checkpoint for r in saver.list("good")] == good[::-1]


def test_a_damaged_row_names_its_redis_key(saver: RedisSaver, client: redis.Redis) -> None:
    (cp,) = conversation(saver, "bad", 1)
    row = f"{saver.prefix}:{{t:bad}}:c::{cp.id}"
    client.set(row, b"no header")
    with pytest.raises(SerializationError, match="malformed") as info:
        saver.get_tuple("bad")
    assert row in str(info.value)
    client.set(row, b"2026-01-01 9 \n\x01\x00garbage\x01")  # metadata and body undecodable
    with pytest.raises(SerializationError, match="'bad'"):
        saver.get_tuple("bad")


def test_unreachable_server_is_saver_unavailable_with_masked_password() -> None:
    url = "redis://ada:s3cret-pw@127.0.0.1:1/0"
    with pytest.raises(SaverUnavailableError) as info:
        RedisSaver(url)
    message = str(info.value)
    assert "127.0.0.1:1" in message and "***" in message and "s3cret-pw" not in message
    assert mask_url("redis://:pw@h:1/0?password=x&db=2") == "redis://:***@h:1/0?password=***&db=2"


class Proxy:
    """A TCP forwarder to the test Redis that can be cut, as when the server goes away."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 6379)
        self.listener = socket.create_server(("127.0.0.1", 0))
        port = self.listener.getsockname()[1]
        netloc = parts.netloc.rpartition("@")[0]
        self.url = urlunsplit(
            parts._replace(netloc=f"{netloc}@" * bool(netloc) + f"127.0.0.1:{port}")
        )
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                inbound, _ = self.listener.accept()
            except OSError:
                return
            outbound = socket.create_connection(self.target)
            self.sockets += [inbound, outbound]
            for a, b in ((inbound, outbound), (outbound, inbound)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass

    def cut(self) -> None:
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread
        self.listener.close()
        for s in self.sockets:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()


async def test_server_lost_after_start_is_saver_unavailable() -> None:
    proxy = Proxy(require_redis())
    prefix = f"{SESSION_PREFIX}:lost"
    saver = RedisSaver(proxy.url, prefix=prefix)
    try:
        saver.put(record("t", step(None, {"x": 1})))
        assert await saver.aget_tuple("t") is not None
        proxy.cut()
        port = proxy.url.rsplit(":", 1)[1].split("/")[0]
        with pytest.raises(SaverUnavailableError, match=f"cannot reach Redis at .*:{port}"):
            saver.get_tuple("t")
        with pytest.raises(SaverUnavailableError, match=f"cannot reach Redis at .*:{port}"):
            await saver.aput(record("t2", step(None, {"x": 1})))
    finally:
        saver.close()
        unlink_prefix(prefix)


async def test_closed_saver_refuses_work() -> None:
    with redis_saver() as saver:
        await saver.aput(record("t", step(None, {"x": 1})))
    with pytest.raises(SaverUnavailableError, match="closed"):
        saver.get_tuple("t")
    with pytest.raises(SaverUnavailableError, match="closed"):
        await saver.aget_tuple("t")


def test_a_newer_layout_is_refused(client: redis.Redis) -> None:
    prefix = f"{SESSION_PREFIX}:newer"
    client.set(f"{prefix}:schema_version", SCHEMA_VERSION + 1)
    with pytest.raises(SaverUnavailableError, match="upgrade threadline"):
        RedisSaver(REDIS_URL, prefix=prefix)
    client.set(f"{prefix}:schema_version", SCHEMA_VERSION)
    RedisSaver(REDIS_URL, prefix=prefix).close()
    unlink_prefix(prefix)


def test_an_older_layout_is_migrated_when_a_saver_starts(
    client: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A synthetic next layout adds a key per thread: data of the current layout is migrated
    when a saver starts and the version key moves; a layout older than any migration (layout
    1: text creation times, the loop's metadata as bytes) is refused."""
    prefix = f"{SESSION_PREFIX}:older"
    first = step(None, {"n": 1, "items": [1]})
    with RedisSaver(REDIS_URL, prefix=prefix) as saver:
        saver.put(record("t", first))
    current, synthetic = SCHEMA_VERSION, SCHEMA_VERSION + 1

    def to_next(migrated_prefix: str) -> Any:
        yield redis_requests.Call("set", (f"{migrated_prefix}:layout-next-note", "migrated"))

    try:
        monkeypatch.setattr(saver_module, "SCHEMA_VERSION", synthetic)
        monkeypatch.setattr(saver_module, "MIGRATIONS", {current: to_next})
        with RedisSaver(REDIS_URL, prefix=prefix) as saver:
            assert client.get(f"{prefix}:schema_version") == str(synthetic).encode()
            assert client.get(f"{prefix}:layout-next-note") == b"migrated"
            got = saver.get_tuple("t")
            assert got is not None and got.checkpoint == first
        client.set(f"{prefix}:schema_version", 1)
        with pytest.raises(SaverUnavailableError, match="format version 1, which this threadline"):
            RedisSaver(REDIS_URL, prefix=prefix)
    finally:
        unlink_prefix(prefix)


def test_prefix_with_braces_is_refused() -> None:
    with pytest.raises(ValueError, match="braces"):
        RedisSaver(REDIS_URL, prefix="a{b}")
