"""The Redis saver holds the newest delta chain of a long list (``chains.HeldChains``): the
``read`` script stops at a held tip whose stored CRC-32 matches, so a load of a long
conversation gets only what was added since the last one. A tip changed in Redis is read and
checked as before.

Bytes are counted per reply (``Replies``, from ``redis_fixtures``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
import redis
from redis_fixtures import (
    REDIS_URL,
    Replies,
    Wire,
    base_ref,
    client,
    long_log,
    record,
    redis_saver,
    replies,
    saver,
    step,
    wire,
)

from threadline.checkpoint.base import Checkpoint
from threadline.checkpoint.redis import RedisSaver
from threadline.checkpoint.redis import connection as redis_requests
from threadline.errors import SerializationError

__all__ = ["client", "replies", "saver", "wire"]  # fixtures of redis_fixtures, used here

ENTRY = 2004  # bytes of one ``long_log`` entry
TURNS = 70  # a 140 KB list whose newest blob is a delta with several deltas below it


def tip_key(saver: RedisSaver, thread_id: str, cp: Checkpoint) -> str:
    return f"{saver.prefix}:{{t:{thread_id}}}:b::log:{cp.versions['log']}"


def deltas_below(client: redis.Redis, key: str) -> int:
    """How many deltas the chain under ``key`` (itself included) holds above its full blob."""
    count = 0
    while (base := base_ref(client, key)) is not None:
        count += 1
        key = key.split("}", 1)[0] + "}" + base.decode()
    return count


def grown(parent: Checkpoint, entry: str) -> Checkpoint:
    return step(parent, {"log": [*parent.values["log"], entry]})


def test_a_load_gets_only_what_was_added_since_the_last_one(
    client: redis.Redis, replies: Replies, wire: Wire
) -> None:
    with redis_saver() as writer:
        cps = long_log(writer, "t", TURNS)
        with RedisSaver(REDIS_URL, prefix=writer.prefix) as reader:  # another process
            replies.reset()
            got = reader.get_tuple("t")
            assert got is not None and got.checkpoint == cps[-1]
            assert replies.total > TURNS * ENTRY
            cps.append(grown(cps[-1], "new " + "y" * 2000))
            writer.put(record("t", cps[-1], cps[-2]))
            assert deltas_below(client, tip_key(writer, "t", cps[-1])) >= 5
            replies.reset()
            wire.reset()
            got = reader.get_tuple("t")
            assert got is not None and got.checkpoint == cps[-1]
            assert wire.requests == [["EVALSHA"]]
            assert replies.total < ENTRY + 1_000  # the new delta, not the chain below it
            replies.reset()
            got = reader.get_tuple("t")  # nothing new: the tip's header line alone
            assert got is not None and got.checkpoint == cps[-1] and replies.total < 1_000


async def test_async_loads_stop_at_the_held_tip_too(saver: RedisSaver, replies: Replies) -> None:
    cps = long_log(saver, "t", TURNS)  # the saver holds the chain it stored
    replies.reset()
    got = await saver.aget_tuple("t")
    assert got is not None and got.checkpoint == cps[-1] and replies.total < 1_000


def test_rows_below_a_held_tip_are_not_read_again(saver: RedisSaver, client: redis.Redis) -> None:
    """Damage below the tip goes unseen by the saver that holds those rows (it never reads
    them again); a cold saver reads them, checks them and refuses."""
    cps = long_log(saver, "t", TURNS)
    key = tip_key(saver, "t", cps[-1])
    assert deltas_below(client, key) >= 2
    below = key.split("}", 1)[0] + "}" + (base_ref(client, key) or b"").decode()
    header, _, data = client.get(below).partition(b"\n")
    client.set(below, header + b"\n" + data.replace(b"x", b"z"))  # same length and header
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as cold, pytest.raises(SerializationError):
        cold.get_tuple("t")


def test_a_damaged_tip_is_read_and_checked(saver: RedisSaver, client: redis.Redis) -> None:
    cps = long_log(saver, "t", TURNS)
    key = tip_key(saver, "t", cps[-1])
    header, _, data = client.get(key).partition(b"\n")
    *fields, crc = header.split(b"|")
    client.set(key, b"|".join([*fields, str(int(crc) + 1).encode()]) + b"\n" + data)
    with pytest.raises(SerializationError, match="CRC-32"):
        saver.get_tuple("t")


def test_a_tip_rewritten_by_another_process_is_read_again_and_grown_from(
    saver: RedisSaver,
) -> None:
    cps = long_log(saver, "t", TURNS)
    assert (got := saver.get_tuple("t")) is not None and got.checkpoint == cps[-1]
    # the thread made again elsewhere with the same ids (so the same versions), other bytes
    other_log = [entry.replace("x", "z") for entry in cps[-1].values["log"]]
    again = [
        dataclasses.replace(cp, values={"log": other_log[: i + 1]}) for i, cp in enumerate(cps)
    ]
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as other:
        other.delete_thread("t")
        for parent, cp in zip([None, *again], again, strict=False):
            other.put(record("t", cp, parent))
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == again[-1]
    latest = grown(again[-1], "after")
    saver.put(record("t", latest, again[-1]))  # a delta on the rewritten tip
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == latest


def test_a_chain_let_go_while_its_load_was_sent_is_read_again(
    saver: RedisSaver, monkeypatch: pytest.MonkeyPatch
) -> None:
    cps = long_log(saver, "t", TURNS)
    assert saver.backend.chains.tips("t", "")  # white box: nothing else tells what is held
    sent: list[Any] = []
    real_send = redis_requests.send

    def send(client: Any, request: Any) -> Any:
        reply = real_send(client, request)
        sent.append(request)
        saver.backend.chains.clear()  # as if another load or put had moved the tip meanwhile
        return reply

    monkeypatch.setattr(redis_requests, "send", send)
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cps[-1]
    assert [request.args[4] for request in sent] == [1, 0]  # tips named: one, then none
