"""The PostgreSQL saver under concurrency: concurrent aputs sent together, a lost race failing
alone, puts and writes on one thread without deadlock, two processes racing on one parent,
and one saver across event loops.

Needs PostgreSQL; each saver gets a schema of its own (``postgres_fixtures.py``).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
from builders import step, w
from postgres_fixtures import postgres_saver, query, saver, session_schemas_dropped, url
from psycopg import sql

from threadline.checkpoint.base import Checkpoint
from threadline.checkpoint.postgres import PostgresSaver, batcher

# Fixtures of postgres_fixtures, imported for the tests here.
__all__ = ["saver", "session_schemas_dropped", "url"]

# -- concurrency ---------------------------------------------------------------------------------


def _app_url(url: str, name: str) -> str:
    return url + ("&" if "?" in url else "?") + f"application_name={name}"


def _waiting(app: str) -> int:
    rows = query(
        "public",
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s"
        " AND wait_event_type = 'Lock'",
        [app],
    )
    return rows[0][0]


async def test_concurrent_aputs_are_sent_together(url: str) -> None:
    """50 tasks put on 50 threads at once: their puts go in at most ``batcher.SENDERS``
    statements (``threadline_put_many``), not one connection and round trip each.

    The checkpoints table is locked first, so every statement that reaches the server waits
    there; the number of connections waiting at once is how many statements are in flight.
    """
    app = f"tl-{uuid.uuid4().hex[:10]}"
    with postgres_saver(url=_app_url(url, app), pool_size=10) as saver:
        await saver.aget_tuple("warm-up")
        records = [step(f"thread-{k}", {"k": k}, None) for k in range(50)]
        with psycopg.connect(url) as blocker:
            blocker.execute(
                sql.SQL("LOCK TABLE {}.threadline_checkpoints IN EXCLUSIVE MODE").format(
                    sql.Identifier(saver.schema)
                )
            )
            tasks = [asyncio.create_task(saver.aput(r)) for r in records]
            waits = []
            for _ in range(10):
                await asyncio.sleep(0.05)
                waits.append(await asyncio.to_thread(_waiting, app))
            assert not any(t.done() for t in tasks)
            blocker.rollback()  # release the lock
        await asyncio.gather(*tasks)
        assert 1 <= max(waits) <= batcher.SENDERS
        for record in records:
            got = await saver.aget_tuple(record.thread_id)
            assert got is not None and got.checkpoint == record.checkpoint


async def test_a_put_that_loses_its_race_fails_alone_in_its_batch(saver: PostgresSaver) -> None:
    firsts = [step(f"t{k}", {"k": k}, None) for k in range(6)]
    await asyncio.gather(*(saver.aput(r) for r in firsts))
    rival = step("t3", {"k": "rival"}, firsts[3].checkpoint)
    await saver.aput(rival)  # t3 moved on: a child of its first checkpoint now loses
    children = [step(f"t{k}", {"k": k + 10}, firsts[k].checkpoint) for k in range(6)]
    results = await asyncio.gather(*(saver.aput(r) for r in children), return_exceptions=True)
    assert [type(r).__name__ for r in results] == [
        "NoneType",
        "NoneType",
        "NoneType",
        "ConcurrentUpdateError",
        "NoneType",
        "NoneType",
    ]
    for k, child in enumerate(children):
        got = await saver.aget_tuple(f"t{k}")
        expected = rival if k == 3 else child
        assert got is not None and got.checkpoint == expected.checkpoint


def test_put_writes_and_puts_on_one_thread_do_not_deadlock(saver: PostgresSaver) -> None:
    first = step("t1", {"i": 0}, None)
    saver.put(first)
    head: list[Checkpoint] = [first.checkpoint]
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(k: int) -> None:
        try:
            n = 0
            while not stop.is_set():
                cp = head[-1]
                saver.put_writes("t1", "", cp.id, [w(f"task-{k}-{n % 3}", value=n)])
                n += 1
        except BaseException as exc:
            errors.append(exc)

    workers = [threading.Thread(target=writer, args=(k,)) for k in range(6)]
    for t in workers:
        t.start()
    try:
        for i in range(1, 40):
            record = step("t1", {"i": i}, head[-1], writes=(w("task-0-0", value=-i),))
            saver.put(record)
            head.append(record.checkpoint)
    finally:
        stop.set()
        for t in workers:
            t.join()
    assert errors == []
    assert [r.checkpoint.id for r in saver.list("t1")] == [cp.id for cp in reversed(head)]


_RACER = """
import json, sys, time
from datetime import UTC, datetime
from threadline.checkpoint.base import Checkpoint, CheckpointRecord
from threadline.checkpoint.ids import new_checkpoint_id
from threadline.checkpoint.postgres import PostgresSaver
from threadline.errors import ConcurrentUpdateError

name, url, schema = sys.argv[1:4]
with PostgresSaver(url, schema=schema) as saver:
    saver.get_tuple("warm-up")
    print(json.dumps({"ready": name}), flush=True)
    for line in sys.stdin:
        order = json.loads(line)
        cid = new_checkpoint_id()
        values = {"who": name, "round": order["round"]}
        cp = Checkpoint(cid, order["parent"], order["step"] + 1, values,
                        {"who": cid, "round": cid}, (), datetime.now(UTC).isoformat())
        while time.time() < order["at"]:
            pass
        try:
            saver.put(CheckpointRecord(order["thread"], "", cp, {"who": name}))
            print(json.dumps({"won": cid}), flush=True)
        except ConcurrentUpdateError as exc:
            print(json.dumps({"lost": str(exc)}), flush=True)
"""


def test_two_processes_racing_on_one_parent(saver: PostgresSaver, tmp_path: Path) -> None:
    """Two OS processes put children of the same parent at the same instant, 20 times: each
    time exactly one wins, and the history stays one line."""
    script = tmp_path / "racer.py"
    script.write_text(textwrap.dedent(_RACER))
    racers = [
        subprocess.Popen(
            [sys.executable, str(script), name, saver.url, saver.schema],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("a", "b")
    ]
    try:
        for racer in racers:
            assert racer.stdout is not None
            assert "ready" in json.loads(racer.stdout.readline())
        root = step("race", {"who": "root", "round": 0}, None)
        saver.put(root)
        head = root.checkpoint
        wins = {"a": 0, "b": 0}
        for round_ in range(1, 21):
            order = {
                "thread": "race",
                "parent": head.id,
                "step": head.step,
                "round": round_,
                "at": time.time() + 0.05,
            }
            for racer in racers:
                assert racer.stdin is not None
                racer.stdin.write(json.dumps(order) + "\n")
                racer.stdin.flush()
            answers = [json.loads(r.stdout.readline()) for r in racers]  # type: ignore[union-attr]
            won = [a["won"] for a in answers if "won" in a]
            lost = [a["lost"] for a in answers if "lost" in a]
            assert len(won) == 1 and len(lost) == 1, answers
            assert head.id in lost[0] and won[0] in lost[0]  # names expected and actual head
            got = saver.get_tuple("race")
            assert got is not None and got.checkpoint.id == won[0]
            wins[got.checkpoint.values["who"]] += 1
            head = got.checkpoint
        history = list(saver.list("race"))
        assert len(history) == 21
        for newer, older in itertools.pairwise(history):
            assert newer.checkpoint.parent_id == older.checkpoint.id
            assert newer.checkpoint.values["round"] == older.checkpoint.values["round"] + 1
        assert history[-1].checkpoint.id == root.checkpoint.id
    finally:
        for racer in racers:
            if racer.stdin is not None:
                racer.stdin.close()
        for racer in racers:
            racer.wait(timeout=30)
    assert all(r.returncode == 0 for r in racers)


def test_one_saver_across_event_loops(saver: PostgresSaver) -> None:
    record = step("t1", {"x": 1}, None)

    async def put() -> None:
        await saver.aput(record)

    async def get() -> Any:
        return await saver.aget_tuple("t1")

    asyncio.run(put())
    got = asyncio.run(get())  # a new loop gets its own pool
    assert got is not None and got.checkpoint == record.checkpoint
