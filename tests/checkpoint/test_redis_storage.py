"""How the Redis saver stores values: deltas, compaction, small scalars inline, and what
pruning, retention and copying keep.
"""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
import redis
from redis_fixtures import (
    REDIS_URL,
    _session_keys_are_removed,
    base_ref,
    blob_keys,
    client,
    conversation,
    keys_of,
    long_log,
    record,
    redis_saver,
    saver,
    step,
)

from threadline import serde
from threadline.checkpoint.base import (
    Checkpoint,
    Retention,
    TaskWrite,
)
from threadline.checkpoint.changes import Append, ChangedRecord
from threadline.checkpoint.redis import RedisSaver

__all__ = ["_session_keys_are_removed", "client", "saver"]  # fixtures used here


def blob_data(client: redis.Redis, key: str) -> bytes:
    """A stored blob's data, without its header line."""
    stored = client.get(key)
    assert stored is not None, key
    return stored.partition(b"\n")[2]


# -- storage: deltas, pruning, retention, copies ------------------------------------------------


def test_growing_list_is_stored_as_deltas(saver: RedisSaver, client: redis.Redis) -> None:
    cps = conversation(saver, "t", 60)
    final = cps[-1].values["messages"]
    list_bytes = sum(
        len(blob_data(client, k)) for k in blob_keys(client, saver, "t") if ":b::messages:" in k
    )
    one_copy = len("".join(final))
    assert list_bytes < 1.5 * one_copy  # not 60 copies of a growing list
    assert len([k for k in blob_keys(client, saver, "t") if ":b::big:" in k]) == 1  # unchanged
    for i in (0, 1, 17, 59):
        got = saver.get_tuple("t", "", cps[i].id)
        assert got is not None and got.checkpoint == cps[i]


def test_compaction_turns_old_versions_into_prefix_rows(
    saver: RedisSaver, client: redis.Redis
) -> None:
    cps = long_log(saver, "t", 150)
    headers = [client.get(k).partition(b"\n")[0] for k in blob_keys(client, saver, "t")]
    kinds = [h.split(b"|")[0] for h in headers]
    assert kinds.count(b"f") == 1 and kinds.count(b"p") > 100 and kinds.count(b"d") < 40
    stored = sum(len(client.get(k)) for k in blob_keys(client, saver, "t"))
    assert stored < 1.2 * len(serde.DEFAULT.dumps(cps[-1].values["log"]))
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # nothing cached: reads follow
        for cp in cps:  # prefix rows to later versions, in the read script
            got = fresh.get_tuple("t", "", cp.id)
            assert got is not None and got.checkpoint == cp


def test_one_key_per_checkpoint_and_per_value(saver: RedisSaver, client: redis.Redis) -> None:
    """Keys cost Redis memory of their own: a checkpoint is one string, its writes (if any) one
    hash, an unchanged value is not stored again."""
    cps = conversation(saver, "t", 10)
    saver.put_writes("t", "", cps[3].id, [TaskWrite("a", "n", "result", 1)])
    saver.put_writes("t", "", cps[3].id, [TaskWrite("b", "n", "error", "x")])
    keys = keys_of(client, saver, "t")
    checkpoints = [k for k in keys if ":c::" in k]
    assert len(checkpoints) == 10
    assert all(client.type(k) == b"string" for k in checkpoints)
    assert [k for k in keys if ":w::" in k] == [f"{saver.prefix}:{{t:t}}:w::{cps[3].id}"]
    assert len([k for k in keys if ":b::big:" in k]) == 1
    assert len([k for k in keys if ":b::count:" in k]) == 10


def test_small_scalars_live_in_the_checkpoints(saver: RedisSaver, client: redis.Redis) -> None:
    """A step that changes only small scalars writes its checkpoint key and no blob key; each
    checkpoint holds every small scalar, changed or not, so none is looked up elsewhere."""
    small = {"n": 0, "ratio": 0.5, "done": False, "none": None, "word": "w" * 64, "raw": b"r"}
    records = []
    parent: Checkpoint | None = None
    for i in range(5):
        values = {**small, "n": i, "doc": "d" * 65, "items": [1]}
        records.append(record("t", step(parent, values), parent))
        saver.put(records[-1])
        parent = records[-1].checkpoint
    tag = f"{saver.prefix}:{{t:t}}"
    # "doc" is one character too long to be inline, "items" a list: one blob each, as ever.
    blobs = [k.removeprefix(tag).rsplit(":", 1)[0] for k in blob_keys(client, saver, "t")]
    assert blobs == [":b::doc", ":b::items"]
    header = client.get(f"{tag}:c::{parent.id}").partition(b"\n")[0].split(b" ")
    assert [s.rsplit(b":", 1)[0] for s in header[2:]] == [b":b::doc", b":b::items"]
    for rec in records:
        got = saver.get_tuple("t", "", rec.checkpoint.id)
        assert got is not None and got.checkpoint == rec.checkpoint
    assert saver.prune("t", keep_last=1) == 4  # the kept checkpoint still holds "word", "raw"
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == parent
    assert len(blob_keys(client, saver, "t")) == 2
    saver.copy_thread("t", "copy")
    saver.delete_thread("t")
    assert keys_of(client, saver, "t") == []
    got = saver.get_tuple("copy")
    assert got is not None and got.checkpoint == parent


def test_long_versions_chain_and_prune_like_short_ones(
    saver: RedisSaver, client: redis.Redis
) -> None:
    """A blob header longer than the bytes first read for it is read whole."""
    cps: list[Checkpoint] = []
    parent: Checkpoint | None = None
    for i in range(6):
        cp = step(parent, {"messages": [*(parent.values["messages"] if parent else []), i]})
        cp = dataclasses.replace(cp, versions={"messages": "v" * 600 + str(i)})
        saver.put(record("t", cp, parent))
        cps.append(cp)
        parent = cp
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as fresh:  # knows no blob yet
        nxt = dataclasses.replace(
            step(cps[-1], {"messages": [*cps[-1].values["messages"], 6]}),
            versions={"messages": "v" * 600 + "6"},
        )
        fresh.put(record("t", nxt, cps[-1]))
        assert fresh.prune("t", keep_last=2) == 5
    new_blob = f"{saver.prefix}:{{t:t}}:b::messages:{'v' * 600}6"
    assert base_ref(client, new_blob) == f":b::messages:{'v' * 600}5".encode()
    assert [r.checkpoint for r in saver.list("t")] == [nxt, cps[-1]]


def test_prune_keeps_what_kept_checkpoints_need(saver: RedisSaver, client: redis.Redis) -> None:
    cps = conversation(saver, "t", 30)
    child = conversation(saver, "t", 5, ns="child:1")
    saver.put_writes("t", "", cps[0].id, [TaskWrite("old", "n", "result", 1)])
    assert saver.prune("t", keep_last=3) == 27 + 2
    assert [r.checkpoint for r in saver.list("t")] == cps[:-4:-1]
    assert [r.checkpoint for r in saver.list("t", "child:1")] == child[:-4:-1]
    for kept in saver.list("t"):
        assert kept.checkpoint.values == next(c for c in cps if c.id == kept.checkpoint.id).values
    # No orphans: every key left is a kept checkpoint's or a blob it needs.
    keys = keys_of(client, saver, "t")
    dropped = {c.id for c in cps[:-3]}
    assert not [k for k in keys if k.rsplit(":", 1)[1] in dropped and ":c:" in k]
    assert not [k for k in keys if k.rsplit(":", 1)[1] in dropped and ":w:" in k]
    tag = f"{saver.prefix}:{{t:t}}"
    reachable = set()
    for kept_cp in [*cps[-3:], *child[-3:]]:
        ns = "" if kept_cp in cps else "child%3A1"
        for key, version in kept_cp.versions.items():
            ref: bytes | None = f":b:{ns}:{key}:{version}".encode()
            while ref:
                reachable.add(tag + ref.decode())
                ref = base_ref(client, tag + ref.decode())
    assert set(blob_keys(client, saver, "t")) == reachable  # every blob left is needed
    assert len([k for k in keys if ":c:" in k]) == 3 + 3
    assert len([k for k in keys if ":b::big:" in k]) == 1
    # The registry names every key but checkpoints and their writes (found from the index).
    registry = {s.decode() for s in client.smembers(f"{saver.prefix}:{{t:t}}:keys")}
    derived = {k for k in keys if ":c:" in k or ":w:" in k}
    assert {tag + s for s in registry} == set(keys) - derived - {tag + ":keys"}
    # The chain goes on from what was kept.
    nxt = step(cps[-1], {**cps[-1].values, "messages": [*cps[-1].values["messages"], "more"]})
    saver.put(record("t", nxt, cps[-1]))
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == nxt
    with pytest.raises(ValueError):
        saver.prune("t", keep_last=-1)


def test_prune_to_nothing_removes_the_thread(saver: RedisSaver, client: redis.Redis) -> None:
    conversation(saver, "t", 4)
    conversation(saver, "t", 2, ns="child:1")
    conversation(saver, "other", 1)
    assert saver.prune("t", keep_last=0) == 6
    assert saver.get_tuple("t") is None and list(saver.list("t", "child:1")) == []
    assert [t.thread_id for t in saver.list_threads()] == ["other"]
    assert keys_of(client, saver, "t") == []


def test_retention_keeps_the_newest_n_on_save(client: redis.Redis) -> None:
    with redis_saver(retention=Retention(max_checkpoints=4)) as saver:
        cps = conversation(saver, "t", 25)
        assert [r.checkpoint for r in saver.list("t")] == cps[:-5:-1]
        assert len([k for k in keys_of(client, saver, "t") if ":c:" in k]) == 4


async def test_retention_by_age_never_drops_the_newest() -> None:
    old = datetime.now(UTC) - timedelta(days=3)
    with redis_saver(retention=Retention(max_age=timedelta(days=1))) as saver:
        a = step(None, {"x": 1}, when=old)
        await saver.aput(record("t", a))
        b = step(a, {"x": 2}, when=old + timedelta(minutes=1))
        await saver.aput(record("t", b, a))
        assert [r.checkpoint.id async for r in saver.alist("t")] == [b.id]
        c = step(b, {"x": 3})
        await saver.aput(record("t", c, b))
        assert [r.checkpoint.id async for r in saver.alist("t")] == [c.id]
        got = await saver.aget_tuple("t")
        assert got is not None and got.checkpoint.values == {"x": 3}


def test_copy_thread_is_independent(saver: RedisSaver) -> None:
    cps = conversation(saver, "src", 5)
    saver.put_writes("src", "", cps[-1].id, [TaskWrite("w", "n", "interrupt", "ask")])
    conversation(saver, "src", 2, ns="child:1")
    saver.copy_thread("src", "dst")
    saver.delete_thread("src")
    got = saver.get_tuple("dst")
    assert got is not None and got.thread_id == "dst" and got.checkpoint == cps[-1]
    assert got.pending_writes == (TaskWrite("w", "n", "interrupt", "ask"),)
    assert len(list(saver.list("dst", "child:1"))) == 2
    assert [t.thread_id for t in saver.list_threads()] == ["dst"]
    nxt = step(cps[-1], {**cps[-1].values, "messages": [*cps[-1].values["messages"], "more"]})
    saver.put(record("dst", nxt, cps[-1]))
    saver.copy_thread("dst", "dst2")
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("dst", "dst2")
    with pytest.raises(ValueError, match="already has checkpoints"):
        saver.copy_thread("dst", "dst")
    saver.copy_thread("nothing", "dst3")  # copying an empty thread does nothing
    assert saver.get_tuple("dst3") is None
    got2 = saver.get_tuple("dst2")
    assert got2 is not None and got2.checkpoint == nxt


def test_a_base_deleted_behind_the_cache_is_stored_in_full(saver: RedisSaver) -> None:
    cps = conversation(saver, "t", 3)
    with RedisSaver(REDIS_URL, prefix=saver.prefix) as other:
        other.delete_thread("t")  # this saver's cache still knows the blobs
    old = cps[-1].values["messages"]
    values = {"messages": [*old, "more"]}
    cp = step(None, values)
    changes = {"messages": Append(cps[-1].versions["messages"], len(old))}
    saver.put(ChangedRecord("t", "", cp, {}, (), changes))  # the put retries, storing in full
    got = saver.get_tuple("t")
    assert got is not None and got.checkpoint == cp
