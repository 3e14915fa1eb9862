"""Large values held in the process: loaded again, the Redis saver gets only their header
unless they changed in Redis.
"""

from __future__ import annotations

import dataclasses

import pytest
import redis
from redis_fixtures import (
    REDIS_URL,
    Replies,
    Wire,
    _session_keys_are_removed,
    blob_keys,
    client,
    conversation,
    keys_of,
    long_log,
    record,
    replies,
    saver,
    step,
    wire,
)

from threadline import serde
from threadline.checkpoint.redis import RedisSaver
from threadline.errors import SerializationError

__all__ = [
    "_session_keys_are_removed",
    "client",
    "replies",
    "saver",
    "wire",
]  # fixtures used here


def test_a_large_value_loaded_again_comes_as_its_header_only(
    saver: RedisSaver, wire: Wire, replies: Replies
) -> None:
    cps = long_log(saver, "t", 2)
    big = [f"{i:04d}" + "y" * 2000 for i in range(60)]  # one full blob of about 120 KB
    cps.append(step(cps[-1], {"log": big}))
    saver.put(record("t", cps[-1], cps[-2]))
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # holds nothing yet
        replies.reset()
        got = fresh.get_tuple("t")
        assert got is not None and got.checkpoint == cps[-1]
        assert replies.total > 100_000
        wire.reset()
        replies.reset()
        again = fresh.get_tuple("t")
        assert wire.requests == [["EVALSHA"]]
        assert again is not None and again.checkpoint == cps[-1]
        assert replies.total < 2_000
    replies.reset()
    got = saver.get_tuple("t")  # the saver that wrote the blob holds its bytes since the put
    assert got is not None and got.checkpoint == cps[-1] and replies.total < 2_000


async def test_async_loads_use_the_held_bytes_too(saver: RedisSaver, replies: Replies) -> None:
    cps = long_log(saver, "t", 80)
    got = await saver.aget_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    replies.reset()
    got = await saver.aget_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    assert replies.total < 0.2 * len(serde.DEFAULT.dumps(cps[-1].values["log"]))


def test_load_cost_stays_flat_as_a_conversation_grows(saver: RedisSaver, replies: Replies) -> None:
    """Each load brings the chain of small deltas, never the large full blob again."""
    cps = long_log(saver, "t", 150)
    per_load = []
    for cp in (cps[40], cps[99], cps[149]):
        replies.reset()
        got = saver.get_tuple("t", "", cp.id)
        assert got is not None and got.checkpoint == cp
        per_load.append(replies.total)
    replies.reset()
    assert [r.checkpoint for r in saver.list("t", limit=3)] == cps[:-4:-1]
    assert replies.total < 3 * 64 * 1024
    full = len(serde.DEFAULT.dumps(cps[-1].values["log"]))
    assert full > 250_000 and max(per_load) < 64 * 1024


def test_a_large_value_rewritten_behind_the_saver_is_read_again(
    saver: RedisSaver, replies: Replies
) -> None:
    cp = step(None, {"log": [f"{i:04d}" + "y" * 2000 for i in range(60)]})
    saver.put(record("t", cp))
    assert (got := saver.get_tuple("t")) is not None and got.checkpoint == cp
    rewritten = dataclasses.replace(
        cp, values={"log": [f"{i:04d}" + "z" * 2000 for i in range(60)]}
    )
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as other:  # another process, same ids
        other.delete_thread("t")
        other.put(record("t", rewritten))
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == rewritten
    assert replies.total > 100_000  # a different CRC-32: sent whole
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == rewritten and replies.total < 2_000


def test_a_damaged_blob_that_still_decodes_fails_its_checksum(
    saver: RedisSaver, client: redis.Redis
) -> None:
    (cp,) = conversation(saver, "bad", 1)
    (key,) = [k for k in blob_keys(client, saver, "bad") if ":b::big:" in k]
    header, _, data = client.get(key).partition(b"\n")
    client.set(key, header + b"\n" + data.replace(b"b", b"c"))  # same length, still a string
    with pytest.raises(SerializationError, match="CRC-32") as info:
        saver.get_tuple("bad")  # 1 KB: never held, always sent and checked
    assert "'big'" in str(info.value) and cp.id in str(info.value)


def test_delete_thread_forgets_the_held_bytes(
    saver: RedisSaver, client: redis.Redis, replies: Replies
) -> None:
    cps = long_log(saver, "t", 60)
    assert saver.get_tuple("t") is not None
    dumped = {k: client.dump(k) for k in keys_of(client, saver, "t")}
    saver.delete_thread("t")
    for k, value in dumped.items():  # the very same bytes come back
        client.restore(k, 0, value)
    replies.reset()
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    assert replies.total > 100_000  # forgotten: the data came over the wire again
